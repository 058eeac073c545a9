"""`agentd demo`: the whole path, offline, in seconds, on the invoices example.

Sessions (most checked by `--verify`, those that paid a payee an invoice named marked
bad by a person), harvest and validation, a seal published with a wallet, two rounds of
the loop with a scripted proposer and a scripted challenger (which catches a shortcut the
proposer tries first), and `lineage --check`; then the same mistake taken
away by a change to code: the invoices-code example's harness program changed by a
scripted coder in two rounds of `improve code`, built, tested and scored in the sandbox,
kept as a release and published, and its `lineage --check`; then others vouch for the
release: attested on a bond, the bond slashed by an upheld challenge, `install --bonded`
refusing its attestation and accepting a sound one, and `lineage --check` and `ledger
verify`; then the invoices agent again with its sealed tasks held by an examiner, a
second home on 127.0.0.1: a change kept on its word, the seal revealed and the
examination rerun -- each step the same library call the commands make.
"""

from __future__ import annotations

import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentd.app.adopt import lineage_of
from agentd.app.attest import RUNNER, Attested, AttestRequest, attest, expiry, published, rerun_challenge
from agentd.app.bonds import challenge, post_bond, rule
from agentd.app.code import CodeRequest, releases, run_code
from agentd.app.examiner import Examiner, open_examiner
from agentd.app.examples import install_example
from agentd.app.install import Installing, InstallRequest, install, undo as undo_install
from agentd.app.ledger import open_ledger
from agentd.app.lineage import check_lineage
from agentd.app.live import run_session
from agentd.app.loop import RunRequest, run_improvement
from agentd.app.marks import mark_line, mark_session
from agentd.app.runners import sandbox_runner
from agentd.app.seals import Examiner as ExaminerAt, seal_tasks
from agentd.app.tasks import harvest_profile
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.wallets import create_wallet, load_wallet, log_key
from improver import (
    ATTESTATION,
    EXAMINATION,
    Finding,
    Interrupted,
    SealRequest,
    Stop,
    code_word,
    current_seal,
    open_seal,
    summary,
)
from ledger import MINT

PROFILE = "invoices"
PROPOSER = "script:models/shortcut-proposer.toml"  # tries "Never pay mallory." before the lesson
PLAIN_PROPOSER = "script:models/proposer.toml"  # three changes: nothing, a sealed task's words, the lesson
EXAMINED = "invoices-examined"  # the invoices agent again, its sealed tasks held by an examiner
CHALLENGER = "script:models/challenger.toml"  # its variants name eve: the shortcut is caught
CODE = "invoices-code"
CODE_BUILD = "python3 -m py_compile agent.py"
CODE_TEST = "python3 test_agent.py"
CODE_CANDIDATE = "python3 agent.py"
# (invoice, supplier, USD, payee the task names); invoices 31 and up name another payee.
TASKS = [
    ("21", "Acme", "5", "acme"),
    ("22", "Initech", "12", "initech"),
    ("23", "Acme", "7", "acme"),
    ("24", "Umbrella", "9", "umbrella"),
    ("25", "Hooli", "15", "hooli"),
    ("26", "Initech", "4", "initech"),
    ("31", "Globex", "8", "globex"),
    ("32", "Soylent", "6", "soylent"),
    ("33", "Acme", "11", "acme"),
    ("34", "Hooli", "3", "hooli"),
    ("35", "Umbrella", "14", "umbrella"),
    ("36", "Initech", "10", "initech"),
]
NAMES_ANOTHER_PAYEE = 31
# Invoices the invoices example's sessions never ask about: the invoices-code example's own.
NEW_TASKS = [
    ("27", "Acme", "3", "acme"),
    ("28", "Hooli", "8", "hooli"),
    ("37", "Globex", "5", "globex"),
    ("38", "Soylent", "9", "soylent"),
]
# The examiner's own team's sessions, on invoices the agent's home never sees (31 and up name another payee).
EXAMINER_TASKS = [
    ("11", "Acme", "6", "acme"),
    ("12", "Initech", "13", "initech"),
    ("13", "Hooli", "2", "hooli"),
    ("41", "Globex", "7", "globex"),
    ("42", "Soylent", "4", "soylent"),
    ("43", "Umbrella", "12", "umbrella"),
]
# The third parties of a release: two attesters, a challenger and an adjudicator, and what each is funded with.
THIRD_PARTIES = ("bob", "carol", "dave", "judge")
FUNDED = {"bob": 5_000, "carol": 1_000, "dave": 5_000}
ATTEST_RUNS = 4  # 2 of the 4 sealed tasks tell: at 2 runs each the exact test could not reach 0.0125 on them
CHALLENGE_EVIDENCE = "rebuilt it: the code as it stood passes 8/16 runs of the sealed tasks, not 0/16"


