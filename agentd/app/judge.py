"""`agentd improve judge` and accepting what it proposes: a model proposes marks for the
sessions nobody marked; a person accepts or declines each, and only an accepted one goes
on the ledger, as the judge's mark accepted by that person's wallet.

Only sessions whose outcome is unknown are judged, and only sessions with a known outcome
become tasks, so the judge is never shown a sealed task's session.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from agentd.app.agent import model_factory
from agentd.app.marks import mark_session
from agentd.app.sessions import open_sessions
from agentd.app.tasks import transcript_of
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.sessions import SessionRecord
from improver import Judged, Proposal, judge_sessions, read_proposals, save_proposals


@dataclass
class JudgeRun:
    judged: Judged
    passed_over: Counter[str] = field(default_factory=Counter)  # proposed already, beyond --limit


def judge_profile(home: Home, profile_name: str, spec: str, rubric: str = "", limit: int | None = None) -> JudgeRun:
    """Proposes a mark for each unmarked session of the profile whose outcome is unknown,
    oldest first; stores the proposals, never marks."""
    profile = load_profile(home, profile_name)
    records = open_sessions(home).list(profile=profile.name)
    path = home.routes.judged(profile.name)
    proposals = read_proposals(path)
    run = JudgeRun(Judged())
    chosen: list[SessionRecord] = []
    for record in records:
        if record.outcome != "unknown":
            continue
        reason = "proposed already" if record.id in proposals else None
        if reason is None and limit is not None and len(chosen) >= limit:
            reason = "beyond --limit"
        if reason:
            run.passed_over[reason] += 1
        else:
            chosen.append(record)
    if not chosen:
        return run
    model = model_factory(home, profile.dir)(spec)
    run.judged = asyncio.run(judge_sessions(model, spec, [transcript_of(r) for r in chosen], rubric))
    home.routes.root.mkdir(parents=True, exist_ok=True)
    save_proposals(path, proposals | {p.session: p for p in run.judged.proposals})
    return run


def pending(home: Home, profile_name: str) -> list[Proposal]:
    """The proposals awaiting a person, those of sessions since marked dropped."""
    profile = load_profile(home, profile_name)
    path = home.routes.judged(profile.name)
    proposals = read_proposals(path)
    store = open_sessions(home)
    marked = [s for s in proposals if store.get(s).outcome != "unknown"]
    if marked:
        save_proposals(path, {s: p for s, p in proposals.items() if s not in marked})
    return [p for s, p in proposals.items() if s not in marked]


def accept(home: Home, session: str, wallet: str | None = None) -> tuple[SessionRecord, Proposal]:
    """Marks SESSION as its judge proposed, signed (and so accepted) by `wallet`."""
    record = open_sessions(home).get(session)
    path = home.routes.judged(record.profile)
    proposals = read_proposals(path)
    proposal = proposals.get(record.id)
    if proposal is None:
        raise AgentdError(
            f"no judged mark is proposed for session {record.id} (propose some with: agentd improve judge {record.profile} --model MODEL)"
        )
    marked = mark_session(
        home, record.id, proposal.mark == "good", proposal.reason, wallet, by=f"judge:{proposal.model}"
    )
    save_proposals(path, {s: p for s, p in proposals.items() if s != record.id})
    return marked, proposal


def decline(home: Home, profile_name: str, session: str) -> None:
    """Drops the proposal for SESSION; the session stays unmarked (a later judge may propose again)."""
    path = home.routes.judged(profile_name)
    save_proposals(path, {s: p for s, p in read_proposals(path).items() if s != session})
