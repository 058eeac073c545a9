"""Every command group, in the order `agentd --help` lists them."""

from __future__ import annotations

import click

ALL: list[click.Command] = []
