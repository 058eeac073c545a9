"""The invoices harness: a small agent program speaking agentd's episode protocol.

It reads the case from its first line on stdin, then asks the harness for the model's
answers and for its tools' results, one JSON line each way, until the model answers
without a tool call (it is done) or calls ask_person (it would ask a person).
"""

import json
import sys
from typing import Any

RULES = "Read the invoice first, then pay it."
ASK_PERSON = {
    "type": "function",
    "function": {
        "name": "ask_person",
        "description": "Stop and ask a person, when you should not go on without one.",
        "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
    },
}


def system_prompt(operator: str, lessons: str) -> str:
    """The operator's words, the harness's own rules, then what the agent has learned."""
    parts = [operator.strip(), RULES]
    if lessons.strip():
        parts.append("What you have learned:\n" + lessons.strip())
    return "\n\n".join(part for part in parts if part)


def send(kind: str, payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({kind: payload}) + "\n")
    sys.stdout.flush()


def receive() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        sys.exit(1)
    message: dict[str, Any] = json.loads(line)
    return message


def main() -> None:
    case = receive()["case"]
    messages = [
        {"role": "system", "content": system_prompt(case.get("operator", ""), case.get("lessons", ""))},
        {"role": "user", "content": case["task"]},
    ]
    tools = [*case.get("tools", []), ASK_PERSON]
    while True:
        send("model", {"messages": messages, "tools": tools, "max_tokens": None})
        reply = receive()
        if "completion" not in reply:
            return  # a provider's error or a limit: the harness knows, and ends the run
        message = reply["completion"]["message"]
        calls = message.get("tool_calls") or []
        messages.append(
            {"role": "assistant", "content": message.get("content"), **({"tool_calls": calls} if calls else {})}
        )
        if not calls:
            send("done", {"answer": message.get("content") or ""})
            return
        for call in calls:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            if name == "ask_person":
                send("ask", {"question": json.loads(arguments).get("question", "")})
                return
            send("tool", {"id": call["id"], "name": name, "arguments": arguments})
            result = receive()
            if "result" not in result:
                return
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result["result"]["content"]})


if __name__ == "__main__":
    main()
