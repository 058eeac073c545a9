"""Ledger rules for agentd's own kinds: sessions and marks.

They run when an entry is appended and again when an auditor replays the log.
"""

from __future__ import annotations

import re
from typing import Any

from improver import ENDINGS
from ledger import Entry, RuleSet, RuleViolation, State

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def register(rules: RuleSet) -> None:
    rules.register("agent.session/v1", _session)
    rules.register("agent.mark/v1", _mark)


def _session(state: State, entry: Entry) -> None:
    body = entry.body
    _require(isinstance(body.get("session"), str) and HEX32.fullmatch(body["session"]), "session must be a 32-hex id")
    _require(isinstance(body.get("profile"), str) and body["profile"], "profile must be named")
    _require(isinstance(body.get("digest"), str) and HEX64.fullmatch(body["digest"]), "digest must be SHA-256 hex")
    _require(_one_of(body.get("ended"), ENDINGS), f"ended must be one of {', '.join(ENDINGS)}")
    _require(
        body.get("check") is None or _one_of(body["check"], ("passed", "failed")),
        "check must be passed, failed or null",
    )
    sessions: dict[str, Any] = state.ns("sessions")
    _require(body["session"] not in sessions, f"session {body['session']} is already on the ledger")
    sessions[body["session"]] = {"claim": entry.claim_id, "pulse": entry.pulse, "ended": body["ended"]}


def _mark(state: State, entry: Entry) -> None:
    body = entry.body
    # Types before lookups: a list or an object is no key, and must be refused, not crash.
    _require(isinstance(body.get("session"), str) and HEX32.fullmatch(body["session"]), "session must be a 32-hex id")
    session = state.ns("sessions").get(body["session"])
    if session is None:
        raise RuleViolation(f"session {body['session']!r} is not on the ledger")
    _require(body.get("session_claim") == session["claim"], "session_claim does not name the session's entry")
    _require(_one_of(body.get("outcome"), ("good", "bad")), "outcome must be good or bad")
    _require(isinstance(body.get("note", ""), str), "note must be text")
    _require(session["ended"] != "errored", "an errored session cannot be marked")
    if "by" in body:  # proposed by someone else (a judge), accepted by whoever signs it
        _require(isinstance(body["by"], str) and body["by"], "by must name who proposed the mark")
        _require(body.get("accepted_by") == entry.author, "accepted_by must be the wallet that signs the mark")


def _one_of(value: Any, allowed: tuple[str, ...]) -> bool:
    return isinstance(value, str) and value in allowed


def _require(condition: Any, why: str) -> None:
    if not condition:
        raise RuleViolation(why)
