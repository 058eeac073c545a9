"""The bubblewrap runner.

agentd usually runs as root, and bwrap started by root keeps every capability, can
see whatever `/` holds, and creates no user namespace of its own unless asked (one it
creates maps the sandbox's uid to root, for which the kernel enforces no process
limit). So the sandbox is made by root, and the program runs in it as a uid that owns
nothing on the host:

- a root of its own (a tmpfs) holding only /usr read-only, its links (/bin, /lib...),
  a fresh /dev, a /proc of the run's own pid namespace, the request's paths at their
  own places (read-only unless `writable`) and a size-limited tmpfs scratch at /tmp;
- its own pid, ipc, uts, cgroup and network namespaces (the network holds only a
  loopback interface), `--die-with-parent` (a kill of agentd or of the run kills the
  namespace's first process, and with it every process the run made, double-forked
  and `setsid` ones included), `--new-session` (no controlling terminal to inject
  keystrokes into), `--clearenv` and then only the request's environment;
- every capability dropped but the three the privilege drop needs, then in the
  sandbox `prlimit` sets the limits and `setpriv` becomes a fresh uid (one per run,
  so no two runs share a process count), clears the groups, empties the bounding set
  and sets no-new-privileges before the program starts;
- the seccomp filter of sandbox.seccomp, loaded by bwrap before that exec.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
from functools import cached_property
from pathlib import Path

from sandbox import seccomp
from sandbox.runner import SCRATCH, Limits, Request, SandboxError, SandboxUnavailable, Usage, Why, preflight
from sandbox.running import Output, Started

BWRAP = "/usr/bin/bwrap"
PRLIMIT = "/usr/bin/prlimit"
SETPRIV = "/usr/bin/setpriv"
INSTALL = "install bubblewrap and util-linux (apt-get install bubblewrap util-linux), or use the Docker runner"
UID_BASE, UID_SPAN = 2_000_000_000, 1 << 24  # no account on the host owns these
NAMESPACES = ("--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net")
# What setpriv needs to become the unprivileged uid; it gives these up itself.
KEPT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")


def usr_links() -> list[str]:
    """The host's merged-/usr links (/bin -> usr/bin, ...), made again in the sandbox."""
    args = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
    return args


def sandbox_uid() -> int:
    return UID_BASE + secrets.randbelow(UID_SPAN)


