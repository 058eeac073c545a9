"""The escape suite: a malicious program tries each way out, through each runner, and
every one must hold. Each probe is a real program run in the sandbox (sandbox.escapes);
the verdict is the host's: a secret that came out, a file that changed, a connection a
listener heard, a process left running, a limit passed."""

from __future__ import annotations

import pytest

from sandbox.escapes import PROBES, laid_out
from sandbox.runner import Runner
from tests.sandbox.sandboxkit import RUNNERS, runner_named

BY_NAME = {probe.name: probe for probe in PROBES}


@pytest.fixture(scope="module", params=RUNNERS)
def runner(request: pytest.FixtureRequest) -> Runner:
    return runner_named(request.param)


@pytest.fixture(scope="module")
def bait():
    with laid_out() as laid:
        yield laid


def held(name: str, runner: Runner, bait) -> None:
    verdict = BY_NAME[name].judge(runner, bait)
    assert verdict.held, f"{runner.name}: {BY_NAME[name].title}: {verdict.detail}"


def test_every_probe_is_a_test_here() -> None:
    tested = {
        name[len("test_") :]
        for name in globals()
        if name.startswith("test_") and name != "test_every_probe_is_a_test_here"
    }
    assert tested == set(BY_NAME)


def test_key_in_own_environment(runner: Runner, bait) -> None:
    held("key_in_own_environment", runner, bait)


def test_key_in_parent_environ(runner: Runner, bait) -> None:
    held("key_in_parent_environ", runner, bait)


def test_key_in_parent_memory(runner: Runner, bait) -> None:
    held("key_in_parent_memory", runner, bait)


def test_read_the_home(runner: Runner, bait) -> None:
    held("read_the_home", runner, bait)


def test_write_the_home(runner: Runner, bait) -> None:
    held("write_the_home", runner, bait)


def test_write_the_profile(runner: Runner, bait) -> None:
    held("write_the_profile", runner, bait)


def test_write_the_project(runner: Runner, bait) -> None:
    held("write_the_project", runner, bait)


def test_loopback_tcp(runner: Runner, bait) -> None:
    held("loopback_tcp", runner, bait)


def test_unix_sockets(runner: Runner, bait) -> None:
    held("unix_sockets", runner, bait)


def test_docker_socket(runner: Runner, bait) -> None:
    held("docker_socket", runner, bait)


def test_fork_past_the_process_limit(runner: Runner, bait) -> None:
    held("fork_past_the_process_limit", runner, bait)


def test_exhaust_memory(runner: Runner, bait) -> None:
    held("exhaust_memory", runner, bait)


def test_write_past_the_file_size_limit(runner: Runner, bait) -> None:
    held("write_past_the_file_size_limit", runner, bait)


def test_write_past_the_scratch_limit(runner: Runner, bait) -> None:
    held("write_past_the_scratch_limit", runner, bait)


def test_print_past_the_output_limit(runner: Runner, bait) -> None:
    held("print_past_the_output_limit", runner, bait)


def test_outlive_the_run(runner: Runner, bait) -> None:
    held("outlive_the_run", runner, bait)


def test_tiocsti(runner: Runner, bait) -> None:
    held("tiocsti", runner, bait)


def test_ptrace(runner: Runner, bait) -> None:
    held("ptrace", runner, bait)


def test_mount(runner: Runner, bait) -> None:
    held("mount", runner, bait)


def test_host_processes(runner: Runner, bait) -> None:
    held("host_processes", runner, bait)
