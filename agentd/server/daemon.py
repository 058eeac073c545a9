"""`agentd serve`: the schedules, the HTTP API and the log's checkpoints, in one process
in the foreground.

One daemon per home: it holds a lock on `serve.lock` for as long as it runs (the
kernel lets go of it however the process ends, so a killed daemon leaves no stale
lock) and writes its pid in `agentd.pid`. SIGTERM or Ctrl-C stops the scheduler from
starting anything, asks each running loop to stop at its next step boundary, closes the
server, waits for the jobs (at most `stop_timeout` seconds) and exits 0. Every line of
the log is one event on stderr, as text or (`json_logs`) as a JSON object.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pwd
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from agentd.app import nightly
from agentd.app.httplimits import http_limits
from agentd.app.schedules import job_store, sync
from agentd.errors import AgentdError
from agentd.home import PRIVATE_FILE, Home
from agentd.providers.weights import models_dir
from agentd.secrets import DAEMON_SECRETS
from agentd.server.api import SESSIONS_CAP, app
from agentd.server.ledgers import Ledgers
from agentd.server.metrics import Metrics
from agentd.wallets import list_wallets, log_key_sealed

log = logging.getLogger("agentd.serve")
TICK = 1.0  # how often checkpoints due are signed and the job store is looked at again
JOB_THREADS = 4
# sysexits' EX_CONFIG: `agentd serve` exits so when the log's key will not open (its
# passphrase missing or wrong), which no restart changes; the unit does not restart on it.
EXIT_KEY_SHUT = 78


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8470
    json_logs: bool = False
    stop_timeout: float = 60.0


def pid_path(home: Home) -> Any:
    return home.root / "agentd.pid"


def running_pid(home: Home) -> int | None:
    """The pid of the daemon serving `home`, or None when none does."""
    lock = FileLock(str(home.root / "serve.lock"), timeout=0, mode=PRIVATE_FILE)
    try:
        lock.acquire()
    except Timeout:
        return _read_pid(home) or -1
    lock.release()
    return None


def _read_pid(home: Home) -> int | None:
    try:
        return int(pid_path(home).read_text().strip())
    except (OSError, ValueError):
        return None


@contextmanager
def only_daemon(home: Home) -> Iterator[None]:
    lock = FileLock(str(home.root / "serve.lock"), timeout=0, mode=PRIVATE_FILE)
    try:
        lock.acquire()
    except Timeout:
        pid = _read_pid(home)
        raise AgentdError(
            f"a daemon already serves {home.root} (pid {pid if pid else 'unknown'}): stop it first (kill -TERM {pid or 'PID'})"
        ) from None
    try:
        pid_path(home).write_text(f"{os.getpid()}\n")
        yield
    finally:
        pid_path(home).unlink(missing_ok=True)
        lock.release()


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"at": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + "Z", "level": record.levelname.lower()}
        doc |= {"logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(doc, ensure_ascii=False)


class _Lines(logging.Formatter):
    """One line per event, whatever the message holds: a traceback ends up as its last line."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}Z {record.levelname.lower()} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += " | " + self.formatException(record.exc_info).splitlines()[-1]
        return line.replace("\n", " | ")


