"""A daemon on loopback for the serve tests: the demo's home (made once per session and
copied for each test), `agentd serve` as a real process on a free port, and helpers to
read its log and stop it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.wallets import log_key
from ledger import MINT, Entry, Wallet
from tests.homekit import run_in_process

START_WAIT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_home(cache: Path, where: Path) -> Home:
    """A copy of the demo's home (sessions, a published seal, a kept step, the ledger)."""
    made = cache / "demo-home"
    if not made.exists():
        done = run_in_process(["--home", str(made), "demo"])
        assert done.code == 0, done.err
    shutil.copytree(made, where, symlinks=True)
    for stale in ("agentd.pid", "serve.lock"):
        (where / stale).unlink(missing_ok=True)
    return Home(where)


def add_schedule(home: Home, text: str, profile: str = "invoices") -> None:
    """Makes `text` the profile's [schedule] (the example's own, last in its file, goes)."""
    path = home.profiles_dir / profile / "profile.toml"
    kept = path.read_text().split("\n[schedule]\n")[0]
    path.write_text(kept + "\n[schedule]\n" + text)


@dataclass
class Daemon:
    home: Home
    port: int = field(default_factory=free_port)
    args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Daemon:
        self.log_path = self.home.root.parent / f"serve-{self.port}-{time.monotonic_ns()}.log"
        argv = [
            sys.executable,
            "-m",
            "agentd",
            "--home",
            str(self.home.root),
            "serve",
            "--port",
            str(self.port),
            *self.args,
        ]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"}
            )
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log()
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError(f"the daemon did not answer within {START_WAIT} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path and self.log_path.exists() else ""

    def wait_for_log(self, text: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            assert time.monotonic() < deadline, f"{text!r} never appeared in the log:\n{self.log()}"
            assert self.process is not None and self.process.poll() is None, self.log()
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


def signed_for(daemon: Daemon, wallet: Wallet, kind: str, body: dict[str, Any]) -> bytes:
    """An entry by `wallet`, signed as the daemon's log expects its next one."""
    where = httpx.get(f"{daemon.url}/v1/authors/{wallet.id}").json()
    return Entry.create(wallet, kind, body, log=where["origin"], seq=where["next_sequence"]).raw


def funded_stranger(home: Home, cents: int = 100) -> Wallet:
    """A wallet of someone elsewhere, funded by the daemon's home (the log's key mints)."""
    wallet = Wallet.generate()
    with open_ledger(home) as ledger:
        ledger.append(log_key(home), MINT, {"to": wallet.id, "cents": cents})
    return wallet
