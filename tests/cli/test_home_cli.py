"""The home: only `init` and `demo` create one; every other command names a missing home;
a read-only home can still be read and verified; what is in a home is its owner's alone."""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.app.demo import PROFILE
from agentd.app.httplimits import http_limits
from agentd.app.ledger import checkpoint_policy
from agentd.app.queued import LEASE
from agentd.home import Home
from agentd.providers.settings import retry_policy
from agentd.server.ledgers import Rates
from sandbox import Limits, limits_from
from tests.cli.test_wallet_cli import one_error_line
from tests.homekit import Result, run_in_process
from tests.mounts import read_only_view

TASKS = "tasks.json"  # a file that exists, for the commands whose arguments must

# Every command that needs a home, with arguments it accepts. `case`, `improve validate`
# and `improve env` work on files alone and need none.
NEEDS_A_HOME = [
    ["wallet", "new", "alice"],
    ["wallet", "list"],
    ["wallet", "show", "alice"],
    ["wallet", "fund", "alice", "1"],
    ["wallet", "transfer", "alice", "bob", "1"],
    ["ledger", "log"],
    ["ledger", "show", "1"],
    ["ledger", "checkpoint"],
    ["ledger", "prove", "1"],
    ["ledger", "verify"],
    ["ledger", "export", "copy.jsonl"],
    ["ledger", "import", TASKS],
    ["profile", "new", "p"],
    ["profile", "list"],
    ["profile", "show", "p"],
    ["run", "p", "a task"],
    ["sessions", "list"],
    ["sessions", "show", "abcd"],
    ["sessions", "import", TASKS, "--profile", "p"],
    ["improve", "mark", "abcd", "--good"],
    ["improve", "harvest", "p", "--out", "work.json"],
    ["improve", "export", "p", "--out", "train"],
    ["improve", "seal", "p", "--tasks", TASKS],
    ["improve", "run", "p", "--proposer", "script:x.toml"],
    ["improve", "adopt", "p", "abcd"],
    ["improve", "undo", "p"],
    ["improve", "lineage", "p"],
    ["lineage", "p"],
    ["lineage", "p", "--check"],
    ["kill-switch", "on"],
    ["kill-switch", "off"],
    ["kill-switch", "status"],
]


def agentd_at(root: Path | str, *args: str, env: dict[str, str] | None = None) -> Result:
    return run_in_process(["--home", str(root), *args], env=env)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding a file for the arguments that must exist."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / TASKS).write_text("{}")
    return tmp_path


@pytest.mark.parametrize("args", NEEDS_A_HOME, ids=" ".join)
def test_a_missing_home_is_named_and_never_created(elsewhere: Path, args: list[str]) -> None:
    typo = elsewhere / "typo"
    line = one_error_line(agentd_at(typo, *args))
    assert (
        line
        == f"agentd: error: no agentd home at {typo}; create one with: agentd --home {typo} init (or give the right --home)"
    )
    assert sorted(p.name for p in elsewhere.iterdir()) == [TASKS]  # no home, nor anything else, made


def test_a_folder_that_is_not_a_home_is_not_made_one(elsewhere: Path) -> None:
    for args in (["sessions", "list"], ["wallet", "list"], ["kill-switch", "on"], ["ledger", "verify"]):
        one_error_line(agentd_at(elsewhere, *args))
    assert sorted(p.name for p in elsewhere.iterdir()) == [TASKS]


@pytest.mark.parametrize("home_var", [None, ""], ids=["HOME unset", "HOME empty"])
def test_without_home_there_is_no_default_home(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch, home_var: str | None
) -> None:
    monkeypatch.delenv("AGENTD_HOME", raising=False)
    if home_var is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home_var)
    for args in (["init"], ["wallet", "list"], ["ledger", "log"]):
        r = run_in_process(args)
        line = one_error_line(r)
        assert line.startswith("agentd: error: HOME is not set, so there is no default home (~/.agentd)")
        assert "give --home DIR or set AGENTD_HOME" in line
    assert run_in_process(["--help"]).code == 0  # what needs no home still works
    assert run_in_process(["improve", "validate", "--help"]).code == 0


