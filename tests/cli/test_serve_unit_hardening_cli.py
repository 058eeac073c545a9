"""The systemd unit `agentd serve --print-systemd-unit` prints is confined: it runs as the
home's owner, nothing but the home (and the models folder) is writable, no new
privileges, and what `systemd-analyze security` scores is kept where a sandbox runner
still works: as root, only the capabilities, namespaces and system calls bubblewrap uses
(which `sandbox check` is run under here, as the unit would start it); as anyone else,
none (the Docker runner needs only its socket)."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentd.home import Home
from agentd.server.daemon import BWRAP_CAPABILITIES
from tests.homekit import run_in_process

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed here")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can hand a home to another user")

# What every unit holds to, whoever it runs as.
CONFINED = [
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=read-only",
    "PrivateDevices=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectControlGroups=yes",
    "RestrictSUIDSGID=yes",
    "SystemCallArchitectures=native",
]


def unit_of(home: Home) -> list[str]:
    printed = run_in_process(["--home", str(home.root), "serve", "--print-systemd-unit"])
    assert printed.code == 0, printed.err
    return printed.out.splitlines()


def exposure(unit: list[str], tmp_path: Path) -> float:
    """The overall exposure `systemd-analyze security` rates the unit at (0 safest, 10 least)."""
    path = tmp_path / "agentd.service"
    path.write_text("\n".join(unit) + "\n")
    verified = subprocess.run([ANALYZE or "", "verify", str(path)], capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0 and str(path) not in verified.stdout + verified.stderr, verified.stderr
    rated = subprocess.run(
        [ANALYZE or "", "security", "--offline=true", str(path)], capture_output=True, text=True, timeout=120
    )
    assert rated.returncode == 0, rated.stderr
    (level,) = re.findall(r"Overall exposure level for agentd\.service: ([0-9.]+)", rated.stdout)
    return float(level)


def test_a_unit_keeps_only_the_home_writable_and_gives_no_new_privileges(agentd, home: Home) -> None:
    assert agentd("init").code == 0
    unit = unit_of(home)
    assert [line for line in CONFINED if line not in unit] == []
    assert f"ReadWritePaths={home.root}" in unit and f"User={pwd.getpwuid(home.root.stat().st_uid).pw_name}" in unit
    assert "Restart=on-failure" in unit  # what it did before stays


@pytest.mark.skipif(Path(sys.prefix).resolve().is_relative_to("/tmp"), reason="this Python is in /tmp")
@pytest.mark.parametrize("folder, private", [("/tmp", False), ("/dev/shm", True)])
def test_tmp_is_the_daemons_own_unless_the_home_is_in_it(folder: str, private: bool) -> None:
    """A home in /tmp (the demo's, made without --home) would vanish behind a private /tmp."""
    with tempfile.TemporaryDirectory(dir=folder) as made:
        home = Home(Path(made) / "home")
        assert run_in_process(["--home", str(home.root), "init"]).code == 0
        unit = unit_of(home)
    assert ("PrivateTmp=yes" in unit) is private
    hidden = "# No PrivateTmp=: the home or the Python it runs is in /tmp, which it would hide."
    assert (hidden in unit) is not private


@needs_analyze
@pytest.mark.skipif(os.geteuid() != 0, reason="a home of root's is root's to print")
def test_as_root_only_what_bubblewrap_needs_is_kept_and_the_exposure_is_low(agentd, home: Home, tmp_path: Path) -> None:
    assert agentd("init").code == 0
    unit = unit_of(home)
    assert "User=root" in unit and f"CapabilityBoundingSet={BWRAP_CAPABILITIES}" in unit
    namespaces = next(line for line in unit if line.startswith("RestrictNamespaces="))
    assert "user" not in namespaces  # bwrap as root makes none, so none may be made
    assert exposure(unit, tmp_path) <= 4.0  # 9.6 "UNSAFE" before


@needs_analyze
@needs_root
def test_as_another_user_no_capability_is_kept_and_the_exposure_is_lower(agentd, home: Home, tmp_path: Path) -> None:
    assert agentd("init").code == 0
    owner = next(u for u in pwd.getpwall() if 0 < u.pw_uid < 65534 and u.pw_name not in ("nobody",))
    for folder, _, files in os.walk(home.root):
        for path in [folder, *(os.path.join(folder, f) for f in files)]:
            os.chown(path, owner.pw_uid, owner.pw_gid)
    unit = unit_of(home)
    assert f"User={owner.pw_name}" in unit and "CapabilityBoundingSet=" in unit
    assert "RestrictNamespaces=yes" in unit and not any("@mount" in line for line in unit)
    assert exposure(unit, tmp_path) <= 2.5


@needs_root
@pytest.mark.skipif(shutil.which("setpriv") is None or not Path("/usr/bin/bwrap").exists(), reason="no bwrap here")
def test_bubblewrap_holds_every_probe_with_only_the_units_capabilities_and_no_new_privileges(
    agentd, home: Home
) -> None:
    """The unit's capability bounding set and no-new-privileges, as systemd would start the
    daemon under them (setpriv sets both, then runs agentd), leave bubblewrap working."""
    assert agentd("init").code == 0
    bounding = ",".join(["-all", *(f"+{cap.removeprefix('CAP_').lower()}" for cap in BWRAP_CAPABILITIES.split())])
    argv = [sys.executable, "-m", "agentd", "--home", str(home.root), "sandbox", "check", "--runner", "bwrap"]
    checked = subprocess.run(
        ["setpriv", "--no-new-privs", "--bounding-set", bounding, "--", *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "every probe held in the bwrap sandbox" in checked.stdout + checked.stderr
