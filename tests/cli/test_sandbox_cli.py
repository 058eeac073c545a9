"""`agentd sandbox check`: every escape probe, each line saying whether it held."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentd.home import Home
from sandbox.escapes import PROBES


def test_check_runs_every_probe_and_each_holds(agentd) -> None:
    r = agentd("sandbox", "check", "--runner", "bwrap")
    assert r.code == 0, r.out + r.err
    lines = r.out.splitlines()
    assert lines == [f"held      {probe.title}" for probe in PROBES]
    assert "every probe held in the bwrap sandbox" in r.err


def test_check_takes_the_runner_from_the_config(agentd, home: Home) -> None:
    home.root.mkdir(parents=True)
    home.config_path.write_text('[sandbox]\nrunner = "docker"\n')
    r = agentd("sandbox", "check", "--json")
    if r.code == 1 and "Docker engine" in r.err and os.environ.get("AGENTD_REQUIRE_DOCKER") != "1":
        pytest.skip("no Docker engine here")
    assert r.code == 0, r.err
    assert [v["probe"] for v in json.loads(r.out)] == [p.name for p in PROBES]
    assert all(v["held"] for v in json.loads(r.out)) and "in the docker sandbox" in r.err


def test_a_bad_sandbox_setting_is_one_line(agentd, home: Home) -> None:
    home.root.mkdir(parents=True)
    home.config_path.write_text("[sandbox]\nmemory_mb = -1\n")
    r = agentd("sandbox", "check")
    assert r.code == 1 and r.out == ""
    assert r.err == f"agentd: error: {home.config_path}: [sandbox] memory_mb must be a positive number, not -1\n"


def test_no_engine_is_one_line_saying_what_to_install(agentd, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    r = agentd("sandbox", "check", "--runner", "docker")
    assert r.code == 1 and len(r.err.splitlines()) == 1
    assert "apt-get install docker.io" in r.err


def test_an_unknown_runner_is_a_usage_error(agentd) -> None:
    assert agentd("sandbox", "check", "--runner", "chroot").code == 2
