"""The `agentd` command line: a thin layer over library calls (agentd/app/).

Each command group lives in its own module, exporting `command`, and is loaded only when
it runs: `agentd --help` and a quick command never pay for what other commands import.
Errors that the user can act on become one line on stderr (`agentd: error: ...`) and a
non-zero exit.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from dataclasses import dataclass

import click

from agentd import __version__
from agentd.cli.options import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE, USERS_UMASK, App
from agentd.errors import AgentdError
from agentd.home import PRIVATE_UMASK


@dataclass(frozen=True)
class CommandEntry:
    module: str
    help: str  # the short help `agentd --help` shows without loading the module
    attribute: str = "command"


# Every command, in the order `agentd --help` lists them.
COMMANDS: dict[str, CommandEntry] = {
    "init": CommandEntry("agentd.cli.init", "Create the home and the log's own key."),
    "demo": CommandEntry("agentd.cli.demo", "Run the invoices example end to end in a fresh home."),
    "wallet": CommandEntry("agentd.cli.wallet", "Wallets: keys that sign entries and hold funds."),
    "ledger": CommandEntry("agentd.cli.ledger", "The signed append-only log: read, prove, verify, export."),
    "bond": CommandEntry(
        "agentd.cli.bond", "Bonds: funds locked behind attestations, slashed when one is shown false."
    ),
    "challenge": CommandEntry(
        "agentd.cli.bond", "Challenge an attestation or an examination on its bond, with a deposit.", "challenge"
    ),
    "rule": CommandEntry("agentd.cli.bond", "Rule on a challenge, as the bond's adjudicator.", "rule"),
    "witness": CommandEntry("agentd.cli.witness", "A witness: cosign logs' checkpoints after checking they only grew."),
    "profile": CommandEntry("agentd.cli.profile", "Profiles: the operator's words, models and tools."),
    "local": CommandEntry("agentd.cli.local", "Models run on this machine: the packaged ones, pulled once."),
    "run": CommandEntry("agentd.cli.run", "Run one live session of a profile and record it."),
    "sessions": CommandEntry("agentd.cli.sessions", "Recorded sessions: list, show, import."),
    "improve": CommandEntry("agentd.cli.improve", "Improve the agent from its own work: tasks, seals, the loop."),
    "lineage": CommandEntry(
        "agentd.cli.improve", "A profile's kept changes with their evidence; --check proves them.", "lineage"
    ),
    "serve": CommandEntry("agentd.cli.serve", "Run the daemon: schedules, the ledger over HTTP, status."),
    "examiner": CommandEntry("agentd.cli.examiner", "Hold other agents' sealed tasks and confirm changes on them."),
    "worker": CommandEntry("agentd.cli.worker", "Run the trial queue's runs on this machine, results signed."),
    "schedule": CommandEntry("agentd.cli.schedule", "Scheduled jobs: list, add, remove, run now."),
    "kill-switch": CommandEntry("agentd.cli.killswitch", "Stop every session, proposal and trial from starting."),
    "sandbox": CommandEntry("agentd.cli.sandbox", "The sandbox: check that nothing run in it gets out."),
    "case": CommandEntry("agentd.cli.case", "Run the agent runtime as a candidate over JSON lines."),
    "verify-statement": CommandEntry("agentd.cli.statement", "Check an in-toto statement's DSSE envelope offline."),
}


class Commands(click.Group):
    """A group whose commands load on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        command: click.Command = getattr(importlib.import_module(entry.module), entry.attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.help) for name, entry in COMMANDS.items()])


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    envvar="AGENTD_HOME",
    help="Where agentd keeps its state (default: $AGENTD_HOME, else ~/.agentd).",
)
@click.version_option(__version__, prog_name="agentd")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """agentd records an agent's sessions, turns them into tasks, and lets the agent
    improve itself on tasks sealed before anything is tried, with every step a signed
    entry in an append-only ledger that anyone can check offline.

    Data (what a command found, decided or made) goes to stdout; progress, warnings and
    errors to stderr. --json: a list is one JSON array, anything else one JSON object,
    a stream (improve run) JSON lines. Exit codes: 0 ok, 1 error, 2 a wrong option or
    value, 3 a check found something wrong, 130 interrupted. Only `init` and `demo`
    create a home.
    """
    ctx.obj = App(home)


def invoke(argv: list[str] | None = None) -> int:
    """Runs one command line and returns its exit code; tests call this too.

    It runs under umask 077, so that whatever agentd or the libraries under it create
    (files in the home above all: SQLite's own, locks, records) is its owner's alone."""
    umask = os.umask(PRIVATE_UMASK)
    USERS_UMASK.append(umask)
    try:
        return _run(argv)
    finally:
        USERS_UMASK.pop()
        os.umask(umask)


def _run(argv: list[str] | None) -> int:
    try:
        result = cli.main(args=argv, prog_name="agentd", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        # A wrong option or value: one line saying what, one saying where to look.
        click.echo(f"agentd: error: {exc.format_message()}", err=True)
        if exc.ctx is not None:
            click.echo(f"(see: {exc.ctx.command_path} --help)", err=True)
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("agentd: interrupted", err=True)
        return EXIT_INTERRUPTED
    except OSError as exc:
        # The file system refused (a read-only home, a full disk, a folder not there):
        # the user's to fix, so said in one line, naming the file.
        click.echo(f"agentd: error: {_os_error(exc)}", err=True)
        return EXIT_ERROR
    except Exception as exc:
        if not _for_the_user(exc):
            raise
        click.echo(f"agentd: error: {exc}", err=True)
        return getattr(exc, "exit_code", EXIT_ERROR)


def _os_error(exc: OSError) -> str:
    where = str(exc.filename) if exc.filename else "the file system"
    advice = {
        errno.EROFS: "the file system is read-only here: this command needs to write",
        errno.ENOSPC: "the disk is full: free some space and run it again",
        errno.EDQUOT: "the disk quota is used up: free some space and run it again",
        errno.EACCES: "permission denied: run it as the home's owner",
    }
    return f"{where}: {advice.get(exc.errno or 0, exc.strerror or str(exc))}"


def _for_the_user(exc: Exception) -> bool:
    """AgentdError, LedgerError and ImproverError say what is wrong and what to do. The
    last two are looked up only if their package was loaded: otherwise none was raised."""
    kinds: list[type[Exception]] = [AgentdError]
    for module, name in (("ledger.errors", "LedgerError"), ("improver.base.errors", "ImproverError")):
        if module in sys.modules:
            kinds.append(getattr(sys.modules[module], name))
    return isinstance(exc, tuple(kinds))


def main() -> None:
    sys.exit(invoke())
