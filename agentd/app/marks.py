"""A person's word on how a session went: `agent.mark/v1` on the ledger.

A later mark supersedes an earlier one; both stay on the ledger. The mark is noted as
pending in the sessions store, appended, then made the row's (see SessionStore).
"""

from __future__ import annotations

from agentd.app.ledger import open_ledger
from agentd.app.sessions import open_sessions
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.sessions import MARK_KIND, SessionRecord, settle
from agentd.wallets import load_wallet


def mark_session(
    home: Home, session: str, good: bool, note: str = "", wallet: str | None = None, by: str | None = None
) -> SessionRecord:
    """Marks the session, signed by `wallet`; `by` names who proposed the mark when it was
    not the signer (a judge: "judge:MODEL"), and the entry says the signer accepted it."""
    store = open_sessions(home, write=True)
    record = store.get(session)
    if record.ended == "errored":
        raise AgentdError(
            f"session {record.id} errored ({record.error or 'a provider fault'}): it says nothing about the agent, so it cannot be marked"
        )
    signer = load_wallet(home, wallet or load_profile(home, record.profile).wallet)
    outcome = "good" if good else "bad"
    with store.writing(), open_ledger(home) as ledger:
        store.begin([record], MARK_KIND, ledger.size, outcome, note)
        try:
            body = {"session": record.id, "session_claim": record.claim_id, "outcome": outcome, "note": note}
            ledger.append(signer, MARK_KIND, body | ({"by": by, "accepted_by": signer.id} if by else {}))
        except BaseException:
            settle(store, ledger)
            raise
        record.mark, record.mark_note = outcome, note
        store.finish([record])
    return record


def mark_line(record: SessionRecord) -> str:
    how = "well" if record.mark == "good" else "badly"
    return f"session {record.id} marked as having gone {how}"
