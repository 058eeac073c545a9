"""Seals: the split, canaries, the claim, confirmations under a lock, and bad requests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentd.app.demo import PROFILE
from agentd.errors import WrongValue
from agentd.home import Home
from improver.base.errors import ImproverError
from improver.seals.seal import SealSpent, code_word, open_seal, split
from improver.tasks.task import load_tasks
from tests.atonce import all_at_once
from tests.cli.test_home_cli import agentd_at
from tests.cli.test_wallet_cli import one_error_line
from tests.examplekit import harvested, sealed


def seal_cli(agentd, work: Path, *args: str):
    return agentd("improve", "seal", PROFILE, "--tasks", str(work), *args)


def sharing_ledger(home: Home, root: Path) -> Home:
    """Another home, whose ledger is `home`'s."""
    other = Home(root)
    other.root.mkdir()
    (other.root / "config.toml").write_text(f'[ledger]\nurl = "sqlite:///{home.ledger_db}"\n')
    shutil.copy(home.root / "log-key.json", other.root / "log-key.json")
    return other


def more_sessions(home: Home) -> None:
    """Four sessions on invoices the example's twelve never asked about (two that went
    well, two marked bad), as the demo records for the invoices-code example."""
    from agentd.app.demo import NEW_TASKS, record_sessions
    from agentd.profiles import load_profile

    record_sessions(home, load_profile(home, PROFILE).dir, lambda line: None, PROFILE, NEW_TASKS)


def test_seal_splits_publishes_and_keeps_code_words_in_the_sealed_file_only(agentd, home: Home) -> None:
    work = harvested(home)
    r = seal_cli(agentd, work, "--share", "50", "--confirmations", "4", "--seed", "s1", "--wallet", PROFILE)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == (
        "sealed 6 of 12 tasks for profile invoices (with 2 canaries), 6 left to choose changes on; "
        "4 confirmations allowed (stratified test, each at one-sided level 0.0125)"
    )
    train_path = Path(lines[2].removeprefix("tasks to choose on: "))
    sealed_path = Path(lines[3].removeprefix("sealed tasks: ").removesuffix(" (no proposer is shown them)"))
    claim = lines[4].split()[3].rstrip(",")
    seal = open_seal(sealed_path)
    assert seal.train_path == train_path and len(seal.canaries) == 2
    words = [code_word(c) for c in seal.canaries]
    assert all(w in sealed_path.read_text() for w in words)
    assert not any(w in train_path.read_text() for w in words)
    train = load_tasks(train_path)
    assert not {t.name for t in train.tasks} & {t.name for t in seal.sealed.tasks}
    # Each part holds the agent's mistakes in the same proportion.
    assert sorted(t.source["outcome"] for t in train.tasks) == ["bad"] * 3 + ["good"] * 3
    entry = json.loads(agentd("ledger", "show", claim, "--json").out)
    assert entry["kind"] == "agent.seal/v1"
    assert entry["body"]["sealed_digest"] == seal.sealed.digest and entry["body"]["train_digest"] == train.digest
    assert entry["body"]["level"] == 0.0125 and entry["body"]["test"] == "stratified"
    assert not any(w in json.dumps(entry) for w in words)
    assert seal.state().claim == entry["claim"]


def test_anyone_with_the_set_and_the_seed_gets_the_same_split(home: Home) -> None:
    taskset = load_tasks(harvested(home))
    first, again = split(taskset, 50, "s1"), split(taskset, 50, "s1")
    assert [t.name for t in first[1]] == [t.name for t in again[1]]
    # Another seed may draw the same split by chance (a few hundred splits are possible
    # here); of eight other seeds, some draw another.
    others = {frozenset(t.name for t in split(taskset, 50, f"s{n}")[1]) for n in range(2, 10)}
    assert others - {frozenset(t.name for t in first[1])}