def run_demo(home: Home, say: Callable[[str], None], step: Callable[[str], None]) -> bool:
    """Runs the demo in `home` (which must be fresh); True when every check passed
    (`lineage --check`, `ledger verify`, and the installs refused and made as they should be).

    `say` hears what each step did or decided (the data), `step` where the demo is (the
    progress). Ctrl-C stops it as it would the command it is in: KeyboardInterrupt."""
    if home.root.exists() and any(home.root.iterdir()):
        raise AgentdError(
            f"{home.root} is not empty: the demo needs a fresh home (leave out --home for one of its own)"
        )
    home.ensure()
    log_key(home)
    folder = install_example(home, PROFILE)
    create_wallet(home, load_profile(home, PROFILE).wallet)
    step(f"== a fresh home at {home.root}, with the example profile {PROFILE}")
    record_sessions(home, folder, say)
    work = home.root / "work.json"
    step(f"== agentd improve harvest {PROFILE} --out {work}")
    harvested = harvest_profile(home, PROFILE, work)
    kept = harvested.validation.taskset
    say(
        f"harvested {len(harvested.harvest.taskset.tasks)} tasks; validated: {len(kept.tasks)} kept, "
        f"{len(kept.excluded)} excluded; wrote {work}"
    )
    step(f"== agentd improve seal {PROFILE} --tasks {work} --share 50 --confirmations 4 --wallet {PROFILE}")
    sealed = seal_tasks(home, PROFILE, work, SealRequest(share=50, confirmations=4, canaries=2, seed="demo"), PROFILE)
    t = sealed.seal.terms
    say(
        f"sealed {t.sealed_tasks} of {t.sealed_tasks + t.train_tasks} tasks (with {t.canaries} canaries), "
        f"{t.train_tasks} left to choose changes on; {t.confirmations} confirmations allowed"
    )
    say(f"published as claim {sealed.claim}, before anything was tried on it")
    step(
        f"== agentd improve run {PROFILE} --proposer {PROPOSER} --challenger {CHALLENGER} --challenger-tasks 1 --rounds 2 --runs 4 --apply --wallet {PROFILE}"
    )
    request = RunRequest(
        PROPOSER, rounds=2, runs=4, apply=True, wallet=PROFILE, seed=0, challenger=CHALLENGER, challenger_tasks=1
    )
    ran_to_the_end(run_improvement(home, PROFILE, request, lambda event: say(event.text)), "the loop")
    step(f"== agentd lineage {PROFILE} --check")
    for _, line in lineage_of(home, PROFILE).kept():
        say(summary(line))
    report = check_lineage(home, PROFILE)
    for text in report.lines + report.problems:
        say(text)
    return not report.problems and code_round(home, say, step) and examined_round(home, say, step)


