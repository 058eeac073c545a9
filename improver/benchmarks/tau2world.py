"""A τ²-bench domain as a world: the program that answers a task's tool calls from the
domain's database by running the domain's own tool functions, in a sandbox.

`python -m improver.benchmarks.tau2world DOMAIN` reads JSON lines on stdin and answers
each with one line on stdout:

- `{"describe": true}` -> `{"tools": [OpenAI function schemas, each with "writes"],
  "policy": text}`;
- `{"reset": true}` -> `{"state": digest}`: the database as the package ships it again;
- `{"tool": NAME, "arguments": {...}}` -> `{"answer": text}`: what τ² answers its agent
  (an error as `Error: ...`, as τ² words it), the database changed as the tool changes it;
- `{"state": true}` -> `{"state": digest}`: τ²'s own hash of the database now.

It exits when its input ends, or when it has been asked nothing for IDLE_SECONDS.

Only τ²'s package is imported here, never in agentd's own process: its tools are code
from elsewhere, and a run's calls reach them.
"""

from __future__ import annotations

import importlib
import json
import select
import sys
from typing import Any

DOMAINS = ("airline", "retail", "mock")
# A world asked nothing for this long exits: a pool's idle world outlives no program that
# forgot it (its client asks one thing at a time, so no second line waits in the buffer).
IDLE_SECONDS = 60.0


def main(domain: str) -> None:
    if domain not in DOMAINS:
        print(json.dumps({"error": f"no τ² domain {domain!r}; the domains are {', '.join(DOMAINS)}"}), flush=True)
        sys.exit(2)
    module = importlib.import_module(f"tau2.domains.{domain}.environment")
    message = importlib.import_module("tau2.data_model.message")
    env = module.get_environment()
    pristine = env.tools.db.model_copy(deep=True)
    while select.select([sys.stdin], [], [], IDLE_SECONDS)[0]:
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        if request.get("describe"):
            tools = [
                {**t.openai_schema, "writes": env.tools.tool_type(t.name).value == "write"} for t in env.get_tools()
            ]
            reply: dict[str, Any] = {"tools": tools, "policy": env.get_policy()}
        elif request.get("reset"):
            env = module.get_environment(db=pristine.model_copy(deep=True))
            reply = {"state": env.get_db_hash()}
        elif request.get("state"):
            reply = {"state": env.get_db_hash()}
        else:
            call = message.ToolCall(id="call", name=request["tool"], arguments=request["arguments"])
            reply = {"answer": env.get_response(call).content}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:2])
