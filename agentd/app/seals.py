"""Making a seal: its files and, with a wallet, its claim on the ledger, as one write.

The seal is made in `pending/` (a folder of its own), its claim appended, the claim
noted in the seal, and only then are its files moved into `routes/` (the tasks to
choose on first, the sealed file last, since that one makes it a seal). A crash or a
full disk anywhere on the way leaves at most a folder in `pending/`, which the next
seal, loop or lineage check settles by what the ledger holds: a seal whose claim is
there is put in place, one whose claim is not is thrown away (its command failed, and
said so). A seal without a wallet is moved in at once. All of it holds the home's
pending lock, so no settling takes a seal still being made.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from agentd.app.examining import fetch_key, hand_over_tasks
from agentd.app.ledger import open_ledger, pulse_of
from agentd.app.tasks import separation_of
from agentd.errors import AgentdError, WrongValue
from agentd.home import PRIVATE_DIR, Home
from agentd.profiles import load_profile
from agentd.wallets import load_wallet, wallet_names
from improver import (
    SEAL_CLAIM,
    ImproverError,
    Routes,
    Seal,
    SealRequest,
    ShownTasks,
    claim_body,
    hand_over,
    load_tasks,
    make_seal,
    open_seal,
    seal_publisher,
    seal_record,
)
from ledger import Ledger, LedgerError, Wallet


@dataclass(frozen=True)
class Sealed:
    seal: Seal
    claim: str | None
    pulse: int | None
    shown: int = 0  # tasks kept to choose on for having been shown to a proposer before


def seal_tasks(
    home: Home,
    profile: str,
    tasks: Path,
    request: SealRequest,
    wallet: str | None,
    sealed: Path | None = None,
    examiner: Examiner | None = None,
) -> Sealed:
    """Seals a validated task set of PROFILE (or, with `sealed`, seals that set and keeps
    `tasks` to choose on); with a wallet, publishes it before anything is tried. With an
    examiner, its sealed tasks are handed to it before the claim is appended, and only
    their digests stay here (see `_hand_over`)."""
    load_profile(home, profile)
    if examiner is not None and not wallet:
        raise WrongValue(
            "--examiner needs --wallet: the seal, the examiner's receipt and its examinations go on the ledger"
        )
    if examiner is not None:
        request = replace(request, examiner=fetch_key(examiner.url, examiner.wallet))
    taskset = load_tasks(tasks)
    given = load_tasks(sealed) if sealed is not None else None
    for path, each in ((tasks, taskset), (sealed, given)):
        if each is not None and each.profile != profile:
            raise AgentdError(f"{path} holds tasks of profile {each.profile}, not {profile}")
    signer = load_wallet(home, wallet) if wallet else None  # a wrong passphrase fails before anything is written
    home.ensure()
    with home.writing(), open_ledger(home) as ledger:
        settle_in(home, ledger)
        home.pending_dir.mkdir(mode=PRIVATE_DIR, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{profile}-", dir=home.pending_dir))
        try:
            separation = separation_of(home, profile, ledger)
            try:
                staged = make_seal(taskset, Routes(folder), request, separation, given)
            except ShownTasks as exc:  # too few never-shown tasks for the --share given
                raise WrongValue(str(exc)) from None
            shown = sum(1 for t in taskset.tasks if t.content_key in separation.shown)
            if signer is None:
                return Sealed(_put_in_place(home, staged), None, None, shown)
            body = claim_body(staged)  # its digests, made while the sealed tasks are still here
            receipt = None
            if examiner is not None:
                receipt = _hand_over(staged, examiner, ledger)
                staged = hand_over(staged, examiner.url)
            entry = ledger.append(signer, SEAL_CLAIM, body)
            if receipt is not None:
                ledger.append_raw([receipt])
            staged.record_claim(entry.claim_id, pulse_of(entry))
            return Sealed(_put_in_place(home, staged), entry.claim_id, entry.pulse, shown)
        except BaseException:
            _settle_quietly(home, folder, ledger)
            raise


@dataclass(frozen=True)
class Examiner:
    """Where the examiner is, and the wallet it must be (None: whichever signs its key)."""

    url: str
    wallet: str | None = None


def _hand_over(staged: Seal, examiner: Examiner, ledger: Ledger) -> bytes:
    """The examiner's receipt for the staged seal's tasks, handed to it encrypted."""
    if not ledger.size:
        raise WrongValue("the ledger is empty, so it has no name an examiner could sign for: record a session first")
    return hand_over_tasks(examiner.url, staged, ledger)


def check_claimant(home: Home, ledger: Ledger | None, signer: Wallet | None, seal: Seal) -> None:
    """WrongValue unless `signer` may publish changes on `seal`: the ledger's rule takes
    them only from the wallet that published the seal, said here before anything runs."""
    claim = seal.state().claim
    author = seal_publisher(ledger.state(), claim) if ledger is not None and claim is not None else None
    if signer is None or author is None or author == signer.id:
        return
    name = wallet_names(home, skip=lambda exc: None).get(author)
    who, use = (f"{name} ({author})", f"--wallet {name}") if name else (author, "that wallet with --wallet")
    raise WrongValue(
        f"seal {seal.id} was published by wallet {who}, not {signer.name} ({signer.id}): only the wallet that "
        f"published a seal publishes changes on it; give {use}, or seal tasks with this one"
    )


def settle_seals(home: Home) -> None:
    """Settles the seals a crash or a full disk left in `pending/` (see the module's
    docstring); a read-only home is left as it is."""
    if not home.pending_dir.is_dir() or not any(home.pending_dir.iterdir()) or not home.writable:
        return
    with home.writing(), open_ledger(home, read_only=True) as ledger:
        settle_in(home, ledger)


def settle_in(home: Home, ledger: Ledger) -> None:
    """`settle_seals` for a caller that holds the pending lock and the ledger."""
    if home.pending_dir.is_dir():
        for folder in sorted(home.pending_dir.iterdir()):
            _settle(home, folder, ledger)


def _settle(home: Home, folder: Path, ledger: Ledger) -> None:
    sealed = sorted(folder.glob("*-sealed-*.json"))
    try:
        seal = open_seal(sealed[0]) if sealed else None
    except ImproverError:
        seal = None  # written whole or not at all, so never claimed: nothing to keep
    published = _claim_of(ledger, seal) if seal is not None else None
    if seal is not None and published is not None:
        if seal.state().claim is None:
            seal.record_claim(*published)
        _put_in_place(home, seal)
        return
    if seal is not None:
        # Its tasks to choose on may have been moved in already: they go too.
        routes = home.routes
        if not routes.sealed(seal.terms.profile, seal.id).exists():
            routes.train(seal.terms.profile, seal.id).unlink(missing_ok=True)
    shutil.rmtree(folder)


def _settle_quietly(home: Home, folder: Path, ledger: Ledger) -> None:
    """Settles what a failed seal left, if the disk lets it: if not, the next seal, loop
    or check does, and the failure's own error is the one shown."""
    with contextlib.suppress(OSError, AgentdError, ImproverError, LedgerError):
        _settle(home, folder, ledger)


