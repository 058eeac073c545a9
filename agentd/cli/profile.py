"""`agentd profile`: create and show profiles."""

from __future__ import annotations

import click

from agentd.cli.completers import profiles, wallets
from agentd.cli.options import App, emit_json, json_option, pass_app
from agentd.profiles import list_profiles, load_profile, new_profile, profile_dir
from agentd.runtime import system_prompt
from agentd.wallets import create_wallet, wallet_exists


@click.group("profile", short_help="Profiles: the operator's words, models and tools.")
def command() -> None:
    """Profiles: what the operator tells the agent, its models, tools and lessons."""


@command.command("new")
@click.argument("name")
@click.option("--operator", default="You are a careful assistant.", help="The operator's words, first in the prompt.")
@click.option(
    "--model", "models", multiple=True, help="A model it may run on, provider:model (repeat; first is the default)."
)
@click.option(
    "--wallet",
    shell_complete=wallets,
    help="The wallet that signs its entries (default: one named after the profile, created if missing).",
)
@json_option
@pass_app
def new(app: App, name: str, operator: str, models: tuple[str, ...], wallet: str | None, as_json: bool) -> None:
    """Create profile NAME in $AGENTD_HOME/profiles/NAME/profile.toml."""
    home = app.home.ensure()
    folder = new_profile(home, name, operator, list(models) or ["openai:gpt-4o-mini"], wallet)
    if not wallet_exists(home, wallet or name):
        create_wallet(home, wallet or name)
    if as_json:
        emit_json({"profile": name, "file": str(folder / "profile.toml"), "wallet": wallet or name})
    else:
        click.echo(f"profile {name} created: {folder / 'profile.toml'}")


@command.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """List the profiles of this home."""
    names = list_profiles(app.home)
    if as_json:
        # Keyed as `profile show` keys them; the rest of a profile is read only by `show`.
        emit_json([{"name": n, "dir": str(profile_dir(app.home, n))} for n in names])
    else:
        for n in names:
            click.echo(n)


@command.command("show")
@click.argument("name", shell_complete=profiles)
@json_option
@pass_app
def show(app: App, name: str, as_json: bool) -> None:
    """Show a profile: the operator's words, lessons, models and tools."""
    p = load_profile(app.home, name)
    data = {
        "name": p.name,
        "dir": str(p.dir),
        "operator": p.operator.strip(),
        "lessons": p.learned.lessons,
        "learned_step": p.learned.step,
        "models": p.run_models,
        "profile_models": p.models,
        "tools": [{**t.info(), "run": t.run, "command": list(t.command or [])} for t in p.tools],
        "wallet": p.wallet,
        "confidential": p.confidential,
        "limits": {"max_turns": p.limits.max_turns, "max_tokens": p.limits.max_tokens},
        "system_prompt": system_prompt(p.operator, p.learned.lessons),
    }
    if as_json:
        emit_json(data)
        return
    click.echo(f"profile {p.name} ({p.dir})")
    click.echo(f"models: {', '.join(p.run_models)}" + ("" if p.run_models == p.models else " (chosen by the loop)"))
    click.echo(f"wallet: {p.wallet}{'; confidential' if p.confidential else ''}")
    click.echo(f"limits: {p.limits.max_turns} turns, {p.limits.max_tokens} tokens")
    click.echo("operator's words:")
    click.echo("  " + p.operator.strip().replace("\n", "\n  "))
    click.echo("learned:" + (f" (step {p.learned.step})" if p.learned.step else ""))
    click.echo("  " + (p.learned.lessons.strip().replace("\n", "\n  ") or "(nothing yet)"))
    click.echo("tools:")
    for t in p.tools:
        how = "changes something" if t.changes else "only reads"
        click.echo(f"  {t.name}: {how}; {t.description}")
