"""Options and output helpers shared by every command group."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from functools import cached_property
from itertools import chain, islice
from pathlib import Path
from typing import Any, TypeVar

import click

from agentd.errors import AgentdError
from agentd.home import Home

F = TypeVar("F", bound=Callable[..., Any])

# Stable exit codes, documented in the README.
EXIT_ERROR = 1  # bad input or a failure the message explains
EXIT_USAGE = 2  # a wrong option or value
EXIT_CHECK_FAILED = 3  # a check ran and found something wrong (verify, lineage --check)
EXIT_INTERRUPTED = 130


class App:
    """What every command gets: the home it works in, found when first asked for, so that
    `--help` and the commands that need no home never look for one."""

    def __init__(self, given: str | None) -> None:
        self.given = given  # --home, or AGENTD_HOME through click

    @cached_property
    def place(self) -> Home:
        """Where the home is or will be: for `init` and `demo`, which alone create one."""
        return Home.resolve(self.given)

    @property
    def home(self) -> Home:
        """The home, which must exist; any other command names the missing home."""
        return self.place.require()

    def home_if_any(self) -> Home | None:
        """The home when there is one, for a command that can do without (`improve env`)."""
        try:
            return self.place if self.place.exists else None
        except AgentdError:
            return None


pass_app = click.make_pass_decorator(App)


def json_option(f: F) -> F:
    """--json, by one rule for every command: a list is one JSON array, anything else one
    JSON object, and only a stream (`improve run`'s events, as they happen) is JSON
    lines, one object a line."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text (see `agentd --help`).")(f)


def baseline_runs_option(f: F) -> F:
    """`--baseline-runs`, shared by every command that runs the loop's decisions."""
    return click.option(
        "--baseline-runs",
        type=click.IntRange(min=1),
        help="Runs of each task measuring the agent as it is, once for every change  [default: 4 x --runs]",
    )(f)


def concurrency_option(f: F) -> F:
    """`--concurrency N`, shared by the commands that run trials: the runs at once here. A
    trial through a queue hands the workers all its runs at once: each bounds its own."""
    return click.option(
        "--concurrency",
        type=click.IntRange(min=1),
        default=8,
        show_default=True,
        help="Runs at once in a trial, here (with --queue, each worker's own --concurrency bounds its runs).",
    )(f)


def queue_option(f: F) -> F:
    """`--queue URL`, shared by the commands that run trials: their runs go to the
    workers on that trial queue (`agentd worker`) instead of running here."""
    return click.option(
        "--queue",
        metavar="URL",
        help="Run the trials through the workers on this queue (a PostgreSQL URL; agentd worker)  "
        "[default: the home's [trials] queue, else here]",
    )(f)


def sandbox_options(f: F) -> F:
    """`--readable PATH` and `--env VAR=VALUE` (each repeatable), shared by the commands
    that build and run code in the sandbox; `agentd.app.runners.sandbox_extras` checks them."""
    f = click.option("--env", "env", multiple=True, help="VAR=VALUE in the sandbox's environment (repeat).")(f)
    return click.option(
        "--readable",
        multiple=True,
        type=click.Path(path_type=Path),
        # Relative to where the command runs, as the user means it; the sandbox runs elsewhere.
        callback=lambda ctx, param, paths: tuple(p.absolute() for p in paths),
        help="A further read-only path in the sandbox (repeat).",
    )(f)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def emit_json_line(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str))


def emit_json_array(items: Iterable[Any]) -> None:
    """What emit_json prints for a list of `items`, printed item by item as they come, so
    that a long listing is never held whole."""
    opened = False
    for item in items:
        text = json.dumps(item, indent=2, ensure_ascii=False, default=str)
        click.echo(("," if opened else "[") + "\n" + textwrap.indent(text, "  "), nl=False)
        opened = True
    click.echo("\n]" if opened else "[]")


def emit_table(rows: Iterable[Iterable[Any]], measured: int = 1000) -> None:
    """Left-aligned columns, two spaces apart, as wide as the first `measured` rows need:
    rows after those are printed as they come (a longer cell only pushes its line on)."""
    rest = iter(rows)
    first = [[str(c) for c in row] for row in islice(rest, measured)]
    if not first:
        return
    widths = [max(len(r[i]) for r in first if i < len(r)) for i in range(max(map(len, first)))]
    for row in chain(first, ([str(c) for c in row] for row in rest)):
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())


# The umask agentd was started with, kept by `invoke` before it sets its own (077).
USERS_UMASK: list[int] = []


@contextmanager
def users_umask() -> Iterator[None]:
    """The user's own umask, rather than agentd's 077: for a file written for others to
    read (an exported copy of the log)."""
    own = os.umask(USERS_UMASK[-1]) if USERS_UMASK else None
    try:
        yield
    finally:
        if own is not None:
            os.umask(own)


def progress(message: str) -> None:
    """Progress and logs go to stderr so stdout stays data."""
    click.echo(message, err=True)


def warn_skipped(problem: AgentdError) -> None:
    """Says on stderr that something a listing could do without was passed over: names
    beside ids are only a help, so an unreadable wallet file does not stop it."""
    progress(f"agentd: warning: skipped {problem}")


class CheckFailed(click.ClickException):
    """A check ran and found something wrong; exit code 3."""

    exit_code = EXIT_CHECK_FAILED

    def show(self, file: Any = None) -> None:
        click.echo(f"agentd: check failed: {self.message}", err=True)


# A negative amount ("-5") is a wrong amount, not an unknown option: it reaches USD's check.
NUMBERS = {"ignore_unknown_options": True}


class Usd(click.ParamType[int]):
    """An amount of USD, like 12.50, as integer cents; anything else is a wrong value (exit 2)."""

    name = "usd"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_usd(str(value))
        except AgentdError as exc:
            self.fail(str(exc), param, ctx)


def parse_usd(text: str) -> int:
    """'12.50' -> 1250 cents: a positive amount with at most two decimals."""
    from ledger import MAX_CENTS  # here, so that `agentd --help` never loads the ledger

    try:
        amount = Decimal(text.strip())
    except InvalidOperation:
        raise AgentdError(f"{text!r} is not an amount: give USD like 12.50") from None
    if not amount.is_finite():
        raise AgentdError(f"{text!r} is not an amount: give USD like 12.50")
    cents = amount * 100
    if cents != cents.to_integral_value():
        raise AgentdError(f"{text!r} is not a whole number of cents: give at most two decimals")
    if cents <= 0:
        raise AgentdError(f"{text!r} is out of range: give an amount above 0")
    if cents > MAX_CENTS:
        raise AgentdError(f"{text!r} is out of range: give at most {format_usd(MAX_CENTS)}")
    return int(cents)


def format_usd(cents: int) -> str:
    whole, part = divmod(abs(cents), 100)
    return f"{'-' if cents < 0 else ''}{whole}.{part:02d} USD"
