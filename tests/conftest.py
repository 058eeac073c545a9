"""What every test suite may share: nothing of the project itself.

The fixtures that run agentd (a fresh home, the CLI in-process and as a process) live in
tests/homekit.py and are taken in by the conftest of the suites that test agentd, so the
improver's and the ledger's tests run without importing agentd at all.
"""
