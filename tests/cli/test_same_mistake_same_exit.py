"""The same mistake gets the same exit in every command: an id given on the command line
that is malformed or names nothing is a wrong value (exit 2), said in one line."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["ledger", "prove", "zz"], "'zz' is neither a Pulse"),
        (["ledger", "prove", "zz", "--remote", "http://127.0.0.1:9"], "'zz' is neither a Pulse"),  # before connecting
        (["bond", "show", "zz"], "'zz' is not a claim id"),
        (["improve", "releases", "show", "zz"], "'zz' is not a claim id"),
        (["bond", "show", "abcd1234"], "no claim abcd1234 on the log"),
        (["improve", "releases", "show", "abcd1234"], "no claim abcd1234 on the log"),
    ],
)
def test_a_wrong_id_exits_2_in_one_line(agentd, command: list[str], said: str) -> None:
    r = agentd(*command)
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and said in r.err and "Traceback" not in r.err