def test_a_reusable_seal_says_its_threshold(agentd, home: Home) -> None:
    r = seal_cli(agentd, harvested(home), "--confirmations", "3", "--reusable", "--seed", "x")
    assert r.code == 0, r.err
    terms = open_seal(next(home.routes.root.glob("*-sealed-*.json"))).terms
    assert terms.holdout["noise"] == pytest.approx(1 / (2 * 6**0.5))
    assert terms.holdout["threshold"] == pytest.approx(4 / (2 * 6**0.5)) and terms.holdout["budget"] == 3
    assert (
        "As a reusable holdout, the sealed tasks turn down a change whose gain they answer at 81.6% or less (their noise 20.4%)"
        in r.out
    )


@pytest.mark.parametrize(
    "args, expected, code",
    [
        (["--share", "0"], "Invalid value for '--share': 0 is not in the range 1<=x<=99", 2),
        (["--share", "150"], "Invalid value for '--share': 150 is not in the range 1<=x<=99", 2),
        (["--share", "1"], "leaves no sealed tasks", 1),
        (["--share", "99"], "leaves no tasks to choose on", 1),
        (["--confirmations", "0"], "Invalid value for '--confirmations': 0 is not in the range x>=1", 2),
        (["--canaries", "-1"], "Invalid value for '--canaries': -1 is not in the range 0<=x<=100", 2),
        (["--test", "bogus"], "Invalid value for '--test'", 2),
    ],
)
def test_bad_seal_requests_are_refused_and_write_nothing(
    agentd, home: Home, args: list[str], expected: str, code: int
) -> None:
    r = seal_cli(agentd, harvested(home), *args)
    assert expected in one_error_line(r, code=code)
    assert not list(home.routes.root.glob("*-sealed-*"))


def test_a_set_whose_digest_is_wrong_is_refused(agentd, home: Home) -> None:
    work = harvested(home)
    data = json.loads(work.read_text())
    data["tasks"][0]["task"] += " and tip the driver"
    work.write_text(json.dumps(data))
    r = seal_cli(agentd, work)
    assert r.code == 1 and "does not match" in r.err and "work-1" in r.err
    assert not list(home.routes.root.glob("*-sealed-*"))


def test_an_unvalidated_set_is_refused(agentd, home: Home) -> None:
    from improver.tasks.task import TaskSet

    taskset = load_tasks(harvested(home))
    raw = home.root / "raw.json"
    TaskSet(taskset.profile, taskset.operator, taskset.tasks, validated=False).save(raw)
    r = seal_cli(agentd, raw)
    assert r.code == 1 and "not validated: run agentd improve validate" in r.err


def test_a_task_exported_for_training_is_never_sealed(agentd, home: Home, tmp_path: Path) -> None:
    work = harvested(home)
    assert agentd("improve", "export", PROFILE, "--out", str(tmp_path / "train")).code == 0
    r = seal_cli(agentd, work)
    assert r.code == 1 and "was exported for training" in r.err and "work-" in r.err
    assert not list(home.routes.root.glob("*-sealed-*"))


def _spend(path: str) -> int:  # runs in a forked process
    try:
        return open_seal(Path(path)).spend_confirmation().number
    except SealSpent:
        return 0


def test_processes_spending_four_confirmations_at_once_spend_exactly_four(home: Home) -> None:
    seal = sealed(home, wallet=None).seal
    got = sorted(number for number, _ in all_at_once(5, _spend, str(seal.path)))
    assert got == [0, 1, 2, 3, 4]
    again = open_seal(seal.path)
    assert again.state().spent == 4
    with pytest.raises(SealSpent, match="seal fresh tasks"):
        again.spend_confirmation()


