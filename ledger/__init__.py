"""The signed append-only ledger: entries, stores, Merkle proofs, checkpoints, witnesses
and rules. What other packages may use is `__all__`; the modules behind it are private.

Imports nothing of the rest of the project.
"""

from ledger.audit import Problem, VerifyReport, Witnessing
from ledger.bonds import (
    BOND_CHALLENGE,
    BOND_POST,
    BOND_RULING,
    BOND_WITHDRAW,
    Bond,
    Bonds,
    Challenge,
    back,
    bonds_in,
    register_bonds,
)
from ledger.checkpoint import (
    Checkpoint,
    CheckpointError,
    parse as parse_checkpoint,
    parse_vkey,
    verify as verify_checkpoint,
    vkey,
)
from ledger.cosignature import Cosignature, claimed as claimed_cosignatures, parse_vkey as parse_witness_vkey
from ledger.entry import MAX_ENTRY_BYTES, WALLET_ID, Entry, EntryError, EntryTooLarge, pae
from ledger.errors import DamagedStore, LedgerError, RefusalRecorded, RuleViolation
from ledger.export import export_line, read_copy, write_copy
from ledger.forks import ForkProof
from ledger.keys import (
    KeyFile,
    KeyFileExists,
    Wallet,
    open_key_file,
    read_key_file,
    seal_key_file,
    signature_holds,
    wallet_id,
    write_key_file,
)
from ledger.log import Imported, Ledger
from ledger.merkle import ProofError
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.reading import LedgerReader
from ledger.receipts import CheckpointPolicy, Promise, Receipt
from ledger.remote import JSON_LINES, RemoteRecorder, entry_lines
from ledger.rules import GENESIS, MAX_CENTS, MINT, TRANSFER, Rule, RuleSet, State, register_funds
from ledger.store import Head, Recorder, Row, Snapshot, StoredCheckpoint, Transaction
from ledger.stores import open_store
from ledger.witness import Forked, Seen, Witness, WitnessError

__all__ = [
    "BOND_CHALLENGE",
    "BOND_POST",
    "BOND_RULING",
    "BOND_WITHDRAW",
    "GENESIS",
    "JSON_LINES",
    "MAX_CENTS",
    "MAX_ENTRY_BYTES",
    "MINT",
    "TRANSFER",
    "WALLET_ID",
    "Bond",
    "Bonds",
    "Challenge",
    "Checkpoint",
    "CheckpointError",
    "CheckpointPolicy",
    "ConsistencyProof",
    "Cosignature",
    "DamagedStore",
    "Entry",
    "EntryError",
    "EntryTooLarge",
    "ForkProof",
    "Forked",
    "Head",
    "Imported",
    "InclusionProof",
    "KeyFile",
    "KeyFileExists",
    "Ledger",
    "LedgerError",
    "LedgerReader",
    "Problem",
    "Promise",
    "ProofError",
    "Receipt",
    "Recorder",
    "RefusalRecorded",
    "RemoteRecorder",
    "Row",
    "Rule",
    "RuleSet",
    "RuleViolation",
    "Seen",
    "Snapshot",
    "State",
    "StoredCheckpoint",
    "Transaction",
    "VerifyReport",
    "Wallet",
    "Witness",
    "WitnessError",
    "Witnessing",
    "back",
    "bonds_in",
    "claimed_cosignatures",
    "entry_lines",
    "export_line",
    "open_key_file",
    "open_store",
    "pae",
    "parse_checkpoint",
    "parse_vkey",
    "parse_witness_vkey",
    "read_copy",
    "read_key_file",
    "register_bonds",
    "register_funds",
    "seal_key_file",
    "signature_holds",
    "verify_checkpoint",
    "vkey",
    "wallet_id",
    "write_copy",
    "write_key_file",
]