def configure_logging(json_logs: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    formatter = _JsonLines() if json_logs else _Lines()
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    for name in ("agentd", "uvicorn", "uvicorn.error", "uvicorn.access", "apscheduler"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
        logger.setLevel(logging.WARNING if name == "apscheduler" else logging.INFO)


def scheduler_for(home: Home, metrics: Metrics) -> Any:
    from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, JobExecutionEvent
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler(
        timezone=UTC,
        jobstores={"home": job_store(home)},
        executors={"default": ThreadPoolExecutor(JOB_THREADS)},
    )

    def heard(event: JobExecutionEvent) -> None:
        profile, _, job = event.job_id.partition(".")
        if event.code == EVENT_JOB_MISSED:
            log.warning(
                "job %s missed its run at %s (past its grace time); it runs at its next time",
                event.job_id,
                event.scheduled_run_time,
            )
            result = "missed"
        else:
            result = (
                "error"
                if event.code == EVENT_JOB_ERROR or str(event.retval).startswith(("failed", "crashed", nightly.SPENT))
                else "ok"
            )
        metrics.count("agentd_job_runs_total", profile=profile, job=job, result=result)

    scheduler.add_listener(heard, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED)
    return scheduler


def serve(home: Home, options: ServeOptions) -> int:
    """Runs the daemon until SIGTERM or Ctrl-C; the exit code."""
    import uvicorn

    from improver import ServerConfig, env_socket

    configure_logging(options.json_logs)
    limits = http_limits(home, SESSIONS_CAP)  # a bad [serve] timeout is said before anything starts
    with only_daemon(home), env_socket(options.host, options.port) as sock:
        # Bound before anything is scheduled or said to be served: a port in use is one
        # line (as `improve env --serve` says it), never a daemon announced and then refused.
        metrics = Metrics()
        ledgers = Ledgers(home)
        scheduler = scheduler_for(home, metrics)
        scheduler.start(paused=True)
        plan = sync(scheduler, home)
        for warning in plan.warnings:
            log.error("schedule: %s", warning)
        for job in scheduler.get_jobs(jobstore="home"):
            log.info("job %s scheduled (%s), next run %s", job.id, job.kwargs.get("cron"), job.next_run_time)
        scheduler.resume()
        ticking = threading.Event()
        ticker = threading.Thread(target=_tick, args=(ledgers, scheduler, ticking), name="ticker", daemon=True)
        ticker.start()

        class Server(uvicorn.Server):
            @contextmanager
            def capture_signals(self) -> Iterator[None]:
                """The daemon's own handlers (below) stand: uvicorn's raise the signal again
                once the server stops, which would end the process before the jobs stop."""
                yield

        def stop(sig: int, frame: Any) -> None:
            if server.should_exit and sig == signal.SIGINT:
                server.force_exit = True
                return
            log.info("signal %d: stopping: no job starts, running loops stop at their next step", sig)
            scheduler.pause()
            nightly.stop_all()
            server.should_exit = True

        web = app(home, scheduler=scheduler, metrics=metrics, ledgers=ledgers)
        config = ServerConfig(web, limits, host=options.host, port=options.port, log_config=None, access_log=True)
        server = Server(config)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, stop)
        log.info("serving %s on http://%s:%d (pid %d)", home.root, options.host, options.port, os.getpid())
        with contextlib.suppress(SystemExit):  # uvicorn exits when it cannot start (it logged why); said below
            server.run(sockets=[sock])
        ticking.set()
        ticker.join()
        code = _stop_jobs(scheduler, options.stop_timeout)
        if not server.started:
            raise AgentdError(f"the server on {options.host}:{options.port} could not start (the log above says why)")
        log.info("stopped")
        return code


def _tick(ledgers: Ledgers, scheduler: Any, stop: threading.Event) -> None:
    """Keeps the log's promises (a checkpoint signed when due) and lets the scheduler see
    jobs another process changed in the store (`schedule run-now`, `add`, `remove`)."""
    while not stop.wait(TICK):
        try:
            signed = ledgers.write(lambda ledger: ledger.sign_due())
            if signed:
                log.info("checkpoint signed: size %s", signed.split("\n")[1])
            scheduler.wakeup()
        except Exception:  # the next tick tries again; a store that stays broken shows in every line
            log.exception("tick failed")


def _stop_jobs(scheduler: Any, timeout: float) -> int:
    """Waits for running jobs to stop, at most `timeout` seconds, then ends the process."""
    waiting = threading.Thread(target=scheduler.shutdown, kwargs={"wait": True}, name="stopping", daemon=True)
    waiting.start()
    waiting.join(timeout)
    if waiting.is_alive():
        log.error("a job did not stop within %.0f s; exiting anyway: its loop resumes from what it recorded", timeout)
        logging.shutdown()
        os._exit(1)  # the job's thread would hold up a normal exit; the lock goes with the process
    return 0


def _secrets_file(home: Home) -> list[str]:
    """Where the unit reads the passphrases the daemon needs, when it needs one (a sealed
    log key signs checkpoints; a sealed wallet signs what the schedules publish): a file
    only root reads, which systemd reads before it starts the daemon as its user, never
    the unit itself. Required when the log's key is sealed, so that a missing file fails
    the start at once."""
    path = home.root / DAEMON_SECRETS
    kept = f"in {path}, a file only root may read (chown root, chmod 600)"
    if log_key_sealed(home):
        return [
            f"# The log's key is sealed: put AGENTD_LOG_PASSPHRASE=... {kept},",
            "# and AGENTD_WALLET_PASSPHRASE=... if a wallet the schedules publish with is sealed too.",
            f"EnvironmentFile={path}",
        ]
    if any(wallet.encrypted for wallet in list_wallets(home, skip=lambda unreadable: None)):
        return [
            f"# A wallet is sealed: put AGENTD_WALLET_PASSPHRASE=... {kept} if the schedules publish with it.",
            f"EnvironmentFile=-{path}",
        ]
    return []


def systemd_unit(home: Home, options: ServeOptions) -> str:
    """A unit file running this daemon as the home's owner, restarted when it fails, and
    confined as far as its sandbox lets it be (`_confinement`)."""
    owner = _owner(home)
    command = f"{sys.executable} -m agentd --home {home.root} serve --host {options.host} --port {options.port}"
    if options.json_logs:
        command += " --json-logs"
    return "\n".join(
        [
            "[Unit]",
            f"Description=agentd daemon for {home.root}",
            "After=network-online.target",
            "Wants=network-online.target",
            "",
            "[Service]",
            "Type=simple",
            f"User={owner.pw_name}",
            f"Environment=AGENTD_HOME={home.root}",
            f"Environment=AGENTD_MODELS={models_dir()}",
            *_secrets_file(home),
            f"ExecStart={command}",
            "Restart=on-failure",
            f"RestartPreventExitStatus={EXIT_KEY_SHUT}",
            "RestartSec=5",
            "KillSignal=SIGTERM",
            f"TimeoutStopSec={int(options.stop_timeout) + 10}",
            *_confinement(home, owner.pw_uid == 0),
            "",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    )


def _owner(home: Home) -> pwd.struct_passwd:
    """Who owns the home: the daemon runs as that user, which reads and writes it."""
    uid = home.root.stat().st_uid
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        raise AgentdError(f"{home.root} belongs to uid {uid}, which has no name here: chown it to a user") from None


# What the bubblewrap runner does as root, each sandbox: mounts and pivot_root in its own
# namespaces (SYS_ADMIN), the loopback of its network (NET_ADMIN), the run's writable
# folder handed to the run's own uid (CHOWN), which setpriv becomes (SETUID, SETGID,
# SETPCAP for its bounding set), and the run's files read and removed after (DAC_OVERRIDE).
BWRAP_CAPABILITIES = "CAP_SYS_ADMIN CAP_NET_ADMIN CAP_CHOWN CAP_SETUID CAP_SETGID CAP_SETPCAP CAP_DAC_OVERRIDE"


def _private_tmp(home: Home) -> list[str]:
    """/tmp of the daemon's own, unless the home or this Python is in /tmp, which it hides."""
    shared = [Path("/tmp"), Path("/var/tmp")]
    if any(p.resolve().is_relative_to(t) for p in (home.root, Path(sys.prefix)) for t in shared):
        return ["# No PrivateTmp=: the home or the Python it runs is in /tmp, which it would hide."]
    return ["PrivateTmp=yes"]


def _confinement(home: Home, root: bool) -> list[str]:
    """What systemd-analyze security scores, kept where a sandbox runner still works: as
    root (the bubblewrap runner: it refuses to run otherwise) only the capabilities,
    namespaces and system calls bwrap uses; as anyone else (the Docker runner, through
    the docker group's socket) none of them. Either way nothing is writable but the home
    and the models folder, and /tmp is the daemon's own (`_private_tmp`)."""
    if root:
        who = [
            "# As root, for the bubblewrap runner, which makes each sandbox as root: only what it needs is kept.",
            f"CapabilityBoundingSet={BWRAP_CAPABILITIES}",
            "RestrictNamespaces=cgroup ipc mnt net pid uts",
            "SystemCallFilter=@system-service @mount sethostname",
            "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
        ]
    else:
        who = [
            "# Not as root: the sandbox is Docker's (the user in the docker group); bubblewrap needs root.",
            "CapabilityBoundingSet=",
            "RestrictNamespaces=yes",
            "SystemCallFilter=@system-service",
            "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        ]
    return [
        "# Confined: `systemd-analyze security agentd.service` rates what is left.",
        *who,
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=read-only",
        f"ReadWritePaths={home.root}",
        f"ReadWritePaths=-{models_dir()}",
        *_private_tmp(home),
        "PrivateMounts=yes",
        "PrivateDevices=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectKernelLogs=yes",
        "ProtectControlGroups=yes",
        "ProtectClock=yes",
        "ProtectProc=invisible",
        "LockPersonality=yes",
        "RestrictRealtime=yes",
        "RestrictSUIDSGID=yes",
        "SystemCallArchitectures=native",
        "SystemCallErrorNumber=EPERM",
        "UMask=0077",
    ]