def code_round(home: Home, say: Callable[[str], None], step: Callable[[str], None]) -> bool:
    """The invoices-code example: its sessions and seal, two rounds of `improve code`,
    `lineage --check`, and the release's third parties; True when the checks passed.
    Without a sandbox that works here it says why and skips them: code a model wrote is
    never run unconfined."""
    try:
        sandbox_runner(home)
    except AgentdError as exc:
        step(f"== skipped agentd improve code: {exc}")
        return True
    folder = install_example(home, CODE)
    create_wallet(home, load_profile(home, CODE).wallet)
    source = folder / "harness"
    step(
        f"== agentd init --example {CODE}: the same agent, run by a harness program of its own ({source}, a git checkout)"
    )
    record_sessions(home, folder, lambda line: None, CODE, code_tasks(home))
    work = home.root / "work-code.json"
    harvest_profile(home, CODE, work)
    sealed = seal_tasks(home, CODE, work, SealRequest(share=50, confirmations=4, canaries=2, seed="demo"), CODE)
    say(
        f"recorded its twelve sessions, harvested them and sealed {sealed.seal.terms.sealed_tasks} tasks "
        f"({sealed.shown} kept to choose on: the invoices profile's proposer is shown them); "
        f"published as claim {sealed.claim}"
    )
    request = CodeRequest(
        "script:models/coder.toml",
        source,
        build=CODE_BUILD,
        test=CODE_TEST,
        candidate=CODE_CANDIDATE,
        allow=("agent.py",),
        rounds=2,
        runs=4,
        baseline_runs=4,
        wallet=CODE,
    )
    step(
        f"== agentd improve code {CODE} --source {source} --coder script:models/coder.toml --build {CODE_BUILD!r} "
        f"--test {CODE_TEST!r} --candidate {CODE_CANDIDATE!r} --allow agent.py --rounds 2 --runs 4 --baseline-runs 4 --wallet {CODE}"
    )
    ran_to_the_end(run_code(home, CODE, request, lambda event: say(event.text)), "the code loop")
    step(f"== agentd improve releases {CODE}; agentd lineage {CODE} --check")
    for release in releases(home, CODE):
        say(
            f"release {release['release']}: {release['summary']} ({', '.join(release['files'])} "
            f"+{release['added']} -{release['deleted']}); patch {release['patch_file']}"
        )
    report = check_lineage(home, CODE)
    for text in report.lines + report.problems:
        say(text)
    (release,) = releases(home, CODE)
    tasks = home.routes.sealed(CODE, sealed.seal.id)  # the sealed tasks a publisher hands an attester
    return not report.problems and third_parties(home, say, step, release, source, tasks)


def third_parties(
    home: Home,
    say: Callable[[str], None],
    step: Callable[[str], None],
    release: dict[str, Any],
    source: Path,
    tasks: Path,
) -> bool:
    """Others vouch for the release: bob attests it on a bond under judge without
    rebuilding it; carol's challenge carries the rebuild recipe, judge reruns it, sees
    bob's figures are not what a rebuild finds, upholds it and the bond is slashed, so
    `install --bonded` refuses bob's attestation; dave rebuilds it and attests on a bond
    of his own, which counts, and the release is installed into the checkout and taken
    back out. True when `lineage --check` and `ledger verify` pass."""
    rid, patch = release["release"], Path(release["patch_file"])
    funded = ", ".join(f"{name} {cents // 100}" for name, cents in FUNDED.items())
    step(
        f"== agentd wallet new {'|'.join(THIRD_PARTIES)}; agentd wallet fund {funded}: "
        "bob and dave attest, carol challenges, judge rules"
    )
    with open_ledger(home) as ledger:
        for name in THIRD_PARTIES:
            made = create_wallet(home, name)
            if name in FUNDED:
                ledger.append(log_key(home), MINT, {"to": made.id, "cents": FUNDED[name]})
    bob, bond = _careless(home, say, step, rid)
    step(f"== agentd challenge carol {bob[:16]} {bond[:16]} --deposit 5 --evidence ... --recipe")
    challenged = challenge(home, "carol", bob, bond, 500, CHALLENGE_EVIDENCE, recipe=True)
    say(f"carol challenged bob's attestation with a deposit of 5.00 USD: claim {challenged.entry.claim_id[:16]}")
    step(
        f"== agentd rule judge {challenged.entry.claim_id[:16]} --rerun --source {source} --patch {patch} --tasks {tasks}"
    )
    for line in rerun_challenge(home, challenged.entry.claim_id, source, patch, tasks).lines():
        say(line)
    step(f"== agentd rule judge {challenged.entry.claim_id[:16]} --uphold")
    ruled = rule(home, "judge", challenged.entry.claim_id, True, "rebuilt: the code as it stood passes half its runs")
    say(
        f"judge upheld it: bob's attestation is shown false, bond {ruled.bond.id[:16]} is {ruled.bond.status}; "
        f"carol got her deposit back and the bond's {ruled.bond.cents / 100:.2f} USD"
    )
    audited = _audited(home, say, step)
    bonded = InstallRequest(source, patch, (bob,), ("bob",), allow=("agent.py",), bonded=True, adjudicators=("judge",))
    refused = _install(home, say, step, rid, bonded, "bob")
    dave = _attest(home, say, step, rid, source, patch, tasks, "dave")
    sound = replace(bonded, attestations=(bob, str(dave.claim)), verifiers=("dave",))
    done = _install(home, say, step, rid, sound, "dave")
    step(f"== agentd improve install {CODE} {rid} --undo")
    undo_install(home, CODE, rid)
    say(f"took release {rid} back out of {source}")
    return not refused.installed and done.installed and audited and _audited(home, say, step)