def test_a_corrupted_seal_file_is_a_clear_error_and_spends_nothing(home: Home) -> None:
    seal = sealed(home, wallet=None).seal
    text = seal.path.read_text()
    seal.path.write_text(text.replace('"spent": 0', '"spent": "zero"'))
    with pytest.raises(ImproverError, match="the seal file is damaged"):
        seal.spend_confirmation()
    seal.path.write_text(text[: len(text) // 2])
    with pytest.raises(ImproverError, match=r"the seal file is damaged .*nothing was spent"):
        open_seal(seal.path)
    seal.path.write_text(text)
    assert open_seal(seal.path).state().spent == 0


def test_a_seal_asked_anything_is_not_published_after(home: Home) -> None:
    seal = sealed(home, wallet=None).seal
    seal.mark_asked()
    with pytest.raises(ImproverError, match="has been asked already"):
        seal.record_claim("ab" * 32, 9)


def test_the_ledger_refuses_a_seal_claim_with_a_level_that_does_not_fit(home: Home) -> None:
    from agentd.app.ledger import open_ledger
    from agentd.wallets import load_wallet
    from improver.seals.seal import claim_body
    from ledger import RuleViolation

    seal = sealed(home, wallet=None).seal
    body = {**claim_body(seal), "level": 0.05}
    with pytest.raises(RuleViolation, match=r"0.05/4"):
        open_ledger(home).append(load_wallet(home, PROFILE), "agent.seal/v1", body)


def test_export_after_a_seal_gives_only_the_tasks_to_choose_on(agentd, home: Home, tmp_path: Path) -> None:
    seal = sealed(home, wallet=None).seal
    out = tmp_path / "train"
    r = agentd("improve", "export", PROFILE, "--out", str(out), "--json")
    assert r.code == 0, r.err
    exported = json.loads((out / "tasks.json").read_text())
    assert {t["name"] for t in exported["tasks"]} == {t.name for t in seal.train().tasks}
    sealed_sessions = {t.source["session"] for t in seal.real_tasks}
    lines = [json.loads(x) for f in ("sft.jsonl", "sft-validation.jsonl") for x in (out / f).read_text().splitlines()]
    assert lines and not {x["metadata"]["session"] for x in lines} & sealed_sessions
    assert json.loads(r.out)["passed_over"]["sealed"] == len(sealed_sessions) == 6


def test_a_task_exported_only_as_a_task_is_never_sealed_under_its_harvest_name(
    agentd, home: Home, tmp_path: Path
) -> None:
    from improver.tasks.task import TaskSet

    work = load_tasks(harvested(home))
    assert agentd("improve", "export", PROFILE, "--out", str(tmp_path / "train")).code == 0
    exported_names = {t.name for t in load_tasks(tmp_path / "train" / "tasks.json").tasks}
    assert exported_names and all(n.startswith("tasks-") for n in exported_names)
    # The bad sessions are in no line of sft.jsonl: only their tasks went out, named tasks-N.
    bad = tuple(t for t in work.tasks if t.source["outcome"] == "bad")
    only_bad = home.root / "bad.json"
    TaskSet(work.profile, work.operator, bad, validated=True).save(only_bad)
    r = seal_cli(agentd, only_bad)
    assert r.code == 1 and f"task {bad[0].name} was exported for training" in r.err
    assert not list(home.routes.root.glob("*-sealed-*"))


def test_a_session_that_repeats_a_sealed_task_is_never_exported(agentd, home: Home, tmp_path: Path) -> None:
    from agentd.sessions import SessionRecord, SessionStore

    seal = sealed(home, wallet=None).seal
    store = SessionStore(home)
    good = next(t for t in seal.real_tasks if t.source["outcome"] == "good")
    again = store.get(good.source["session"]).model_dump()
    twin = store.add(
        SessionRecord(**{**again, "id": "f" * 32, "started_at": "2099-01-01T00:00:00.000000Z", "claim_id": "f" * 64})
    )
    out = tmp_path / "train"
    r = agentd("improve", "export", PROFILE, "--out", str(out), "--json")
    assert r.code == 0, r.err
    lines = [json.loads(x) for f in ("sft.jsonl", "sft-validation.jsonl") for x in (out / f).read_text().splitlines()]
    assert twin.id not in {x["metadata"]["session"] for x in lines}
    assert json.loads(r.out)["passed_over"]["sealed"] == 7
    assert good.content_key not in {t.content_key for t in load_tasks(out / "tasks.json").tasks}


def test_sealed_tasks_are_never_sealed_again_nor_harvested_again(agentd, home: Home) -> None:
    first = sealed(home)
    assert first.claim is not None
    r = seal_cli(agentd, home.root / "work.json", "--seed", "another")
    assert r.code == 1
    assert f"was sealed already, by seal {first.seal.id} (claim {first.claim[:16]})" in r.err and "task work-" in r.err
    assert len(list(home.routes.root.glob("*-sealed-*"))) == 1 and first.seal.state().spent == 0
    r = agentd("improve", "harvest", PROFILE, "--out", str(home.root / "again.json"), "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["left_out"] == {"sealed": first.seal.terms.sealed_tasks, "exported": 0}
    sealed_keys = {t.content_key for t in first.seal.real_tasks}
    assert not sealed_keys & {t.content_key for t in load_tasks(home.root / "again.json").tasks}


def test_a_task_another_home_sealed_on_a_shared_ledger_is_not_sealed_here(agentd, home: Home, tmp_path: Path) -> None:
    from agentd.app.seals import seal_tasks
    from agentd.app.tasks import harvest_profile
    from improver.seals.seal import SealRequest

    first = sealed(home)
    other = sharing_ledger(home, tmp_path / "other")
    harvested(other)  # the same sessions, recorded in the other home: the same tasks, left out
    assert load_tasks(other.root / "work.json").tasks
    assert harvest_profile(other, PROFILE, None).left_out["sealed"] == first.seal.terms.sealed_tasks
    work = tmp_path / "all.json"
    harvest_profile(other, PROFILE, work, fresh=False)
    with pytest.raises(
        ImproverError, match=rf"was sealed already, by seal {first.seal.id} \(claim {first.claim[:16]}\)"
    ):
        seal_tasks(other, PROFILE, work, SealRequest(seed="elsewhere"), None)


def test_export_then_harvest_again_leaves_the_exported_out_and_seals(agentd, home: Home, tmp_path: Path) -> None:
    from improver.tasks.task import TaskSet

    work = load_tasks(harvested(home))
    some = home.root / "some.json"  # two tasks of sessions that went badly; every good session goes out as a line
    TaskSet(
        work.profile, work.operator, tuple(t for t in work.tasks if t.source["outcome"] == "bad")[:2], validated=True
    ).save(some)
    assert agentd("improve", "export", PROFILE, "--out", str(tmp_path / "train"), "--tasks", str(some)).code == 0
    assert seal_cli(agentd, home.root / "work.json").code == 1  # the old set holds them: refused
    r = agentd("improve", "harvest", PROFILE, "--out", str(home.root / "fresh.json"))
    assert r.code == 0, r.err
    assert "left out: 0 sealed before, 8 exported for training" in r.out
    r = seal_cli(agentd, home.root / "fresh.json", "--seed", "s")
    assert r.code == 0, r.err
    assert r.out.startswith("sealed 2 of 4 tasks")


def test_a_task_an_earlier_seal_had_to_choose_on_is_never_sealed_later(agentd, home: Home) -> None:
    first = sealed(home).seal
    shown = {t.content_key for t in first.train().tasks}
    more_sessions(home)
    r = agentd("improve", "harvest", PROFILE, "--out", str(home.root / "more.json"))
    assert r.code == 0, r.err
    assert {t.content_key for t in load_tasks(home.root / "more.json").tasks} >= shown  # shown, so harvested again
    r = seal_cli(agentd, home.root / "more.json", "--seed", "again", "--wallet", PROFILE)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].startswith(
        "sealed 4 of 10 tasks for profile invoices (with 2 canaries), 6 left to choose changes on "
        "(6 of them kept there for having been shown to a proposer before); "
    )
    second = open_seal(
        Path(r.out.splitlines()[3].removeprefix("sealed tasks: ").removesuffix(" (no proposer is shown them)"))
    )
    assert not {t.content_key for t in second.real_tasks} & shown
    assert {t.content_key for t in second.train().tasks} == shown
    entry = json.loads(agentd("ledger", "show", second.state().claim, "--json").out)
    assert entry["body"]["shown"] == sorted(shown)
    assert entry["body"]["contents"] == sorted(t.content_key for t in second.real_tasks)


def test_a_seal_with_only_shown_tasks_left_is_refused_naming_the_seal_that_showed_them(agentd, home: Home) -> None:
    first = sealed(home)
    r = agentd("improve", "harvest", PROFILE, "--out", str(home.root / "again.json"))
    assert r.code == 0, r.err
    r = seal_cli(agentd, home.root / "again.json", "--seed", "again", "--json")
    line = one_error_line(r, code=2)
    assert line.startswith("agentd: error: 6 of the 6 tasks were shown to a proposer before (task again-")
    assert (
        f", by seal {first.seal.id} (claim {first.claim[:16]})), so they stay to choose on and are never sealed; "
        in line
    )
    assert line.endswith(
        "that leaves 0 of the 3 tasks whose outcome was bad to seal, fewer than the 2 a share of 50% takes: "
        "lower --share or harvest more tasks"
    )
    assert len(list(home.routes.root.glob("*-sealed-*"))) == 1 and not any(home.pending_dir.iterdir())


def test_a_task_another_home_had_to_choose_on_is_not_sealed_here(agentd, home: Home, tmp_path: Path) -> None:
    from agentd.app.seals import seal_tasks
    from agentd.app.tasks import harvest_profile
    from improver.seals.seal import SealRequest

    first = sealed(home)
    shown = {t.content_key for t in first.seal.train().tasks}
    other = sharing_ledger(home, tmp_path / "other")
    only_shown = harvested(other)  # the same sessions: the sealed ones are left out, the shown ones are not
    assert {t.content_key for t in load_tasks(only_shown).tasks} == shown
    with pytest.raises(
        WrongValue,
        match=rf"6 of the 6 tasks were shown to a proposer before \(task work-\d+, by seal {first.seal.id} \(claim {first.claim[:16]}\)\)",
    ):
        seal_tasks(other, PROFILE, only_shown, SealRequest(seed="elsewhere"), None)
    more_sessions(other)
    more = tmp_path / "more.json"
    harvest_profile(other, PROFILE, more)
    r = agentd_at(
        other.root,
        "improve",
        "seal",
        PROFILE,
        "--tasks",
        str(more),
        "--seed",
        "elsewhere",
        "--wallet",
        PROFILE,
        "--json",
    )
    assert r.code == 0, r.err
    made = json.loads(r.out)
    assert made["kept_shown"] == 6 and made["sealed_tasks"] == 4 and made["train_tasks"] == 6
    assert not {t.content_key for t in open_seal(Path(made["sealed_file"])).real_tasks} & shown


def test_a_seal_claim_made_before_shown_was_carried_is_read_and_says_nothing_of_its_tasks_to_choose_on(
    agentd, home: Home, tmp_path: Path
) -> None:
    from agentd.app.ledger import open_ledger
    from agentd.app.seals import seal_tasks
    from agentd.wallets import load_wallet
    from improver.seals.seal import SealRequest, claim_body

    first = sealed(home, wallet=None).seal
    later = ("shown", "twins", "sketches", "shown_twins", "shown_sketches")  # fields claims carry since
    body = {name: value for name, value in claim_body(first).items() if name not in later}  # as published before
    with open_ledger(home) as ledger:
        ledger.append(load_wallet(home, PROFILE), "agent.seal/v1", body)
    other = sharing_ledger(home, tmp_path / "other")
    work = harvested(other)
    tasks = load_tasks(work).tasks
    # Its sealed tasks are left out as before; what it had to choose on, the claim does not say.
    assert {t.content_key for t in tasks} == {t.content_key for t in first.train().tasks}
    made = seal_tasks(other, PROFILE, work, SealRequest(seed="elsewhere"), None)
    assert made.shown == 0 and made.seal.terms.sealed_tasks == 4  # two of each outcome
