"""Options and output helpers shared by every command group."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar

import click

from agentd.home import Home

F = TypeVar("F", bound=Callable[..., Any])

# Stable exit codes, documented in the README.
EXIT_ERROR = 1        # bad input or a failure the message explains
EXIT_CHECK_FAILED = 3  # a check ran and found something wrong (verify, lineage --check)
EXIT_INTERRUPTED = 130


@dataclass
class App:
    """What every command gets: the home it works in."""

    home: Home


pass_app = click.make_pass_decorator(App)


def json_option(f: F) -> F:
    """--json: print data as JSON (one document, or JSON lines for streams)."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(f)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def emit_json_line(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str))


def emit_table(rows: Iterable[Iterable[Any]]) -> None:
    """Left-aligned columns, two spaces apart."""
    cells = [[str(c) for c in row] for row in rows]
    if not cells:
        return
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(max(map(len, cells)))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def progress(message: str) -> None:
    """Progress and logs go to stderr so stdout stays data."""
    click.echo(message, err=True)


class CheckFailed(click.ClickException):
    """A check ran and found something wrong; exit code 3."""

    exit_code = EXIT_CHECK_FAILED

    def show(self, file: Any = None) -> None:
        click.echo(f"agentd: check failed: {self.message}", err=True)