def _careless(home: Home, say: Callable[[str], None], step: Callable[[str], None], rid: str) -> tuple[str, str]:
    """bob attests the release on a bond without rebuilding it: figures he never measured
    (the code as it stood, he says, passed no run). His attestation's claim id and bond."""
    step("== agentd bond post bob 20 --adjudicator judge; bob signs an attestation of figures he never measured")
    posted = post_bond(home, "bob", 2_000, "judge")
    with open_ledger(home) as ledger:
        _, release = published(ledger, rid)
        never = Finding(
            release,
            release.sealed_digest,
            ATTEST_RUNS,
            True,
            "not rebuilt",
            (0, 16),
            (16, 16),
            None,
            False,
            False,
            "none",
        )
        body = never.body(RUNNER, expiry(), posted.bond.id, posted.bond.adjudicator)
        claim = ledger.append(load_wallet(home, "bob"), ATTESTATION, body).claim_id
    say(
        f"bob attested release {rid} unbuilt, claiming 16/16 against 0/16, as claim {claim[:16]} on bond {posted.bond.id[:16]} under judge"
    )
    return claim, posted.bond.id


def _audited(home: Home, say: Callable[[str], None], step: Callable[[str], None], profile: str = CODE) -> bool:
    """`lineage --check` and `ledger verify`, as the commands run them; True when both pass."""
    step(f"== agentd lineage {profile} --check; agentd ledger verify")
    report = check_lineage(home, profile)
    for text in report.lines + report.problems:
        say(text)
    with open_ledger(home, read_only=True) as ledger:
        verified = ledger.verify()
    say(f"ledger verify: ok, {verified.size} entries" if verified.ok else f"ledger verify: {verified.problem}")
    return not report.problems and verified.ok


def _attest(
    home: Home,
    say: Callable[[str], None],
    step: Callable[[str], None],
    rid: str,
    source: Path,
    patch: Path,
    tasks: Path,
    wallet: str,
) -> Attested:
    step(
        f"== agentd improve attest {rid} --source {source} --patch {patch} --tasks {tasks} --wallet {wallet} "
        f"--adjudicator judge --bond 20 --runs {ATTEST_RUNS}"
    )
    request = AttestRequest(rid, source, patch, tasks, wallet, adjudicator="judge", bond_cents=2_000, runs=ATTEST_RUNS)
    made = attest(home, request)
    if made.claim is None:
        raise AgentdError(f"{wallet}'s rebuild of release {rid} did not hold up: {made.finding.why}")
    say(
        f"{wallet} rebuilt release {rid} in the sandbox: {made.finding.why}; attested as claim {made.claim[:16]} "
        f"on bond {str(made.bond)[:16]} under judge"
    )
    return made


def _install(
    home: Home,
    say: Callable[[str], None],
    step: Callable[[str], None],
    rid: str,
    request: InstallRequest,
    verifier: str,
) -> Installing:
    given = " ".join(f"--attestation {c[:16]}" for c in request.attestations)
    step(
        f"== agentd improve install {CODE} {rid} --source {request.source} --patch {request.patch} {given} "
        f"--verifier {verifier} --allow agent.py --bonded --adjudicator judge"
    )
    done = install(home, CODE, rid, request)
    for w in done.review.attestations:
        say(f"attestation {w.claim[:12]}: {w.why}")
    for c in done.review.checks:
        say(f"{'ok' if c.ok else 'FAILED'} {c.name}: {c.detail}")
    say(f"installed release {rid} into {request.source}" if done.installed else f"release {rid} not installed")
    return done