def _claim_of(ledger: Ledger, seal: Seal) -> tuple[str, int] | None:
    state = seal.state()
    if state.claim is not None and state.pulse is not None:
        return state.claim, state.pulse
    # The terms name both parts by digest, so they pick out the seal's claim without its
    # tasks to choose on, which may have been moved out of the staged folder already (and
    # a claim made before `shown` was carried has none).
    terms = {"seal": seal.id, **seal.terms.to_json()}
    for entry in ledger.entries(kind=SEAL_CLAIM):
        if all(entry.body.get(name) == value for name, value in terms.items()):
            return entry.claim_id, pulse_of(entry)
    return None


def _put_in_place(home: Home, staged: Seal) -> Seal:
    """Moves the staged seal's files into routes/: its tasks to choose on, then the seal."""
    routes = home.routes
    profile = staged.terms.profile
    routes.root.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if staged.train_path.exists():  # else moved in already, before a crash
        os.replace(staged.train_path, routes.train(profile, staged.id))
    os.replace(staged.path, routes.sealed(profile, staged.id))
    shutil.rmtree(staged.path.parent)  # what is left: the lock the claim was noted under
    return open_seal(routes.sealed(profile, staged.id))


def spent_of(home: Home, seal: Seal) -> int:
    """The confirmations `seal` has spent: its file's count, or for a seal an examiner
    holds (which spends them), the examinations of it the ledger holds."""
    return _standing(home, seal)[0]


def left_of(home: Home, seal: Seal) -> int:
    """The confirmations `seal` has left: none once its publisher retired it (its examiner
    confirms no more), whatever it spent."""
    spent, retired = _standing(home, seal)
    return 0 if retired else max(0, seal.terms.confirmations - spent)


def _standing(home: Home, seal: Seal) -> tuple[int, bool]:
    claim = seal.state().claim
    if seal.terms.examiner is None or claim is None:
        return seal.state().spent, False
    with open_ledger(home, read_only=True) as ledger:
        record = seal_record(ledger.state(), claim) or {}
    return int(record.get("examined", 0)), "retired" in record
