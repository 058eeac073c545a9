"""The home's ledger: its store URL, the rules every entry is held to, and the log's key.

Every ledger this home opens, and every audit of it, uses `rule_set()`: an entry of a
kind not registered there is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from agentd import claims as agent_claims
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.wallets import existing_log_key, log_key, log_key_id, wallet_id_of, wallet_names
from improver import register_claims
from ledger import (
    WALLET_ID,
    CheckpointPolicy,
    Entry,
    Ledger,
    RuleSet,
    Wallet,
    open_store,
    parse_checkpoint,
    register_bonds,
    register_funds,
)


def rule_set() -> RuleSet:
    rules = RuleSet()
    register_funds(rules)
    register_bonds(rules)
    agent_claims.register(rules)
    register_claims(rules)
    return rules


def entry_filter(
    home: Home | None, kind: str | None, author: str | None, *, kind_option: str = "kind", log_id: str | None = None
) -> tuple[str | None, str | None]:
    """The kind and the author's wallet id a listing of entries keeps to (`Ledger.entries`
    takes both), from what a person gives: a kind the rules know, and an author by wallet
    id, "log" (the key of the log listed: `log_id`, else this home's) or the name of a
    wallet in this home. A kind the rules do not know is a WrongValue that lists them
    (named `kind_option`, as the caller's option is called); an author that names no
    wallet is an error that says so."""
    kinds = rule_set().kinds
    if kind is not None and kind not in kinds:
        raise WrongValue(f"{kind_option} {kind!r} is not a kind of entry; the kinds are: {', '.join(sorted(kinds))}")
    if author is None:
        return kind, None
    if author == "log" and log_id:
        return kind, log_id
    if home is None and not WALLET_ID.fullmatch(author):
        raise WrongValue(f"{author!r} is not a wallet id, and no home here names wallets: give a wallet id, or log")
    return kind, wallet_id_of(home, author) if home else author


def names_in(home: Home | None, log_id: str | None, skip: Callable[[AgentdError], None]) -> dict[str, str]:
    """The names a listing of a log shows beside wallet ids: this home's wallets', and
    "log" for the key of the log listed, which is this home's own unless it is another's."""
    names = wallet_names(home, skip=skip) if home else {}
    if log_id:
        names = {wallet: name for wallet, name in names.items() if name != "log"} | {log_id: "log"}
    return names


def listed(ledger: Ledger, kind: str | None, author: str | None, start: int, last: int | None) -> Iterator[Entry]:
    """The entries a listing shows, in Pulse order, read as they are taken: those from
    Pulse `start` on of `kind` by `author` (each when given), or only the last `last` of
    them, found from the log's end."""
    if last is None:
        return ledger.entries(kind=kind, start=start, author=author)
    return (e for e in reversed(ledger.entries_back(ledger.size, last, kind, author)) if pulse_of(e) >= start)


def pulse_of(entry: Entry) -> int:
    """The Pulse of an entry a log gave (read from it or appended to it): an entry has
    none only before a log records it."""
    assert entry.pulse is not None, f"claim {entry.claim_id} is on no log"
    return entry.pulse


# What a loop publishes its claims with: a kind and a body in, the claim's id and Pulse out.
Publish = Callable[[str, dict[str, Any]], tuple[str, int]]


def publisher(ledger: Ledger | None, signer: Wallet | None) -> Publish | None:
    """A loop's `publish`: each claim appended to `ledger`, signed by `signer`; None
    without a wallet, when nothing is published."""
    if ledger is None or signer is None:
        return None

    def publish(kind: str, body: dict[str, Any]) -> tuple[str, int]:
        entry = ledger.append(signer, kind, body)
        return entry.claim_id, pulse_of(entry)

    return publish


def open_ledger(home: Home, *, check: bool = True, read_only: bool = False) -> Ledger:
    """The ledger `home.ledger_url` names. `check=False` skips the start-up check, for
    `agentd ledger verify`, which must open a damaged store to say what is wrong.

    `read_only` is for commands that only read: the store is opened for reading alone
    (a SQLite file read-only, a PostgreSQL session that refuses writes) and the log's key
    is never made, nor opened when it is sealed and AGENTD_LOG_PASSPHRASE is not set, so
    a read-only home (a copy an auditor was given, a read-only mount) can be listed and
    verified by someone who holds no secret of it."""
    if read_only:
        return Ledger(open_store(home.ledger_url, read_only=True), rule_set(), existing_log_key(home), check=check)
    home.ensure()
    return Ledger.open(home.ledger_url, rule_set(), log_key(home), check=check, policy=checkpoint_policy(home))


def checkpoint_policy(home: Home) -> CheckpointPolicy:
    """When appends sign checkpoints: [ledger] checkpoint_every (entries) and
    checkpoint_seconds in config.toml, 1,000 and 60 unless set."""
    default = CheckpointPolicy()
    every = home.setting("ledger", "checkpoint_every")
    seconds = home.setting("ledger", "checkpoint_seconds")
    if every is not None and (type(every) is not int or every < 1):
        raise AgentdError(f"[ledger] checkpoint_every in {home.config_path} must be a whole number of entries from 1")
    if seconds is not None and (type(seconds) not in (int, float) or not seconds > 0):
        raise AgentdError(f"[ledger] checkpoint_seconds in {home.config_path} must be a number of seconds above 0")
    return CheckpointPolicy(default.every if every is None else every, default.seconds if seconds is None else seconds)


def open_for_signing(home: Home) -> Ledger:
    """For the commands that sign a checkpoint only when none covers the log yet
    (`ledger checkpoint`, `ledger prove`): read-only when the home is."""
    return open_ledger(home, read_only=not home.writable)


def tree_to_prove(ledger: Ledger, size: int | None, home: Home) -> tuple[int, str | None]:
    """The tree size to prove against (`size`, else the whole log) and the log's signed
    checkpoint of it when there is one or this home can sign it. The checkpoint comes
    first and fixes the size: signed after the proof, an append landing in between
    would give it another."""
    wanted = size or ledger.size
    if not wanted:
        raise AgentdError("the log is empty: there is nothing to prove yet")
    found = ledger.checkpoint_of(wanted)
    if found is not None:
        return wanted, found
    if (size is not None and size != ledger.size) or ledger.state().authority != log_key_id(home):
        return wanted, None
    note = ledger.checkpoint()
    signed = parse_checkpoint(note).size
    return (signed, note) if size is None or signed == size else (size, None)
