"""A name this home does not have is one mistake, answered alike by every command that is
given one: exit 1, one line, the nearest name when it is a typo (else the names there
are), never advice to make a local key for someone else's wallet, and nothing made for
the name on the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.home import Home
from tests.cli.test_bad_input_cli import invoices  # noqa: F401  (a fixture)
from tests.cli.test_wallet_cli import one_error_line

TYPO = "invoces"


@pytest.mark.parametrize(
    "command",
    [
        ["profile", "show", TYPO],
        ["run", TYPO, "Pay invoice 21 from Acme, 5 USD, to acme."],
        ["improve", "run", TYPO, "--proposer", "script:models/proposer.toml"],
        ["improve", "improver", TYPO, "--proposer", "script:models/improver.toml", "--problem", "p0"],
        ["improve", "harvest", TYPO, "--out", "work.json"],
        ["improve", "adopt", TYPO, "ab12"],
        ["improve", "undo", TYPO],
        ["schedule", "add", TYPO, "harvest", "0 3 * * *"],
        ["schedule", "remove", TYPO, "harvest"],
        ["schedule", "run-now", TYPO],
        ["sessions", "import", "transcript.json", "--profile", TYPO],
    ],
    ids=lambda command: " ".join(command[:2]),
)
@pytest.mark.usefixtures("invoices")
def test_a_mistyped_profile_names_the_nearest_in_one_line_and_leaves_nothing(
    agentd,
    home: Home,
    tmp_path: Path,
    monkeypatch,
    command: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "transcript.json").write_text('[{"role": "user", "content": "Pay."}]')
    line = one_error_line(agentd(*command))
    assert line == f"agentd: error: no profile named {TYPO!r} in {home.profiles_dir}; did you mean 'invoices'?"
    assert [p for p in home.root.rglob(f"*{TYPO}*")] == []  # no lock, record or folder for the typo
    assert not (tmp_path / "work.json").exists()


@pytest.mark.usefixtures("invoices")
def test_a_profile_nothing_like_any_there_lists_them_and_says_how_to_make_it(
    agentd,
    home: Home,
) -> None:
    line = one_error_line(agentd("run", "payroll", "Pay everyone."))
    assert line == (
        f"agentd: error: no profile named 'payroll' in {home.profiles_dir}; "
        "its profiles are invoices; or create it with: agentd profile new payroll"
    )


def test_a_home_with_no_profile_says_how_to_make_one(agentd, home: Home) -> None:
    line = one_error_line(agentd("profile", "show", "payroll"))
    assert (
        line
        == f"agentd: error: no profile named 'payroll' in {home.profiles_dir}; create it with: agentd profile new payroll"
    )


@pytest.mark.usefixtures("invoices")
def test_a_mistyped_schedule_job_profile_is_named_but_a_removed_profiles_job_still_goes(
    agentd,
    home: Home,
) -> None:
    assert agentd("profile", "new", "helper", "--model", "script:models/agent.toml").code == 0
    assert agentd("schedule", "add", "helper", "harvest", "0 3 * * *").code == 0
    for path in sorted((home.profiles_dir / "helper").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (home.profiles_dir / "helper").rmdir()
    r = agentd("schedule", "remove", "helper", "harvest")
    assert (r.code, r.out) == (0, "removed helper.harvest\n"), r.err


@pytest.mark.usefixtures("invoices")
def test_a_mistyped_wallet_and_a_strangers_unknown_wallet(agentd, home: Home) -> None:
    line = one_error_line(agentd("wallet", "show", "invoice"))
    assert line == f"agentd: error: no wallet named invoice in {home.wallets_dir}; did you mean 'invoices'?"
    # Someone else's wallet: the advice is its id, never a key made here in its name.
    line = one_error_line(agentd("bond", "post", "invoices", "1", "--adjudicator", "judge"))
    assert "no wallet named judge" in line and "give its id (32 hex digits)" in line and "wallet new" not in line
