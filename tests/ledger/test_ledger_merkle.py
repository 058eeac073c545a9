"""RFC 9162 Merkle trees: the transparency-dev vectors, and a property test against an
independent recursive implementation written straight from the RFC's definitions."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ledger import merkle
from ledger.merkle import Frontier, ProofError

VECTORS = Path(__file__).parent.parent / "data" / "merkle"


def _vectors(kind: str) -> list[Path]:
    return sorted((VECTORS / kind).rglob("*.json"))


def _b64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def _proof(doc: dict) -> list[bytes]:
    return [_b64(p) for p in doc.get("proof") or []]


def test_the_vectors_are_all_there() -> None:
    assert len(_vectors("inclusion")) == 98
    assert len(_vectors("consistency")) == 98


@pytest.mark.parametrize("path", _vectors("inclusion"), ids=lambda p: str(p.relative_to(VECTORS)))
def test_inclusion_vector(path: Path) -> None:
    doc = json.loads(path.read_text())
    args = (doc["leafIdx"], doc["treeSize"], _b64(doc["leafHash"]), _proof(doc), _b64(doc["root"]))
    if doc["wantErr"]:
        with pytest.raises(ProofError):
            merkle.verify_inclusion(*args)
    else:
        merkle.verify_inclusion(*args)


@pytest.mark.parametrize("path", _vectors("consistency"), ids=lambda p: str(p.relative_to(VECTORS)))
def test_consistency_vector(path: Path) -> None:
    doc = json.loads(path.read_text())
    args = (doc["size1"], doc["size2"], _proof(doc), _b64(doc["root1"]), _b64(doc["root2"]))
    if doc["wantErr"]:
        with pytest.raises(ProofError):
            merkle.verify_consistency(*args)
    else:
        merkle.verify_consistency(*args)


# The reference: RFC 9162 §2.1.1, §2.1.3.1 and §2.1.4.1 transcribed as recursion over the
# entries themselves, sharing nothing with ledger.merkle.


def ref_hash(data: list[bytes]) -> bytes:
    n = len(data)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + data[0]).digest()
    k = ref_split(n)
    return hashlib.sha256(b"\x01" + ref_hash(data[:k]) + ref_hash(data[k:])).digest()


def ref_split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_path(m: int, data: list[bytes]) -> list[bytes]:
    n = len(data)
    if n == 1:
        return []
    k = ref_split(n)
    if m < k:
        return [*ref_path(m, data[:k]), ref_hash(data[k:])]
    return [*ref_path(m - k, data[k:]), ref_hash(data[:k])]


def ref_subproof(m: int, data: list[bytes], complete: bool) -> list[bytes]:
    n = len(data)
    if m == n:
        return [] if complete else [ref_hash(data)]
    k = ref_split(n)
    if m <= k:
        return [*ref_subproof(m, data[:k], complete), ref_hash(data[k:])]
    return [*ref_subproof(m - k, data[k:], False), ref_hash(data[:k])]


entries = st.lists(st.binary(max_size=8), min_size=1, max_size=70)


@settings(max_examples=150, deadline=None)
@given(entries, st.data())
def test_proofs_match_the_reference(data: list[bytes], draw: st.DataObject) -> None:
    leaves = [hashlib.sha256(b"\x00" + d).digest() for d in data]
    n = len(leaves)
    root = merkle.root(leaves)
    assert root == ref_hash(data)

    index = draw.draw(st.integers(0, n - 1), label="index")
    path = merkle.inclusion_proof(leaves, index)
    assert path == ref_path(index, data)
    merkle.verify_inclusion(index, n, leaves[index], path, root)

    old = draw.draw(st.integers(1, n), label="old size")
    proof = merkle.consistency_proof(leaves, old)
    assert proof == (ref_subproof(old, data, True) if old < n else [])
    merkle.verify_consistency(old, n, proof, ref_hash(data[:old]), root)


@settings(max_examples=100, deadline=None)
@given(entries, st.data())
def test_a_changed_proof_fails(data: list[bytes], draw: st.DataObject) -> None:
    leaves = [hashlib.sha256(b"\x00" + d).digest() for d in data]
    n = len(leaves)
    if n < 2:
        return
    root = merkle.root(leaves)
    index = draw.draw(st.integers(0, n - 1), label="index")
    path = merkle.inclusion_proof(leaves, index)
    at = draw.draw(st.integers(0, len(path) - 1), label="component")
    bit = draw.draw(st.integers(0, 255), label="bit")
    bent = list(path)
    flipped = bytearray(bent[at])
    flipped[bit // 8] ^= 1 << (bit % 8)
    bent[at] = bytes(flipped)
    with pytest.raises(ProofError):
        merkle.verify_inclusion(index, n, leaves[index], bent, root)
    with pytest.raises(ProofError):
        merkle.verify_inclusion(index, n, leaves[index], path, hashlib.sha256(root).digest())

    old = draw.draw(st.integers(1, n - 1), label="old size")
    proof = merkle.consistency_proof(leaves, old)
    with pytest.raises(ProofError):
        merkle.verify_consistency(old, n, proof, hashlib.sha256(b"other").digest(), root)
    with pytest.raises(ProofError):
        merkle.verify_consistency(old, n, proof[:-1], merkle.root(leaves[:old]), root)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=4), max_size=80))
def test_the_frontier_tracks_the_root_at_every_size(data: list[bytes]) -> None:
    frontier = Frontier()
    assert frontier.root() == merkle.EMPTY_ROOT
    for i, d in enumerate(data, 1):
        frontier.append(hashlib.sha256(b"\x00" + d).digest())
        assert frontier.size == i
        assert frontier.root() == ref_hash(data[:i])
