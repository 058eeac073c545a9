"""`agentd sandbox check`: is this machine safe to run candidates on?"""

from __future__ import annotations

import click

from agentd.app.runners import sandbox_runner
from agentd.cli.options import App, CheckFailed, emit_json, json_option, pass_app, progress
from sandbox import PROBES, RUNNERS, Probe, Verdict, check_escapes


@click.group("sandbox", short_help="The sandbox: check that nothing run in it gets out.")
def command() -> None:
    """The sandbox candidate programs (and, later, builds and tests) run in."""


@command.command("check")
@click.option("--runner", type=click.Choice(sorted(RUNNERS)), help="Check this runner instead of the configured one.")
@json_option
@pass_app
def check(app: App, runner: str | None, as_json: bool) -> None:
    """Run the escape probes in the sandbox and say whether each held.

    Each probe is a real program trying one way out: keys in the environment or another
    process's memory, the home, sockets, the process, memory, file-size, scratch and
    output limits, outliving the run, the terminal, ptrace, mount, host processes.
    Exit 3 if any got out.
    """
    chosen = sandbox_runner(app.home, runner)
    progress(f"running {len(PROBES)} escape probes in the {chosen.name} sandbox")

    def show(probe: Probe, verdict: Verdict) -> None:
        if not as_json:
            said = "" if verdict.held else f": {verdict.detail}"
            click.echo(f"{'held' if verdict.held else 'NOT HELD':8}  {probe.title}{said}")

    verdicts = check_escapes(chosen, show)
    if as_json:
        emit_json([{"probe": p.name, "title": p.title, "held": v.held, "detail": v.detail} for p, v in verdicts])
    got_out = [p for p, v in verdicts if not v.held]
    if got_out:
        raise CheckFailed(f"{len(got_out)} of {len(verdicts)} probes got out of the {chosen.name} sandbox")
    progress(f"every probe held in the {chosen.name} sandbox")