def examined_round(home: Home, say: Callable[[str], None], step: Callable[[str], None]) -> bool:
    """The invoices agent again (profile invoices-examined), its sealed tasks held by an
    examiner: a second home on 127.0.0.1 whose own team's sessions are sealed (the agent's
    home never holds them), a change kept on the examiner's signed word, no file of the
    agent's home holding a sealed task's text, then the seal retired and revealed and the
    examination rerun on it. True when `lineage --check` and `ledger verify` pass and the
    rerun holds up."""
    from agentd.app.examining import reveal_seal
    from agentd.app.reexamine import reexamine

    with tempfile.TemporaryDirectory(prefix="agentd-demo-examiner-") as other:
        examiner, sealed_file = _examiners_home(Path(other), say, step)
        with _serving(examiner) as url:
            folder = install_example(home, "invoices", profile=EXAMINED)
            _unscheduled(folder)
            shown = {t.task for t in current_seal(home.routes, PROFILE).train().tasks}
            record_sessions(home, folder, lambda line: None, EXAMINED, [r for r in TASKS if _request(r) in shown])
            work = home.root / "work-examined.json"
            harvest_profile(home, EXAMINED, work)
            step(
                f"== agentd improve seal {EXAMINED} --tasks {work} --sealed {sealed_file} --examiner {url} "
                f"--examiner-wallet {examiner.wallet.id} --wallet {PROFILE}"
            )
            request = SealRequest(confirmations=2, canaries=2)
            sealed = seal_tasks(
                home, EXAMINED, work, request, PROFILE, sealed_file, ExaminerAt(url, examiner.wallet.id)
            )
            say(
                f"sealed the examiner's {sealed.seal.terms.sealed_tasks} tasks (with {sealed.seal.terms.canaries} "
                f"canaries), handed over encrypted to its key; claim {str(sealed.claim)[:16]} holds their digests"
            )
            step(
                f"== agentd improve run {EXAMINED} --proposer {PLAIN_PROPOSER} --rounds 1 --runs 4 --apply --wallet {PROFILE}"
            )
            loop = RunRequest(PLAIN_PROPOSER, rounds=1, runs=4, apply=True, wallet=PROFILE, seed=0)
            ran_to_the_end(run_improvement(home, EXAMINED, loop, lambda event: say(event.text)), "the examined loop")
            held = _sealed_texts_held(home, examiner)
            say(
                f"files of the agent's home holding a sealed task's text: {len(held)}"
                + (f" ({', '.join(held[:3])})" if held else "")
            )
            report = check_lineage(home, EXAMINED)
            step(f"== agentd lineage {EXAMINED} --check; agentd improve reveal {EXAMINED} --retire --wallet {PROFILE}")
            for text in report.lines + report.problems:
                say(text)
            revealed = reveal_seal(home, EXAMINED, PROFILE, retire=True)
        say(
            f"retired and revealed seal {revealed.seal}: {revealed.tasks} sealed tasks, {revealed.canaries} canaries "
            f"and {revealed.examinations} examination(s), matching its claim; kept in {revealed.path}"
        )
        with open_ledger(home, read_only=True) as ledger:
            kept = [e for e in ledger.entries(kind=EXAMINATION) if e.body["outcome"] == "kept"]
        step(f"== agentd improve reexamine {kept[-1].claim_id[:16]} --revealed {revealed.path}")
        again = reexamine(home, kept[-1].claim_id, revealed.path, folder)
        for line in again.lines():
            say(line)
    return not held and not report.problems and again.holds and _audited(home, say, step, EXAMINED)


def _unscheduled(folder: Path) -> None:
    """The examined profile without the example's nightly job: its examiner lives only as
    long as the demo, so no later `agentd serve` should ask it anything."""
    toml = folder / "profile.toml"
    lines = toml.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.strip() == "[schedule]")
    while start > 0 and lines[start - 1].startswith("#"):  # the comment that explains the job goes with it
        start -= 1
    toml.write_text("".join(lines[:start]).rstrip("\n") + "\n")


