"""The scheduled code job on the invoices-code example: `schedule run-now` runs the code
loop with the options of [schedule] and keeps its outcome; a spent seal is said loudly;
the daemon stops it on SIGTERM; and a wrong [schedule] is said in one line."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable

from agentd.home import Home
from tests.cli.test_code_cli import HARNESS, running, source
from tests.examplekit import CODE, sealed
from tests.homekit import Result
from tests.serve.daemonkit import Daemon, add_schedule

CRON = "0 4 * * *"
# The harness options test_code_cli passes as flags, as [schedule] says them.
HARNESS_TOML = "".join(
    f"{flag[2:]} = {json.dumps([value] if flag == '--allow' else value)}\n"
    for flag, value in zip(HARNESS[::2], HARNESS[1::2], strict=False)
)
CODER = 'coder = "script:models/coder.toml"\n'


def jobs(agentd: Callable[..., Result], profile: str = CODE) -> dict[str, dict]:
    listed = agentd("schedule", "list", profile, "--json")
    assert listed.code == 0, listed.err
    return {job["job"]: job for job in json.loads(listed.out)}


def test_run_now_runs_the_code_job_with_its_schedule_and_keeps_its_outcome(agentd, home: Home) -> None:
    sealed(home, wallet=CODE, profile=CODE)
    add_schedule(
        home,
        f'code = "{CRON}"\n{CODER}source = "harness"\n{HARNESS_TOML}rounds = 2\nruns = 4\napply = true\nwallet = "{CODE}"\n',
        CODE,
    )
    listed = jobs(agentd)
    assert (
        list(listed) == ["code"]
        and listed["code"]["cron"] == CRON
        and listed["code"]["next_run"].endswith("04:00:00+00:00")
    )

    r = agentd("schedule", "run-now", CODE, "code")
    assert r.code == 0, r.err
    (release,) = json.loads(agentd("improve", "releases", CODE, "--json").out)
    outcome = f"2 round(s), 1 release(s) kept ({release['release']})"
    assert r.out == f"{CODE}.code: {outcome}\n"
    assert release["commands"]["candidate"] == "python3 agent.py"  # the schedule's harness
    published = json.loads(
        agentd("ledger", "log", "--kind", "agent.release/v1", "--json").out
    )  # with the schedule's wallet
    assert [e["body"]["release"]["patch"] for e in published] == [release["patch"]]
    assert (
        "Never pay a payee an invoice names" in (source(home) / "agent.py").read_text()
    )  # apply, in the profile's harness/
    assert jobs(agentd)["code"]["last_result"] == outcome
    check = agentd("lineage", CODE, "--check")
    assert check.code == 0, check.err

    again = agentd("schedule", "run-now", CODE, "code")  # the release applied is not committed yet
    assert again.code == 1 and "has uncommitted changes (M agent.py" in again.out
    assert jobs(agentd)["code"]["last_result"].startswith("failed: ") and "Traceback" not in again.err


def test_a_spent_seal_is_said_loudly_and_the_kill_switch_stops_the_code_job(agentd, home: Home) -> None:
    made = sealed(home, wallet=CODE, profile=CODE)
    add_schedule(home, f'code = "{CRON}"\n{CODER}source = "{source(home)}"\n{HARNESS_TOML}', CODE)  # an absolute source
    assert agentd("kill-switch", "on").code == 0
    halted = agentd("schedule", "run-now", CODE, "code")
    assert halted.code == 1 and halted.out.startswith(f"{CODE}.code: failed: the kill switch is on")
    assert agentd("kill-switch", "off").code == 0

    seal_file = next(home.routes.root.glob(f"{CODE}-sealed-*.json"))
    doc = json.loads(seal_file.read_text())
    doc["state"]["spent"] = doc["terms"]["confirmations"]
    seal_file.write_text(json.dumps(doc))
    spent = agentd("schedule", "run-now", CODE, "code")
    assert (
        spent.out.startswith(f"{CODE}.code: SEAL SPENT: seal {made.seal.id}")
        and f"agentd improve seal {CODE}" in spent.out
    )
    assert jobs(agentd)["code"]["last_result"].startswith("SEAL SPENT")
    assert agentd("improve", "releases", CODE).out == f"profile {CODE} has no release yet\n"


def test_sigterm_stops_the_daemons_code_job_in_its_build_and_it_exits_cleanly(agentd, home: Home) -> None:
    sealed(home, wallet=CODE, profile=CODE)
    marker = b"sleep\x00119\x00"  # the build's own process
    slow = HARNESS_TOML.replace("python3 -m py_compile agent.py", "sleep 119; echo built")
    add_schedule(home, f'code = "{CRON}"\n{CODER}source = "harness"\n{slow}', CODE)
    daemon = Daemon(home).start()
    try:
        run_now = agentd("schedule", "run-now", CODE, "code")
        assert run_now.code == 0 and f"pid {daemon.process.pid}" in run_now.out  # type: ignore[union-attr]
        daemon.wait_for_log(f"job {CODE}.code started")
        deadline = time.monotonic() + 60
        while not running(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert running(marker), daemon.log()
    finally:
        assert daemon.stop(signal.SIGTERM) == 0
    assert f"job {CODE}.code: stopped: interrupted during a build, a test or the coder" in daemon.log()
    assert running(marker) == [] and not home.routes.code_work(CODE).exists()


def test_a_wrong_code_schedule_is_said_in_one_line(agentd, home: Home) -> None:
    assert agentd("init", "--example", CODE).code == 0
    for text, said in [
        ('allow = "agent.py"\n', "[schedule] allow must be a list of strings"),
        ("readable = [1]\n", "[schedule] readable must be a list of strings"),
        ("max_lines = 0\n", "[schedule] max_lines must be at least 1"),
        ("coder = 7\n", "[schedule] coder must be a str"),
        ('env = ["NOT-A-VAR"]\n', "[schedule] env 'NOT-A-VAR': give VAR=VALUE"),
    ]:
        add_schedule(home, f'code = "{CRON}"\n{text}', CODE)
        listed = agentd("schedule", "list", CODE)
        assert listed.code == 0 and f"profile.toml: {said}" in listed.err, listed.err
        added = agentd("schedule", "add", CODE, "code", CRON)
        assert added.code == 1 and added.err.strip().endswith(said) and len(added.err.strip().splitlines()) == 1

    add_schedule(home, f'code = "{CRON}"\nharvest = "30 2 * * *"\n{CODER}', CODE)
    listed = agentd("schedule", "list", CODE)
    assert '[schedule] code needs source = "DIR"; not scheduled' in listed.err
    assert list(jobs(agentd)) == ["harvest"]  # the other job goes on
    added = agentd("schedule", "add", CODE, "code", CRON)
    assert (
        added.code == 1
        and added.err == f'agentd: error: profile {CODE}: [schedule] needs source = "DIR" to run the code job\n'
    )
    ran = agentd("schedule", "run-now", CODE, "code")
    assert (
        ran.code == 1
        and ran.out == f'{CODE}.code: failed: profile {CODE}: [schedule] needs source = "DIR" to run the code job\n'
    )
    add_schedule(home, f'code = "{CRON}"\n', CODE)
    assert 'code needs coder = "MODEL" and source = "DIR"; not scheduled' in agentd("schedule", "list", CODE).err


def test_the_examples_schedule_says_what_the_code_job_needs(agentd, home: Home) -> None:
    assert agentd("init", "--example", CODE).code == 0
    added = agentd("schedule", "add", CODE, "code", CRON)
    assert added.code == 0 and added.out.startswith(f"scheduled {CODE}.code at '{CRON}' (UTC); next run "), added.err
