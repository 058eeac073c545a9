"""The signed append-only ledger: entries, stores, Merkle proofs, checkpoints and rules.

Imports nothing of the rest of the project.
"""

from ledger.audit import Problem, VerifyReport
from ledger.checkpoint import Checkpoint, CheckpointError
from ledger.entry import Entry, EntryError
from ledger.errors import DamagedStore, LedgerError, RuleViolation
from ledger.keys import KeyFile, KeyFileExists, Wallet, open_key_file, read_key_file, wallet_id, write_key_file
from ledger.log import Ledger, open_store, origin_of
from ledger.merkle import ProofError
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.rules import GENESIS, MINT, TRANSFER, Rule, RuleSet, State, register_funds
from ledger.store import Head, Recorder, Row, Snapshot, Transaction

__all__ = [
    "GENESIS",
    "MINT",
    "TRANSFER",
    "Checkpoint",
    "CheckpointError",
    "ConsistencyProof",
    "DamagedStore",
    "Entry",
    "EntryError",
    "Head",
    "InclusionProof",
    "KeyFile",
    "KeyFileExists",
    "Ledger",
    "LedgerError",
    "Problem",
    "ProofError",
    "Recorder",
    "Row",
    "Rule",
    "RuleSet",
    "RuleViolation",
    "Snapshot",
    "State",
    "Transaction",
    "VerifyReport",
    "Wallet",
    "open_key_file",
    "open_store",
    "origin_of",
    "read_key_file",
    "register_funds",
    "wallet_id",
    "write_key_file",
]