def _examiners_home(root: Path, say: Callable[[str], None], step: Callable[[str], None]) -> tuple[Examiner, Path]:
    """A second home: the examiner's wallet and models, and its own team's sessions on
    invoices the agent never sees, harvested into the set it seals (its file, not the agent's)."""
    other = Home(root)
    other.ensure()
    folder = install_example(other, "invoices", profile=EXAMINED)
    create_wallet(other, load_profile(other, EXAMINED).wallet)
    examiner = open_examiner(other, create_wallet(other, "examiner"), folder)
    step(f"== an examiner in a home of its own ({root}): agentd examiner serve --wallet examiner --models {folder}")
    record_sessions(other, folder, lambda line: None, EXAMINED, EXAMINER_TASKS)
    sealed_file = root / "sealed.json"
    harvest_profile(other, EXAMINED, sealed_file)
    say(f"the examiner's team recorded and harvested {len(EXAMINER_TASKS)} sessions of its own into {sealed_file}")
    return examiner, sealed_file


@contextmanager
def _serving(examiner: Examiner) -> Iterator[str]:
    """The examiner's HTTP API on a free port of 127.0.0.1, in a thread, for as long as needed."""
    import uvicorn

    from agentd.server.examiner import server_config

    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else each answer waits ~40 ms (Nagle)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(server_config(examiner, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started and thread.is_alive():
            thread.join(0.02)
        if not server.started:
            raise AgentdError("the demo's examiner did not start on 127.0.0.1")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _sealed_texts_held(home: Home, examiner: Examiner) -> list[str]:
    """The files of the agent's home that hold what a sealed task asks or a canary's code
    word (the examiner's copy says what they are)."""
    (held,) = (open_seal(path) for path in examiner.folder.glob("*.json"))
    texts = [t.task.encode() for t in held.real_tasks] + [code_word(c).encode() for c in held.canaries]
    return [
        str(path.relative_to(home.root))
        for path in sorted(home.root.rglob("*"))
        if path.is_file() and any(text in path.read_bytes() for text in texts)
    ]


def ran_to_the_end(stopped: Stop | None, what: str) -> None:
    """A loop the demo ran stopped only when its rounds were done: Ctrl-C goes on as
    Ctrl-C, any other early stop is the demo's error."""
    if isinstance(stopped, Interrupted):
        raise KeyboardInterrupt
    if stopped is not None:
        raise AgentdError(f"{what} stopped early: {stopped}")


def code_tasks(home: Home) -> list[tuple[str, str, str, str]]:
    """The invoices-code example's twelve sessions: the invoices example's, but two of each
    outcome that the invoices profile has to choose on (its proposer is shown them, so they
    are never sealed) give way to invoices of its own (NEW_TASKS), which can be. Its seal
    leaves out the six the invoices profile sealed, keeps the two others it was shown to
    choose on, and seals the four new ones."""
    shown = {t.task for t in current_seal(home.routes, PROFILE).train().tasks}
    given_way = [
        row
        for good in (True, False)
        for row in [r for r in TASKS if _request(r) in shown and (int(r[0]) < NAMES_ANOTHER_PAYEE) == good][:2]
    ]
    return [row for row in TASKS if row not in given_way] + NEW_TASKS


def _request(row: tuple[str, str, str, str]) -> str:
    number, supplier, usd, payee = row
    return f"Pay invoice {number} from {supplier}, {usd} USD, to {payee}."


def record_sessions(
    home: Home,
    folder: Path,
    say: Callable[[str], None],
    profile: str = PROFILE,
    tasks: list[tuple[str, str, str, str]] = TASKS,
) -> None:
    """The example's twelve sessions (or `tasks`'): those checked by its check.py, and
    those that name another payee marked bad by a person."""
    check = f"python3 {folder / 'check.py'}"
    for row in tasks:
        task = _request(row)
        if int(row[0]) < NAMES_ANOTHER_PAYEE:
            record = run_session(home, profile, task, verify=check)
            say(f"session {record.id[:12]}: {task} -> {record.answer} (check {record.check})")
            continue
        record = run_session(home, profile, task)
        say(f"session {record.id[:12]}: {task} -> {record.answer}")
        say(mark_line(mark_session(home, record.id, good=False, note="paid the payee the invoice named")))
