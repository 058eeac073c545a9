"""llama.cpp's own server, run for `local:` models by the `xllamacpp` package.

The server runs in a child Python process of agentd's, bound to 127.0.0.1 on a port the
system picks, and speaks the OpenAI-compatible Chat Completions API. A child rather than
agentd's own process, so that a crash of the native code (or the system killing it for
memory) is a failed call that is retried on a fresh server (an infrastructure fault,
never a run that went badly) instead of the end of agentd. The child reads its stdin
until it closes, so it goes when agentd goes, however agentd ends.

One server is kept per model file and settings for as long as agentd runs: every model
made from the same `local:` spec shares it, and its calls take turns (one slot), which is
what one or two CPU threads can serve.

Threads default to one per free core (the cores less the load average), at least one
and never more than the cores: on a shared 2-core machine two threads were measured
25-35 times slower than one.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agentd.errors import AgentdError
from agentd.tools import helper_environment
from sandbox import Helper

START_SECONDS = 300.0  # loading a large model from a cold disk is slow
DEFAULT_CONTEXT = 8192


@dataclass(frozen=True)
class ServerSettings:
    path: Path
    alias: str  # the model's name in answers: its packaged name or the file's stem
    threads: int | None  # None: one per free core, counted at each start
    context: int = DEFAULT_CONTEXT


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def free_cores() -> int:
    """One thread per core the load average leaves free; at least one."""
    total = cores()
    return max(1, min(total, total - round(os.getloadavg()[0])))


class LlamaServer:
    """A child process serving one model; started on first use, started again after it died."""

    def __init__(self, settings: ServerSettings, progress: Callable[[str], None]) -> None:
        self.settings = settings
        self.progress = progress
        self.starts = 0
        self._process: Helper | None = None
        self._address: str | None = None
        self._log: IO[str] | None = None
        self._guard = threading.Lock()
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    def turn(self) -> asyncio.Lock:
        """The lock a call holds while the server works on it (one per event loop)."""
        loop = asyncio.get_running_loop()
        lock = self._turns.get(loop)
        if lock is None:
            lock = self._turns[loop] = asyncio.Lock()
        return lock

    def address(self) -> str:
        """The running server's base URL, `http://127.0.0.1:PORT`; starts it when it is not
        running. Raises AgentdError when the model cannot be loaded."""
        with self._guard:
            if self._process is not None and self._process.running() and self._address:
                return self._address
            if self._process is not None:
                self.progress(f"the llama.cpp server for {self.settings.alias} stopped; starting it again")
            try:
                self._start()
            except OSError as exc:
                raise AgentdError(f"cannot start llama.cpp on {self.settings.path}: {exc.strerror or exc}") from None
            assert self._address is not None
            return self._address

    def stop(self) -> None:
        with self._guard:
            if self._process is not None:
                self._process.stop()
            self._process = None
            self._address = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _start(self) -> None:
        s = self.settings
        megabytes = s.path.stat().st_size / 1e6
        threads = s.threads or free_cores()
        plural = "s" if threads > 1 else ""
        self.progress(f"starting llama.cpp for {s.alias} ({megabytes:,.0f} MB, {threads} thread{plural})")
        began = time.monotonic()
        if self._log is not None:
            self._log.close()
        self._log = tempfile.TemporaryFile("w+", prefix="agentd-llama-")  # noqa: SIM115 -- lives as long as the server
        config = json.dumps({"path": str(s.path), "alias": s.alias, "threads": threads, "context": s.context})
        argv = [sys.executable, "-m", "agentd.providers.llamaserver", config]
        self._process = Helper(argv, env=helper_environment(), log=self._log)
        self.starts += 1
        self._address = self._await_address(self._process)
        self.progress(f"{s.alias} loaded in {time.monotonic() - began:.1f} s; serving on {self._address}")

    def _await_address(self, process: Helper) -> str:
        line = process.readline(START_SECONDS)
        if line is not None:
            try:
                return str(json.loads(line)["address"])
            except (ValueError, KeyError, TypeError):
                pass
        process.kill()
        raise AgentdError(f"llama.cpp could not load {self.settings.path}: {self._reason()}")

    def _reason(self) -> str:
        assert self._log is not None
        self._log.seek(0)
        lines = self._log.read().splitlines()
        said = [line for line in lines if "error loading model" in line or line.startswith("agentd:")]
        errors = said or [line for line in lines if " E " in line]
        if not errors:
            return "it gave no reason (is the file a model llama.cpp knows?)"
        reason = errors[0].split(": ", 1)[-1] if "error loading model" in errors[0] else errors[0]
        return reason.removeprefix("agentd: ").strip()


_servers: dict[ServerSettings, LlamaServer] = {}
_servers_guard = threading.Lock()


def shared_server(settings: ServerSettings, progress: Callable[[str], None]) -> LlamaServer:
    """The one server of `settings` in this process."""
    with _servers_guard:
        server = _servers.get(settings)
        if server is None:
            server = _servers[settings] = LlamaServer(settings, progress)
        return server


@atexit.register
def _stop_all() -> None:
    for server in list(_servers.values()):
        server.stop()


def serve(config: dict[str, object]) -> int:
    """The child's side: loads the model, prints the address, serves until stdin closes."""
    try:
        import xllamacpp
    except ImportError:
        print("agentd: the xllamacpp package is not installed: pip install 'agentd[local]'", file=sys.stderr)
        return 2
    params = xllamacpp.CommonParams()
    params.model.path = str(config["path"])
    params.model_alias = {str(config["alias"])}
    params.n_ctx = int(str(config["context"]))
    params.n_parallel = 1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = int(str(config["threads"]))
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.use_jinja = True
    try:
        server = xllamacpp.Server(params)
    except RuntimeError:
        return 3  # llama.cpp said why on stderr
    print(json.dumps({"address": server.listening_address}), flush=True)
    sys.stdin.read()
    os._exit(0)  # at once: the native server's threads need no orderly shutdown


if __name__ == "__main__":
    sys.exit(serve(json.loads(sys.argv[1])))
