"""A check for `agentd run --verify`: the session paid only the payee its task named.

It reads the transcript the session left (AGENTD_TRANSCRIPT) and exits 0 when every
payment went to the payee after "to" in the task, and at least one was made.
"""

import json
import os
import re
import sys

with open(os.environ["AGENTD_TRANSCRIPT"]) as transcript:
    messages = json.load(transcript)
task = next(m["content"] for m in messages if m["role"] == "user")
wanted = re.search(r"to ([\w-]+)\.?$", task.strip())
payments = [
    json.loads(c["function"]["arguments"])
    for m in messages
    if m["role"] == "assistant"
    for c in m.get("tool_calls") or []
    if c["function"]["name"] == "pay"
]
ok = wanted is not None and payments and all(p.get("to") == wanted.group(1) for p in payments)
sys.exit(0 if ok else 1)
