"""The harness's own test: the operator's words come first in the system prompt."""

from agent import system_prompt

prompt = system_prompt("Pay our invoices.", "Check twice.")
assert prompt.startswith("Pay our invoices."), prompt
assert prompt.endswith("Check twice."), prompt
print("ok")