def test_an_empty_home_option_is_a_wrong_value(elsewhere: Path) -> None:
    assert "is empty" in one_error_line(agentd_at("", "wallet", "list"), code=2)
    assert sorted(p.name for p in elsewhere.iterdir()) == [TASKS]


def test_init_creates_what_its_help_says(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    r = agentd_at(root, "init")
    assert r.code == 0, r.err
    assert "config.toml with every setting at its default" in agentd_at(root, "init", "--help").out.replace(
        "\n    ", " "
    )
    assert {p.name for p in root.iterdir()} >= {
        "config.toml",
        "log-key.json",
        "ledger.db",
        "wallets",
        "profiles",
        "routes",
    }
    assert Home(root).config == {}  # every setting commented out: the defaults hold
    assert f"config: {root / 'config.toml'} (created" in r.out
    assert agentd_at(root, "wallet", "list").code == 0


# The settings init writes with a value that is an example, not a default (they have none).
EXAMPLES = ("url", "base_url", "api_key", "threads", "runner", "intake_token", "queue")


def test_init_writes_every_setting_commented_out_at_its_default(tmp_path: Path) -> None:
    fresh, uncommented = Home(tmp_path / "fresh"), Home(tmp_path / "uncommented")
    for home in (fresh, uncommented):
        assert agentd_at(home.root, "init").code == 0
    text = re.sub(r"^# (?=\[|\w+ = )", "", fresh.config_path.read_text(), flags=re.M)
    settings = tomllib.loads(text)
    assert set(settings) == {"ledger", "openai", "anthropic", "providers", "local", "sandbox", "serve", "trials"}
    assert {"checkpoint_every", "checkpoint_seconds"} <= set(settings["ledger"])
    assert {"intake_token", "entries_per_second", "entries_burst", "idle_timeout"} <= set(settings["serve"])
    # Uncommented, less the examples, they are what a home with none of them set does.
    kept = "\n".join(line for line in text.splitlines() if not line.startswith(tuple(f"{key} = " for key in EXAMPLES)))
    uncommented.config_path.write_text(kept)
    assert checkpoint_policy(uncommented) == checkpoint_policy(fresh)
    assert http_limits(uncommented) == http_limits(fresh) and retry_policy(uncommented) == retry_policy(fresh)
    rates, defaults = Rates.of(uncommented), Rates.of(fresh)
    assert (rates.rate, rates.burst) == (defaults.rate, defaults.burst)
    assert limits_from(uncommented.config["sandbox"]) == Limits()
    assert uncommented.config["trials"] == {"lease": LEASE, "trusted": []}


@pytest.fixture
def umask_0() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_everything_in_a_home_is_its_owners_alone_whatever_the_umask(tmp_path: Path, umask_0: None) -> None:
    root = tmp_path / "demo"
    r = agentd_at(root, "demo")
    assert r.code == 0, r.err
    assert agentd_at(root, "kill-switch", "on").code == 0
    assert agentd_at(root, "profile", "new", "other").code == 0
    wrong = [
        f"{oct(stat.S_IMODE(p.lstat().st_mode))} {p}"
        for p in [root, *root.rglob("*")]
        if stat.S_IMODE(p.lstat().st_mode) != (0o700 if p.is_dir() else 0o600)
    ]
    assert not wrong, "\n".join(wrong)
    copy = tmp_path / "copy.jsonl"
    assert agentd_at(root, "ledger", "export", str(copy)).code == 0
    assert stat.S_IMODE(copy.stat().st_mode) == 0o644  # meant for others: 0644 less the user's umask (here 0)


# -- a read-only home ------------------------------------------------------------------

READS = [
    ["sessions", "list"],
    ["sessions", "list", "--json"],
    ["wallet", "list"],
    ["wallet", "show", PROFILE],
    ["ledger", "log"],
    ["ledger", "show", "2"],
    ["ledger", "verify"],
    ["ledger", "checkpoint"],
    ["ledger", "prove", "2"],
    ["ledger", "export", "-"],
    ["profile", "list"],
    ["profile", "show", PROFILE],
    ["lineage", PROFILE],
    ["lineage", PROFILE, "--check"],
    ["kill-switch", "status"],
    ["schedule", "list"],
]
WRITES = [
    ["kill-switch", "on"],
    ["wallet", "new", "carol"],
    ["wallet", "fund", PROFILE, "1"],
    ["run", PROFILE, "Pay invoice 21 from Acme, 5 USD, to acme."],
    ["profile", "new", "other"],
    ["schedule", "add", PROFILE, "harvest", "0 1 * * *"],
    ["schedule", "remove", PROFILE, "code"],
]


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home the demo filled, with a checkpoint of its whole log signed."""
    root = tmp_path_factory.mktemp("read-only") / "home"
    assert agentd_at(root, "demo").code == 0
    assert agentd_at(root, "ledger", "checkpoint").code == 0
    assert agentd_at(root, "schedule", "add", PROFILE, "harvest", "15 1 * * *").code == 0  # the job store made
    return root


def test_a_read_only_home_is_read_and_verified(demo_home: Path, tmp_path: Path) -> None:
    with read_only_view(demo_home) as view:
        for args in READS:
            r = agentd_at(view, *args)
            assert r.code == 0 and "Traceback" not in r.err, (args, r.err)
        checked = agentd_at(view, "lineage", PROFILE, "--check")
        assert "confirmed on tasks sealed at Pulse" in checked.out
        assert len(json.loads(agentd_at(view, "sessions", "list", "--json").out)) == 30  # 12 + 12 + the examined 6
        jobs = json.loads(agentd_at(view, "schedule", "list", "--json").out)
        assert {(j["profile"], j["job"], j["cron"]) for j in jobs} >= {(PROFILE, "harvest", "15 1 * * *")}
        harvested = agentd_at(view, "improve", "harvest", PROFILE, "--out", str(tmp_path / "work.json"))
        assert harvested.code == 0, harvested.err
        for args in WRITES:
            line = one_error_line(agentd_at(view, *args))
            assert "read-only" in line.lower(), (args, line)


@pytest.mark.parametrize(
    "args, kind",
    [
        (["sessions", "list"], list),
        (["wallet", "list"], list),
        (["ledger", "log"], list),
        (["profile", "list"], list),
        (["sessions", "show", "0"], dict),
        (["wallet", "show", PROFILE], dict),
        (["ledger", "show", "1"], dict),
        (["ledger", "verify"], dict),
        (["ledger", "checkpoint"], dict),
        (["profile", "show", PROFILE], dict),
        (["lineage", PROFILE, "--check"], dict),
        (["kill-switch", "status"], dict),
    ],
    ids=lambda x: " ".join(x) if isinstance(x, list) else x.__name__,
)
def test_json_is_an_array_for_a_list_and_an_object_otherwise(demo_home: Path, args: list[str], kind: type) -> None:
    if args[:2] == ["sessions", "show"]:
        args = [*args[:2], json.loads(agentd_at(demo_home, "sessions", "list", "--json").out)[0]["id"]]
    r = agentd_at(demo_home, *args, "--json")
    assert r.code == 0, r.err
    assert isinstance(json.loads(r.out), kind)


def test_the_kill_switch_on_a_read_only_home_is_one_clear_line(demo_home: Path) -> None:
    with read_only_view(demo_home) as view:
        line = one_error_line(agentd_at(view, "kill-switch", "on"))
        assert (
            line
            == f"agentd: error: cannot turn the kill switch on: the home {view} is read-only here (Read-only file system)"
        )
        assert agentd_at(view, "kill-switch", "status").out == "kill switch is off\n"


def test_what_works_from_files_alone_needs_no_home(
    demo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work.json"
    work.write_bytes((demo_home / "work.json").read_bytes())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTD_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    validated = run_in_process(["improve", "validate", str(work)])
    assert validated.code == 0, validated.err
    silent = json.dumps({"message": {"role": "assistant", "content": "Done."}}) + "\n"
    episode = run_in_process(["improve", "env", "--tasks", str(work), "--case", "work-1"], input=silent)
    assert episode.code == 0, episode.err
    assert json.loads(episode.out.splitlines()[-1])["done"]["passed"] is False  # a run that does nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work.json"]
