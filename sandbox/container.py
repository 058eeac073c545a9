"""The Docker runner, through the `docker` SDK.

Each run is a container of the offline image (sandbox.image) with: no network but its
own loopback (`network_mode="none"`), a read-only root, /usr and the request's paths
mounted from the host read-only (the writable one read-write), a size-limited tmpfs
scratch, every capability dropped, no-new-privileges, the seccomp rules of
sandbox.seccomp, a fresh unprivileged uid, pids, memory (no swap) and CPU limits,
the rlimits of the bubblewrap runner, and only the request's environment. It is
removed after the run; a reaper process (sandbox.reaper) removes it if the process
that started it dies first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

from sandbox import seccomp
from sandbox.bubblewrap import hand_over, sandbox_uid
from sandbox.image import ensure_image
from sandbox.runner import SCRATCH, Limits, Request, SandboxError, SandboxUnavailable, Usage, Why, preflight
from sandbox.running import Started

INSTALL = "install and start the Docker engine (apt-get install docker.io; dockerd), or use the bubblewrap runner"
FRAME = struct.Struct(">BxxxI")  # an attached stream's frame header: stream, size
SHM_BYTES = 1 << 20


class DockerRunner:
    name = "docker"

    def __init__(self, limits: Limits = Limits()) -> None:
        self.limits = limits
        self._reaper: subprocess.Popen[bytes] | None = None
        self._image: str | None = None
        # Waiting for a container blocks a thread for the whole run: a pool of its own,
        # so that many runs at once never starve the kills that end them.
        self.pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="sandbox-docker")

    # The docker SDK ships no types: its client and containers are Any here.
    @cached_property
    def client(self) -> Any:
        try:
            import docker
        except ImportError:
            raise SandboxUnavailable(f"the docker SDK is not installed (pip install docker): {INSTALL}") from None
        try:
            client = docker.from_env(timeout=60)
            client.ping()
        except Exception as exc:
            raise SandboxUnavailable(f"cannot reach the Docker engine ({type(exc).__name__}): {INSTALL}") from None
        return client

    @property
    def image(self) -> str:
        if self._image is None:
            self._image = ensure_image(self.client)
        return self._image

    def check(self) -> None:
        """SandboxUnavailable, saying what to install, when no container can run here."""
        _ = self.image

    def create_options(self, request: Request, uid: int) -> dict[str, Any]:
        import docker.types

        limits = request.limits or self.limits
        mounts = [docker.types.Mount("/usr", "/usr", type="bind", read_only=True)]
        mounts += [
            docker.types.Mount(str(p), str(p), type="bind", read_only=p != request.writable) for p in request.mounts()
        ]
        ulimits = [
            docker.types.Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds + 1),
            docker.types.Ulimit(name="fsize", soft=limits.file_bytes, hard=limits.file_bytes),
            docker.types.Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
            docker.types.Ulimit(name="nproc", soft=limits.processes, hard=limits.processes),
            docker.types.Ulimit(name="core", soft=0, hard=0),
        ]
        return dict(
            image=self.image,
            command=list(request.argv),
            user=f"{uid}:{uid}",
            working_dir=request.workdir,
            environment=dict(request.env),
            stdin_open=True,
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges", "seccomp=" + seccomp.docker_profile(seccomp.rules(request.loopback))],
            pids_limit=limits.processes,
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,
            nano_cpus=10**9,
            ulimits=ulimits,
            tmpfs={SCRATCH: f"size={limits.scratch_bytes},mode=1777"},
            shm_size=SHM_BYTES,
            mounts=mounts,
            hostname="sandbox",
            ipc_mode="private",
            init=True,  # the program is not the namespace's first process, so its signals act as usual
            labels={"agentd.sandbox": "1"},
        )

    async def start(self, request: Request) -> DockerProcess:
        preflight(request)
        loop = asyncio.get_running_loop()
        uid = sandbox_uid()
        if request.writable:
            hand_over(request.writable, uid)
        try:
            options = await loop.run_in_executor(self.pool, self.create_options, request, uid)
            container = await loop.run_in_executor(self.pool, lambda: self.client.containers.create(**options))
        except SandboxUnavailable:
            raise
        except Exception as exc:
            raise SandboxError(f"cannot make the container: {exc}") from None
        self._tell(f"+{container.id}")
        try:
            sock = await loop.run_in_executor(self.pool, self._attach, container.id)
            await loop.run_in_executor(self.pool, container.start)
        except Exception as exc:
            await loop.run_in_executor(self.pool, self._remove, container)
            raise SandboxError(f"cannot start the container: {exc}") from None
        return DockerProcess(self, container, sock, request.limits or self.limits)

    def _attach(self, ident: str) -> socket.socket:
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        attached = self.client.api.attach_socket(ident, params=params)
        raw: socket.socket = getattr(attached, "_sock", attached)
        raw.setblocking(False)
        return raw

    def _remove(self, container: Any) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
        self._tell(f"-{container.id}")

    def _tell(self, line: str) -> None:
        """Tells the reaper of a container made or removed, starting it the first time."""
        if self._reaper is None or self._reaper.poll() is not None:
            home = str(Path(__file__).resolve().parent.parent)
            self._reaper = subprocess.Popen(
                [sys.executable, "-m", "sandbox.reaper"],
                stdin=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": home},
                start_new_session=True,  # a signal to agentd's group must not reach it before agentd is gone
            )
        assert self._reaper.stdin
        self._reaper.stdin.write(f"{line}\n".encode())
        self._reaper.stdin.flush()

    def close(self) -> None:
        """Stops the reaper (every container of ours is removed by then)."""
        if self._reaper and self._reaper.stdin:
            self._reaper.stdin.close()
            self._reaper.wait()
        self.pool.shutdown(wait=False)


class DockerProcess(Started):
    def __init__(self, runner: DockerRunner, container: Any, sock: socket.socket, limits: Limits) -> None:
        super().__init__(limits)
        self.runner = runner
        self.container = container
        self.sock = sock
        self.oom = False
        self._input_open = True
        self._pump = asyncio.ensure_future(self._demux())
        self._exit = asyncio.ensure_future(self._in_pool(self._wait))

    async def _in_pool(self, call: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.runner.pool, call)

    async def _demux(self) -> None:
        """Splits the attached stream into stdout and stderr."""
        loop = asyncio.get_running_loop()
        pending = b""
        try:
            while chunk := await loop.sock_recv(self.sock, 65536):
                pending += chunk
                while len(pending) >= FRAME.size:
                    stream, size = FRAME.unpack_from(pending)
                    if len(pending) < FRAME.size + size:
                        break
                    payload, pending = pending[FRAME.size : FRAME.size + size], pending[FRAME.size + size :]
                    (self.stderr if stream == 2 else self.stdout).feed(payload)
        except OSError:
            pass
        finally:
            self.stdout.close()
            self.stderr.close()

    async def write(self, data: bytes) -> None:
        if not self._input_open:
            raise BrokenPipeError("stdin is closed")
        await asyncio.get_running_loop().sock_sendall(self.sock, data)

    def close_input(self) -> None:
        if self._input_open:
            self._input_open = False
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)

    def kill_tree(self) -> None:
        # The container's first process is killed, and with it its pid namespace.
        def kill() -> None:
            with contextlib.suppress(Exception):  # it has already stopped
                self.container.kill()

        if not self._exit.done():
            self.runner.pool.submit(kill)

    def _wait(self) -> tuple[int, Usage]:
        status = self.container.wait()["StatusCode"]
        self.container.reload()
        self.oom = bool(self.container.attrs["State"].get("OOMKilled"))
        return status, Usage(round(self.elapsed(), 6))

    async def exited(self) -> tuple[int, Usage]:
        try:
            status, usage = await asyncio.shield(self._exit)
            await asyncio.wait([self._pump], timeout=5)
        finally:
            self.sock.close()
            await self._in_pool(lambda: self.runner._remove(self.container))
        return status, usage

    def classify(self, status: int, usage: Usage) -> Why:
        if self.oom:
            return "memory"
        if status == 128 + signal.SIGXCPU:
            return "cpu"
        if status == 128 + signal.SIGXFSZ:
            return "file size"
        return "exited"
