"""`--json` keeps one shape for one thing: every command that lists prints one JSON array
of objects, and a thing (a wallet, an entry, a bond, a profile, a session, a release)
has the same keys, with the same values, wherever it is listed and where it is shown;
the show form may add keys, never rename one. Held on the demo's home, where every list
has something in it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from agentd.cli import cli
from agentd.home import Home
from tests.homekit import run_in_process
from tests.serve.daemonkit import demo_home

Item = dict[str, Any]

# Each command that lists: how to run it, the command that shows one thing it lists and
# the key naming that thing there (None: nothing shows one: a packaged model, a job).
LISTS: dict[str, tuple[list[str], str | None, str | None]] = {
    "wallet list": (["wallet", "list"], "wallet show", "name"),
    "ledger log": (["ledger", "log"], "ledger show", "pulse"),
    "bond list": (["bond", "list"], "bond show", "bond"),
    "profile list": (["profile", "list"], "profile show", "name"),
    "sessions list": (["sessions", "list"], "sessions show", "id"),
    "improve releases list": (["improve", "releases", "list", "invoices-code"], "improve releases show", "release"),
    "local list": (["local", "list"], None, None),
    "schedule list": (["schedule", "list"], None, None),
}
# Commands that show one thing no command lists.
SHOWS_ALONE = {"witness show": ["witness", "show"]}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """A copy of the demo's home (made once for the test session), with a witness."""
    cache = tmp_path_factory.getbasetemp() / "serve-cache"
    cache.mkdir(exist_ok=True)
    made = demo_home(cache, tmp_path_factory.mktemp("shapes") / "home")
    assert agentd_json(made, "witness", "new") is not None
    return made


def agentd_json(home: Home, *args: str) -> Any:
    done = run_in_process(["--home", str(home.root), *args, "--json"])
    assert done.code == 0, (args, done.err)
    return json.loads(done.out)


def _leaves(command: click.Command, path: str = "") -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            sub = command.get_command(click.Context(command), name)
            assert sub is not None
            yield from _leaves(sub, f"{path} {name}".strip())
    else:
        yield path, command


def test_every_command_that_lists_or_shows_is_held_here() -> None:
    """A command added later that lists or shows is held to the rule too: it has to be named here."""
    takes_json = {path for path, c in _leaves(cli) if any(p.name == "as_json" for p in c.params)}
    listing_or_showing = {p for p in takes_json if p.rsplit(" ", 1)[-1] in ("list", "show", "log")}
    shows = {show for _, show, _ in LISTS.values() if show}
    assert listing_or_showing == set(LISTS) | shows | set(SHOWS_ALONE)


@pytest.mark.parametrize("name", LISTS)
def test_a_list_is_one_array_of_objects_and_a_thing_shown_keeps_its_listed_keys(home: Home, name: str) -> None:
    args, show, key = LISTS[name]
    listed = agentd_json(home, *args)
    assert isinstance(listed, list) and listed, f"{name} listed nothing on the demo's home"
    assert all(isinstance(item, dict) for item in listed)
    assert len({frozenset(item) for item in listed}) == 1, f"{name}: its items differ in their keys"
    if show is None or key is None:
        return
    for item in listed[:3]:
        shown = agentd_json(home, *show.split(), str(item[key]))
        assert isinstance(shown, dict)
        renamed = set(item) - set(shown)
        assert not renamed, f"{show} lacks {sorted(renamed)}, which {name} has"
        assert {k: shown[k] for k in item} == item


def test_a_session_is_keyed_alike_by_list_show_and_run(home: Home) -> None:
    """The keys the issue found renamed: `started`, `claim` and `tokens: {in, out}` everywhere."""
    (first, *_) = agentd_json(home, "sessions", "list")
    shown = agentd_json(home, "sessions", "show", first["id"])
    assert {"started", "claim", "tokens"} <= set(shown) and set(shown["tokens"]) == {"in", "out"}
    assert not {"started_at", "claim_id", "tokens_in", "tokens_out"} & set(shown)
    assert shown["transcript"] and shown["ended_at"] >= shown["started"]


def test_a_release_shown_is_its_listed_record_and_its_claim(home: Home) -> None:
    (listed,) = agentd_json(home, "improve", "releases", "list", "invoices-code")
    shown = agentd_json(home, "improve", "releases", "show", listed["release"])
    assert shown["body"]["release"] == {k: v for k, v in listed.items() if k != "patch_file"}
    assert Path(shown["patch_file"]).is_file() and len(shown["claim"]) == 64 and shown["pulse"] >= 1
    text = run_in_process(["--home", str(home.root), "improve", "releases", "show", listed["release"]])
    assert text.code == 0 and text.out.splitlines() == [
        f"release {listed['release']}: {listed['summary']} (agent.py +1 -1) on commit {listed['commit'][:12]}; "
        f"patch {listed['patch_file']}",
        f"claim {shown['claim']} at Pulse {shown['pulse']}, by {shown['author']} at {shown['at']}",
    ]


@pytest.mark.parametrize("name", SHOWS_ALONE)
def test_what_is_shown_alone_is_one_object(home: Home, name: str) -> None:
    assert isinstance(agentd_json(home, *SHOWS_ALONE[name]), dict)


def test_a_list_with_nothing_in_it_is_an_empty_array(home: Home) -> None:
    assert agentd_json(home, "sessions", "list", "--outcome", "interrupted") == []
    assert agentd_json(home, "bond", "list", "--owner", "invoices") == []
