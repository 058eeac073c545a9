"""`agentd improve env --serve`: a task set served as an OpenEnv environment, each
episode the agent runtime on a task with the trainer's policy giving the model's turns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from agentd.app.agent import AGENT, episode_settings, users_factory
from agentd.home import Home
from improver import EnvServer, EnvSetup, TaskSet, env_address, env_socket, load_tasks


def serve_tasks(
    home: Home | None,
    tasks_file: Path,
    host: str,
    port: int,
    max_sessions: int,
    idle_seconds: float,
    listening: Callable[[str, TaskSet], None],
) -> None:
    """Serves until interrupted; `listening` is told the address once clients can connect.
    A WebSocket connection with no episode under way that sends nothing for
    `idle_seconds` is closed (see improver.episodes.openenv)."""
    taskset = load_tasks(tasks_file)
    lessons, limits = episode_settings(home, taskset.profile)
    setup = EnvSetup(taskset, AGENT, lessons, limits, users_factory(home, taskset.profile))
    server = EnvServer(setup, max_sessions, idle_seconds)
    sock = env_socket(host, port)
    try:
        listening(env_address(sock), taskset)
        asyncio.run(server.serve(sock))
    finally:
        sock.close()
