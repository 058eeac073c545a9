"""The harness's own test: the operator's words come first in the system prompt."""

from typing import TYPE_CHECKING

# Run as `python3 test_agent.py` beside agent.py, which is then a top-level module;
# mypy checks this folder inside agentd's package, where agent.py is its sibling.
if TYPE_CHECKING:
    from .agent import system_prompt
else:
    from agent import system_prompt

prompt = system_prompt("Pay our invoices.", "Check twice.")
assert prompt.startswith("Pay our invoices."), prompt
assert prompt.endswith("Check twice."), prompt
print("ok")