class BubblewrapRunner:
    name = "bwrap"

    def __init__(self, limits: Limits = Limits()) -> None:
        self.limits = limits

    def check(self) -> None:
        """SandboxUnavailable, saying what to install, when bwrap cannot run here."""
        for tool in (BWRAP, PRLIMIT, SETPRIV):
            if not os.access(tool, os.X_OK):
                raise SandboxUnavailable(f"{tool} is missing: {INSTALL}")
        if os.geteuid() != 0:
            raise SandboxUnavailable(
                "the bubblewrap runner must run as root (it runs each program as a uid of its own)"
            )
        probe = subprocess.run(self.bwrap_argv(Request(("/bin/true",)), sandbox_uid(), -1), capture_output=True, env={})
        if probe.returncode != 0:
            said = probe.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise SandboxUnavailable(f"bubblewrap cannot make a sandbox here ({said[0]}): {INSTALL}")

    @cached_property
    def links(self) -> list[str]:
        return usr_links()

    def bwrap_argv(self, request: Request, uid: int, seccomp_fd: int) -> list[str]:
        limits = request.limits or self.limits
        argv = [BWRAP, *NAMESPACES, "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        for cap in KEPT_CAPS:
            argv += ["--cap-add", cap]
        argv += ["--clearenv"]
        for name, value in request.env.items():
            argv += ["--setenv", name, value]
        argv += ["--ro-bind", "/usr", "/usr", *self.links, "--proc", "/proc", "--dev", "/dev"]
        argv += ["--size", str(limits.scratch_bytes), "--perms", "1777", "--tmpfs", SCRATCH]
        made: set[Path] = {Path("/"), Path("/usr"), Path(SCRATCH)}
        for path in request.mounts():
            for parent in reversed(path.parents):
                if parent not in made:
                    argv += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            argv += ["--bind" if path == request.writable else "--ro-bind", str(path), str(path)]
            made.add(path)
        argv += ["--chdir", request.workdir, "--hostname", "sandbox"]
        if seccomp_fd >= 0:
            argv += ["--seccomp", str(seccomp_fd)]
        return [*argv, "--", *self.inner_argv(limits, uid), *request.argv]

    def inner_argv(self, limits: Limits, uid: int) -> list[str]:
        rlimits = [
            f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",  # SIGXCPU, then SIGKILL a second later
            f"--as={limits.memory_bytes}",
            f"--nproc={limits.processes}",
            f"--fsize={limits.file_bytes}",
            f"--nofile={limits.open_files}",
            "--core=0",
        ]
        drop = ["--reuid", str(uid), "--regid", str(uid), "--clear-groups", "--inh-caps", "-all"]
        drop += ["--bounding-set", "-all", "--no-new-privs"]
        return [PRLIMIT, *rlimits, "--", SETPRIV, *drop, "--"]

    async def start(self, request: Request) -> BubblewrapProcess:
        preflight(request)
        uid = sandbox_uid()
        if request.writable:
            hand_over(request.writable, uid)
        read, write = os.pipe()
        try:
            os.write(write, seccomp.bpf(seccomp.rules(request.loopback)))
            os.close(write)
            write = -1
            try:
                popen = subprocess.Popen(
                    self.bwrap_argv(request, uid, read),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=(read,),
                    env={},
                    start_new_session=True,  # Ctrl-C at agentd's terminal is agentd's, not the run's
                )
            except OSError as exc:
                raise SandboxError(f"cannot start bwrap: {exc.strerror or exc}") from None
        finally:
            os.close(read)
            if write >= 0:
                os.close(write)
        process = BubblewrapProcess(popen, request.limits or self.limits)
        await process.connect()
        return process


def hand_over(directory: Path, uid: int) -> None:
    """Makes `directory` the run's to write: every entry in it becomes `uid`'s, links
    themselves rather than what they point to."""
    os.chown(directory, uid, uid, follow_symlinks=False)
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)


class _Feed(asyncio.Protocol):
    def __init__(self, output: Output) -> None:
        self.output = output

    def data_received(self, data: bytes) -> None:
        self.output.feed(data)

    def eof_received(self) -> bool:
        self.output.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.output.close()


class BubblewrapProcess(Started):
    def __init__(self, popen: subprocess.Popen[bytes], limits: Limits) -> None:
        super().__init__(limits)
        self.popen = popen
        self.pidfd = os.pidfd_open(popen.pid)
        self._writer: asyncio.StreamWriter | None = None
        self._exit: asyncio.Future[tuple[int, Usage]] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().add_reader(self.pidfd, self._reap)

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        await loop.connect_read_pipe(lambda: _Feed(self.stdout), self.popen.stdout)
        await loop.connect_read_pipe(lambda: _Feed(self.stderr), self.popen.stderr)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, self.popen.stdin)
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(self, data: bytes) -> None:
        assert self._writer
        if self._writer.is_closing():
            raise BrokenPipeError("stdin is closed")
        self._writer.write(data)
        await self._writer.drain()

    def close_input(self) -> None:
        if self._writer and not self._writer.is_closing():
            self._writer.close()

    def kill_tree(self) -> None:
        # bwrap's first process in the run's pid namespace dies with it (--die-with-parent),
        # and the kernel then kills every other process in that namespace.
        if not self._exit.done():
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def _reap(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.pidfd)
        _, status = os.waitpid(self.popen.pid, 0)
        os.close(self.pidfd)
        code = os.waitstatus_to_exitcode(status)
        self.popen.returncode = code  # reaped here: Popen must never wait for it again
        # bwrap exits as soon as its first process in the sandbox tells it the program's
        # status, without waiting for it: the program's CPU time never reaches us.
        usage = Usage(round(self.elapsed(), 6))
        self.close_input()
        self._exit.set_result((128 - code if code < 0 else code, usage))

    async def exited(self) -> tuple[int, Usage]:
        return await asyncio.shield(self._exit)

    def classify(self, status: int, usage: Usage) -> Why:
        if status == 128 + signal.SIGXCPU:
            return "cpu"
        if status == 128 + signal.SIGXFSZ:
            return "file size"
        return "exited"
