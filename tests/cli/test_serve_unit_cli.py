"""`agentd serve` and the systemd unit it prints, for a home whose log key is sealed: the
unit has a way to give the daemon the key's passphrase, and a daemon that cannot open the
key stops at once rather than being restarted every few seconds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from agentd.home import Home
from tests.cli.test_wallet_cli import LOG_PASS, PASS, one_error_line
from tests.serve.daemonkit import Daemon, free_port

EX_CONFIG = 78  # what the unit's RestartPreventExitStatus names


def _sealed(agentd, what: str) -> None:
    """A home whose log key, or one of whose wallets, is sealed with a passphrase (or neither)."""
    assert agentd("init").code == 0
    assert agentd("wallet", "new", "alice", env=PASS if what == "a wallet" else None).code == 0
    if what == "the log's key":
        assert agentd("wallet", "seal-log-key", env=LOG_PASS).code == 0


def _unit(agentd) -> list[str]:
    printed = agentd("serve", "--print-systemd-unit")
    assert printed.code == 0, printed.err
    return printed.out.splitlines()


def test_the_unit_of_a_home_with_a_sealed_log_key_reads_the_passphrase_from_a_root_only_file(agentd, home) -> None:
    _sealed(agentd, "the log's key")
    unit = _unit(agentd)
    secrets = home.root / "serve.env"
    assert f"EnvironmentFile={secrets}" in unit  # required: a missing file fails the start at once
    said = " ".join(line for line in unit if line.startswith("#"))
    assert f"put AGENTD_LOG_PASSPHRASE=... in {secrets}, a file only root may read" in said
    assert "chmod 600" in said
    assert not any(LOG_PASS["AGENTD_LOG_PASSPHRASE"] in line for line in unit)  # the secret is never in the unit
    assert "Restart=on-failure" in unit and f"RestartPreventExitStatus={EX_CONFIG}" in unit


@pytest.mark.parametrize("what", ["a wallet", "nothing"])
def test_the_unit_names_no_log_passphrase_when_the_log_key_is_not_sealed(agentd, home, what: str) -> None:
    _sealed(agentd, what)
    unit = _unit(agentd)
    assert not any("AGENTD_LOG_PASSPHRASE" in line for line in unit)
    files = [line for line in unit if line.startswith("EnvironmentFile=")]
    if what == "nothing":
        assert files == []
    else:  # optional: the daemon runs without it, and a schedule publishing with the wallet says what it lacks
        assert files == [f"EnvironmentFile=-{home.root / 'serve.env'}"]
        assert any("AGENTD_WALLET_PASSPHRASE=..." in line for line in unit if line.startswith("#"))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
@pytest.mark.parametrize("what", ["the log's key", "a wallet", "nothing"])
def test_systemd_finds_nothing_wrong_with_the_unit(agentd, home, tmp_path: Path, what: str) -> None:
    _sealed(agentd, what)
    path = tmp_path / "agentd.service"
    path.write_text("\n".join(_unit(agentd)) + "\n")
    checked = subprocess.run(
        ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    said = checked.stdout + checked.stderr
    # Its findings about the unit name the unit's file; about the machine, they do not.
    assert checked.returncode == 0 and str(path) not in said, said


def test_the_daemon_starts_only_with_the_sealed_keys_passphrase(agentd, home: Home, monkeypatch) -> None:
    _sealed(agentd, "the log's key")
    port = str(free_port())
    key_file, secrets = home.root / "log-key.json", home.root / "serve.env"
    line = one_error_line(agentd("serve", "--port", port), code=EX_CONFIG)
    assert line == (
        f"agentd: error: {key_file} is sealed: set AGENTD_LOG_PASSPHRASE to its passphrase; "
        f"a systemd unit reads AGENTD_LOG_PASSPHRASE from {secrets}"
    )
    line = one_error_line(agentd("serve", "--port", port, env={"AGENTD_LOG_PASSPHRASE": "wrong"}), code=EX_CONFIG)
    assert f"wrong passphrase for {key_file}" in line and str(secrets) in line
    assert not (home.root / "agentd.pid").exists()
    # Given it, as the unit's file gives it, the daemon opens the key and serves.
    monkeypatch.setenv("AGENTD_LOG_PASSPHRASE", LOG_PASS["AGENTD_LOG_PASSPHRASE"])
    daemon = Daemon(home).start()
    try:
        assert httpx.get(f"{daemon.url}/health", timeout=10).json()["ok"] is True
    finally:
        assert daemon.stop() == 0, daemon.log()
