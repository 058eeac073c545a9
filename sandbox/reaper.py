"""Removes the Docker runner's containers when the process that started them dies.

A container is the engine's child, not agentd's: killing agentd would leave it running.
So the runner starts this as a process of its own and tells it, a line each, of every
container it makes ("+ID") and removes ("-ID"); when its input closes (the runner's
process has gone, however it went) it removes every container still listed.

    python -m sandbox.reaper
"""

from __future__ import annotations

import contextlib
import sys


def main() -> None:
    listed: set[str] = set()
    for line in sys.stdin:
        sign, ident = line[:1], line[1:].strip()
        if sign == "+":
            listed.add(ident)
        elif sign == "-":
            listed.discard(ident)
    if listed:
        import docker
        import docker.errors

        client = docker.from_env()
        for ident in listed:
            with contextlib.suppress(docker.errors.APIError):  # already gone
                client.api.remove_container(ident, force=True)


if __name__ == "__main__":
    main()
