"""`agentd improve env --serve`: a task set served as an OpenEnv environment, each
episode the agent runtime on a task with the trainer's policy giving the model's turns.
A sealed task is never served, and what is served is recorded as exported (see
agentd.app.tasks.served_to_trainers): a trainer is given what export would write."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from agentd.app.agent import AGENT, episode_settings, users_factory
from agentd.app.httplimits import http_limits
from agentd.app.tasks import served_to_trainers
from agentd.home import Home
from improver import EnvServer, EnvSetup, TaskSet, env_address, env_socket, load_tasks


def serve_tasks(
    home: Home | None,
    tasks_file: Path,
    host: str,
    port: int,
    max_sessions: int,
    idle_seconds: float,
    listening: Callable[[str, TaskSet, Path | None], None],
) -> None:
    """Serves until interrupted; `listening` is told the address once clients can connect,
    and where what is served was recorded (None: nowhere, without a home holding the profile).
    A WebSocket connection with no episode under way that sends nothing for
    `idle_seconds` is closed (see improver.episodes.openenv); HTTP connections are held to
    the home's HTTP limits (agentd/app/httplimits.py)."""
    http = http_limits(home)
    taskset = load_tasks(tasks_file)
    lessons, limits = episode_settings(home, taskset.profile)
    setup = EnvSetup(taskset, AGENT, lessons, limits, users_factory(home, taskset.profile))
    server = EnvServer(setup, max_sessions, idle_seconds, http)
    sock = env_socket(host, port)
    try:
        # Once its port is its own, and before any client is answered.
        record = served_to_trainers(home, taskset, tasks_file)
        listening(env_address(sock), taskset, record)
        asyncio.run(server.serve(sock))
    finally:
        sock.close()
