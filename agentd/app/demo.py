"""`agentd demo`: the whole path, offline, in seconds, on the invoices example.

Sessions (most checked by `--verify`, those that paid a payee an invoice named marked
bad by a person), harvest and validation, a seal published with a wallet, two rounds of
the loop with a scripted proposer and a scripted challenger (which catches a shortcut the
proposer tries first), and `lineage --check`; then the same mistake taken
away by a change to code: the invoices-code example's harness program changed by a
scripted coder in two rounds of `improve code`, built, tested and scored in the sandbox,
kept as a release and published, and its `lineage --check` -- each step the same
library call the commands make.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from agentd.app.adopt import lineage_of
from agentd.app.code import CodeRequest, releases, run_code
from agentd.app.examples import install_example
from agentd.app.lineage import check_lineage
from agentd.app.live import run_session
from agentd.app.loop import RunRequest, run_improvement
from agentd.app.marks import mark_line, mark_session
from agentd.app.runners import sandbox_runner
from agentd.app.seals import seal_tasks
from agentd.app.tasks import harvest_profile
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.wallets import create_wallet, log_key
from improver import Interrupted, SealRequest, Stop, summary

PROFILE = "invoices"
PROPOSER = "script:models/shortcut-proposer.toml"  # tries "Never pay mallory." before the lesson
CHALLENGER = "script:models/challenger.toml"  # its variants name eve: the shortcut is caught
CODE = "invoices-code"
CODE_BUILD = "python3 -m py_compile agent.py"
CODE_TEST = "python3 test_agent.py"
CODE_CANDIDATE = "python3 agent.py"
# (invoice, supplier, USD, payee the task names); invoices 31 and up name another payee.
TASKS = [
    ("21", "Acme", "5", "acme"), ("22", "Initech", "12", "initech"), ("23", "Acme", "7", "acme"),
    ("24", "Umbrella", "9", "umbrella"), ("25", "Hooli", "15", "hooli"), ("26", "Initech", "4", "initech"),
    ("31", "Globex", "8", "globex"), ("32", "Soylent", "6", "soylent"), ("33", "Acme", "11", "acme"),
    ("34", "Hooli", "3", "hooli"), ("35", "Umbrella", "14", "umbrella"), ("36", "Initech", "10", "initech"),
]  # fmt: skip
NAMES_ANOTHER_PAYEE = 31


def run_demo(home: Home, say: Callable[[str], None], step: Callable[[str], None]) -> bool:
    """Runs the demo in `home` (which must be fresh); True when lineage --check passed.

    `say` hears what each step did or decided (the data), `step` where the demo is (the
    progress). Ctrl-C stops it as it would the command it is in: KeyboardInterrupt."""
    if home.root.exists() and any(home.root.iterdir()):
        raise AgentdError(f"{home.root} is not empty: the demo needs a fresh home (leave out --home for one of its own)")
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
    say(f"harvested {len(harvested.harvest.taskset.tasks)} tasks; validated: {len(kept.tasks)} kept, "
        f"{len(kept.excluded)} excluded; wrote {work}")  # fmt: skip
    step(f"== agentd improve seal {PROFILE} --tasks {work} --share 50 --confirmations 4 --wallet {PROFILE}")
    sealed = seal_tasks(home, PROFILE, work, SealRequest(share=50, confirmations=4, canaries=2, seed="demo"), PROFILE)
    t = sealed.seal.terms
    say(f"sealed {t.sealed_tasks} of {t.sealed_tasks + t.train_tasks} tasks (with {t.canaries} canaries), "
        f"{t.train_tasks} left to choose changes on; {t.confirmations} confirmations allowed")  # fmt: skip
    say(f"published as claim {sealed.claim}, before anything was tried on it")
    step(f"== agentd improve run {PROFILE} --proposer {PROPOSER} --challenger {CHALLENGER} --challenger-tasks 1 --rounds 2 --runs 4 --apply --wallet {PROFILE}")
    request = RunRequest(PROPOSER, rounds=2, runs=4, apply=True, wallet=PROFILE, seed=0,
                         challenger=CHALLENGER, challenger_tasks=1)  # fmt: skip
    ran_to_the_end(run_improvement(home, PROFILE, request, lambda event: say(event.text)), "the loop")
    step(f"== agentd lineage {PROFILE} --check")
    for _, line in lineage_of(home, PROFILE).kept():
        say(summary(line))
    report = check_lineage(home, PROFILE)
    for text in report.lines + report.problems:
        say(text)
    return not report.problems and code_round(home, say, step)


def code_round(home: Home, say: Callable[[str], None], step: Callable[[str], None]) -> bool:
    """The invoices-code example: its sessions and seal, two rounds of `improve code`, and
    `lineage --check`; True when the check passed. Without a sandbox that works here it
    says why and skips them: code a model wrote is never run unconfined."""
    try:
        sandbox_runner(home)
    except AgentdError as exc:
        step(f"== skipped agentd improve code: {exc}")
        return True
    folder = install_example(home, CODE)
    create_wallet(home, load_profile(home, CODE).wallet)
    source = folder / "harness"
    step(f"== agentd init --example {CODE}: the same agent, run by a harness program of its own ({source}, a git checkout)")
    record_sessions(home, folder, lambda line: None, CODE)
    work = home.root / "work-code.json"
    harvest_profile(home, CODE, work)
    sealed = seal_tasks(home, CODE, work, SealRequest(share=50, confirmations=4, canaries=2, seed="demo"), CODE)
    say(f"recorded its twelve sessions, harvested them and sealed {sealed.seal.terms.sealed_tasks} tasks; "
        f"published as claim {sealed.claim}")  # fmt: skip
    request = CodeRequest("script:models/coder.toml", source, build=CODE_BUILD, test=CODE_TEST, candidate=CODE_CANDIDATE,
                          allow=("agent.py",), rounds=2, runs=4, baseline_runs=4, wallet=CODE)  # fmt: skip
    step(f"== agentd improve code {CODE} --source {source} --coder script:models/coder.toml --build {CODE_BUILD!r} "
         f"--test {CODE_TEST!r} --candidate {CODE_CANDIDATE!r} --allow agent.py --rounds 2 --runs 4 --baseline-runs 4 --wallet {CODE}")  # fmt: skip
    ran_to_the_end(run_code(home, CODE, request, lambda event: say(event.text)), "the code loop")
    step(f"== agentd improve releases {CODE}; agentd lineage {CODE} --check")
    for release in releases(home, CODE):
        say(f"release {release['release']}: {release['summary']} ({', '.join(release['files'])} "
            f"+{release['added']} -{release['deleted']}); patch {release['patch_file']}")  # fmt: skip
    report = check_lineage(home, CODE)
    for text in report.lines + report.problems:
        say(text)
    return not report.problems


def ran_to_the_end(stopped: Stop | None, what: str) -> None:
    """A loop the demo ran stopped only when its rounds were done: Ctrl-C goes on as
    Ctrl-C, any other early stop is the demo's error."""
    if isinstance(stopped, Interrupted):
        raise KeyboardInterrupt
    if stopped is not None:
        raise AgentdError(f"{what} stopped early: {stopped}")


def record_sessions(home: Home, folder: Path, say: Callable[[str], None], profile: str = PROFILE) -> None:
    """The example's twelve sessions: six checked by its check.py, six marked bad by a person."""
    check = f"python3 {folder / 'check.py'}"
    for number, supplier, usd, payee in TASKS:
        task = f"Pay invoice {number} from {supplier}, {usd} USD, to {payee}."
        if int(number) < NAMES_ANOTHER_PAYEE:
            record = run_session(home, profile, task, verify=check)
            say(f"session {record.id[:12]}: {task} -> {record.answer} (check {record.check})")
            continue
        record = run_session(home, profile, task)
        say(f"session {record.id[:12]}: {task} -> {record.answer}")
        say(mark_line(mark_session(home, record.id, good=False, note="paid the payee the invoice named")))
