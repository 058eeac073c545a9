"""Every command group, in the order `agentd --help` lists them."""

from __future__ import annotations

import click

from agentd.cli import case, demo, improve, init, killswitch, ledger, loop, profile, run, sandbox, sessions, wallet

ALL: list[click.Command] = [
    case.command,
]
ALL += [demo.command, init.command, wallet.command, ledger.command]
ALL += [profile.group, run.command, sessions.group, improve.group, loop.lineage, killswitch.command, sandbox.group]
