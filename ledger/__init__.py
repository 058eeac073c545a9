"""The signed append-only ledger: entries, stores, Merkle proofs, checkpoints and rules.

Imports nothing of the rest of the project.
"""

from ledger.audit import Problem, VerifyReport
from ledger.checkpoint import Checkpoint, CheckpointError
from ledger.checkpoint import parse as parse_checkpoint
from ledger.entry import WALLET_ID, Entry, EntryError
from ledger.errors import DamagedStore, LedgerError, RuleViolation
from ledger.export import export_line, read_copy, write_copy
from ledger.keys import KeyFile, KeyFileExists, Wallet, open_key_file, read_key_file, wallet_id, write_key_file
from ledger.log import Ledger, open_store, origin_of
from ledger.merkle import ProofError
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.rules import GENESIS, MAX_CENTS, MINT, TRANSFER, Rule, RuleSet, State, register_funds
from ledger.store import Head, Recorder, Row, Snapshot, Transaction

__all__ = [
    "GENESIS",
    "MAX_CENTS",
    "MINT",
    "TRANSFER",
    "WALLET_ID",
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
    "export_line",
    "open_key_file",
    "open_store",
    "origin_of",
    "parse_checkpoint",
    "read_copy",
    "read_key_file",
    "register_funds",
    "wallet_id",
    "write_copy",
    "write_key_file",
]
