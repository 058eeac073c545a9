"""`agentd improve code|releases`: the agent changing its own code, and what it kept."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agentd.app.attest import write_envelope
from agentd.app.code import BUILD, CANDIDATE, TEST, CodeRequest, releases, run_code
from agentd.app.statements import release_claim, release_envelope
from agentd.cli.completers import profiles, wallets
from agentd.cli.options import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    App,
    baseline_runs_option,
    concurrency_option,
    emit_json,
    emit_json_line,
    json_option,
    pass_app,
    progress,
    queue_option,
    sandbox_options,
)
from agentd.errors import WrongValue
from agentd.home import Home
from improver import DEFAULT_ALLOW, MAX_FILES, MAX_LINES, Event, Interrupted


@click.command("code")
@click.argument("profile", shell_complete=profiles)
@click.option(
    "--source",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A git checkout of the code, its changes committed.",
)
@click.option("--coder", required=True, help="The model that changes the code, provider:model.")
@click.option("--build", default=BUILD, show_default=True, help="Builds a tree, in the sandbox (empty: none).")
@click.option("--test", default=TEST, show_default=True, help="Tests a built tree, in the sandbox (empty: none).")
@click.option(
    "--candidate", default=CANDIDATE, show_default=True, help="Runs the built agent over the episode protocol."
)
@click.option(
    "--allow", multiple=True, help=f"A path the patch may change (repeat; default {', '.join(DEFAULT_ALLOW)})."
)
@sandbox_options
@click.option(
    "--max-files", type=click.IntRange(min=1), default=MAX_FILES, show_default=True, help="Files a patch may change."
)
@click.option(
    "--max-lines",
    type=click.IntRange(min=1),
    default=MAX_LINES,
    show_default=True,
    help="Lines a patch may add and delete.",
)
@click.option("--rounds", type=click.IntRange(min=1), default=1, show_default=True, help="Rounds to run.")
@click.option("--runs", type=click.IntRange(min=1), default=4, show_default=True, help="Runs of each task per trial.")
@baseline_runs_option
@click.option("--apply", is_flag=True, help="Apply each release's patch to the --source checkout (git apply).")
@click.option(
    "--wallet", shell_complete=wallets, help="Publish each release as an agent.release/v1 claim with this wallet."
)
@click.option(
    "--max-tokens", type=click.IntRange(min=0), help="Stop before this many tokens (coder and trials) would be passed."
)
@concurrency_option
@queue_option
@json_option
@pass_app
def code(
    app: App,
    profile: str,
    source: Path,
    coder: str,
    build: str,
    test: str,
    candidate: str,
    allow: tuple[str, ...],
    readable: tuple[Path, ...],
    env: tuple[str, ...],
    max_files: int,
    max_lines: int,
    rounds: int,
    runs: int,
    baseline_runs: int | None,
    apply: bool,
    wallet: str | None,
    max_tokens: int | None,
    concurrency: int,
    queue: str | None,
    as_json: bool,
) -> None:
    """Let PROFILE's agent change its own code: each round a coder changes a copy of
    the --source checkout; the patch, taken in a fresh clone, is held to its limits,
    built and tested in the sandbox, and the built agent is scored on the tasks as the
    loop scores any change. A confirmed change is a release; its patch is kept in
    routes/releases/. Exit 0 when every round ran, 1 when it stopped early, 130 when
    interrupted, 2 for a bad value."""

    def show(event: Event) -> None:
        if as_json:
            emit_json_line({"event": event.kind, "text": event.text, **event.data})
        else:
            click.echo(event.text)

    request = CodeRequest(
        coder=coder,
        source=source,
        build=build,
        test=test,
        candidate=candidate,
        allow=allow or DEFAULT_ALLOW,
        readable=readable,
        env=env,
        rounds=rounds,
        runs=runs,
        baseline_runs=baseline_runs,
        apply=apply,
        wallet=wallet,
        max_tokens=max_tokens,
        concurrency=concurrency,
        max_files=max_files,
        max_lines=max_lines,
        queue=queue,
    )
    stopped = run_code(app.home, profile, request, show, progress=progress if sys.stderr.isatty() else None)
    if stopped is not None:
        raise click.exceptions.Exit(EXIT_INTERRUPTED if isinstance(stopped, Interrupted) else EXIT_ERROR)


class _Releases(click.Group):
    """`releases PROFILE` lists a profile's releases (its `list` command); `releases show
    ID` shows one."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["list", *args]
        return super().parse_args(ctx, args)


@click.group("releases", cls=_Releases)
def releases_command() -> None:
    """PROFILE's releases (`releases PROFILE`), or one release (`releases show ID`)."""


@releases_command.command("list")
@click.argument("profile", shell_complete=profiles)
@json_option
@pass_app
def releases_list(app: App, profile: str, as_json: bool) -> None:
    """List PROFILE's releases: the code changes the loop kept, and where their patches are."""
    found = releases(app.home, profile)
    if as_json:
        emit_json(found)
        return
    for r in found:
        click.echo(_release_line(r))
    if not found:
        click.echo(f"profile {profile} has no release yet")


@releases_command.command("show")
@click.argument("release")
@click.option("--intoto", is_flag=True, help="Write the release as an in-toto statement in a DSSE envelope.")
@click.option(
    "--wallet",
    shell_complete=wallets,
    help="The wallet that signs the statement (default: this home's wallet that published it).",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the statement here, not to stdout.")
@json_option
@pass_app
def releases_show(app: App, release: str, intoto: bool, wallet: str | None, out: Path | None, as_json: bool) -> None:
    """Show RELEASE (its id, or its claim id) as its agent.release/v1 claim publishes it:
    what `releases PROFILE` lists of it, then its claim (--json: the listed keys, then
    the claim's id, Pulse, author, time and body). With --intoto, as an in-toto Statement
    v1 (predicate type https://agentd.dev/release/v1) in a DSSE envelope signed by
    --wallet: JSON either way."""
    if wallet and not intoto:
        raise WrongValue("--wallet signs the in-toto statement: give --intoto too")
    if intoto:
        document = release_envelope(app.home, release, wallet)
    else:
        document = _release_shown(app.home, release_claim(app.home, release))
        if not (as_json or out):
            click.echo(_release_line(document))
            click.echo(
                f"claim {document['claim']} at Pulse {document['pulse']}, by {document['author']} at {document['at']}"
            )
            return
    if out:
        write_envelope(out, document)
        click.echo(f"wrote {out}", err=True)
    else:
        emit_json(document)


def _release_shown(home: Home, claim: dict[str, Any]) -> dict[str, Any]:
    """A release as `releases PROFILE --json` lists it (its record, and its patch's path
    here, or null for a release this home does not keep), then its claim."""
    record = claim["body"]["release"]
    patch = home.routes.release_patch(record["release"])
    return {**record, "patch_file": str(patch) if patch.exists() else None, **claim}


def _release_line(r: dict[str, Any]) -> str:
    kept = f"patch {r['patch_file']}" if r["patch_file"] else "its patch is not kept here"
    return (
        f"release {r['release']}: {r['summary']} ({', '.join(r['files'])} +{r['added']} -{r['deleted']}) "
        f"on commit {r['commit'][:12]}; {kept}"
    )
