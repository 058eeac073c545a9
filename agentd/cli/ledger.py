"""`agentd ledger`: read, prove, checkpoint, verify, export and import the signed log,
and prove a fork between two of its checkpoints."""

from __future__ import annotations

import base64
import json
import re
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import Any

import click

from agentd.app.ledger import entry_filter, listed, names_in, open_for_signing, open_ledger, tree_to_prove
from agentd.app.remote import open_remote, post_remote, prove_remote
from agentd.cli.completers import wallets
from agentd.cli.options import (
    App,
    CheckFailed,
    emit_json,
    emit_json_array,
    emit_table,
    json_option,
    pass_app,
    progress,
    users_umask,
    warn_skipped,
)
from agentd.errors import AgentdError, WrongValue
from agentd.wallets import load_wallet, wallet_names
from ledger import (
    CheckpointError,
    DamagedStore,
    Entry,
    ForkProof,
    Ledger,
    LedgerError,
    Problem,
    VerifyReport,
    Witnessing,
    claimed_cosignatures,
    export_line,
    parse_checkpoint,
    parse_vkey,
    parse_witness_vkey,
    read_copy,
    vkey,
    wallet_id,
    write_copy,
)

_PULSE = re.compile(r"[0-9]{1,12}")
PULSES = click.IntRange(1, 10**12 - 1)  # a Pulse or a tree size; as _PULSE, at most 12 digits
_REF = re.compile(r"[0-9]{1,12}|[0-9a-fA-F]{4,64}")


@click.group("ledger", short_help="The signed append-only log: read, prove, verify, export.")
def command() -> None:
    """The signed append-only ledger: every entry is a DSSE envelope signed by its
    author's wallet; its Pulse is its 1-based place in the log, its claim id the hex of
    its leaf hash in the RFC 9162 Merkle tree. Anyone holding an export and a
    checkpoint can check the log offline."""


@command.command("log", short_help="List entries in Pulse order.")
@click.option("--kind", help="Only entries of this kind (like funds.transfer/v1).")
@click.option("--from", "start", type=PULSES, default=1, show_default=True, help="Start at this Pulse.")
@click.option("--author", help="Only entries signed by this wallet (a name in this home, or a wallet id).")
@click.option(
    "--last", type=click.IntRange(min=1), help="Only the last N entries that match (read from the log's end)."
)
@click.option("--remote", metavar="URL", help="List a daemon's ledger (http://HOST:PORT) instead of this home's.")
@json_option
@pass_app
def log(
    app: App, kind: str | None, start: int, author: str | None, last: int | None, remote: str | None, as_json: bool
) -> None:
    """List entries in Pulse order: Pulse, time, kind, author and claim id.

    With --json, one JSON array of entries. With --remote URL no home is needed; "log"
    is then that log's own key."""
    home = app.home_if_any() if remote else app.home
    with open_remote(remote) if remote else open_ledger(app.home, read_only=True) as ledger:
        log_id = wallet_id(ledger.public_key) if remote and ledger.size else None
        kind, author_id = entry_filter(home, kind, author, kind_option="--kind", log_id=log_id)
        names = names_in(home, log_id, warn_skipped)
        entries = listed(ledger, kind, author_id, start, last)
        # Printed as they are read: a long log is never held whole.
        first = next(entries, None)
        if first is not None and as_json:
            emit_json_array(_as_json(e, names, with_bytes=False) for e in chain([first], entries))
        elif first is not None:
            rows = (
                (e.pulse, e.at, e.kind, names.get(e.author, e.author), e.claim_id[:16]) for e in chain([first], entries)
            )
            emit_table(chain([("PULSE", "AT", "KIND", "AUTHOR", "CLAIM")], rows))
    if first is None:
        if as_json:
            emit_json([])
        progress("no entries" + (" match" if kind or author or start > 1 or last else ""))


@command.command("show", short_help="Show one entry by Pulse or claim id.")
@click.argument("ref", metavar="PULSE|CLAIM")
@json_option
@pass_app
def show(app: App, ref: str, as_json: bool) -> None:
    """Show one entry, by Pulse or by claim id (a unique prefix of 4 or more hex digits
    will do), with its body and exact bytes."""
    names = wallet_names(app.home, skip=warn_skipped)
    with open_ledger(app.home, read_only=True) as ledger:
        entry = _resolve(ledger, ref)
    described = _as_json(entry, names, with_bytes=True)
    if as_json:
        emit_json(described)
        return
    author = f"{entry.author} ({names[entry.author]})" if entry.author in names else entry.author
    emit_table(
        [("pulse", entry.pulse), ("claim", entry.claim_id), ("kind", entry.kind), ("author", author), ("at", entry.at)]
    )
    click.echo("body:")
    click.echo(json.dumps(entry.body, indent=2, ensure_ascii=False, sort_keys=True))


@command.command("checkpoint", short_help="Print the log's latest signed checkpoint, with cosignatures.")
@click.option(
    "--add",
    "cosigned_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Keep the cosignatures a witness added to one of the log's checkpoints (a cosigned note).",
)
@json_option
@pass_app
def checkpoint(app: App, cosigned_file: Path | None, as_json: bool) -> None:
    """Print a checkpoint of the log as it stands (a C2SP signed note: origin, size,
    root, the log key's signature, then any witnesses' cosignatures), signing one if
    none covers the current size. Keep it: `ledger verify --checkpoint FILE` later
    proves the log only grew; witnesses cosign it (`agentd witness cosign`), and
    --add FILE keeps their cosignatures with the log.

    With --json, {"origin", "size", "root" (hex), "log_key" (its verifier key, for
    witnesses and auditors), "cosignatures" (name and time of each, as their lines say:
    `ledger verify --witness-key` checks them), "note" (the signed note itself)}."""
    with open_ledger(app.home) if cosigned_file else open_for_signing(app.home) as ledger:
        note = ledger.add_cosignatures(_read_checkpoint(cosigned_file)) if cosigned_file else ledger.checkpoint()
        log_vkey = vkey(ledger.origin, ledger.public_key) if as_json else ""
    cosigned = claimed_cosignatures(note)
    if not as_json:
        click.echo(note, nl=False)
        for c in cosigned:
            progress(f"cosigned by {c.name} at {_utc(c.timestamp)} (`ledger verify --witness-key` checks it)")
        return
    signed = parse_checkpoint(note)
    emit_json(
        {
            "origin": signed.origin,
            "size": signed.size,
            "root": signed.root.hex(),
            "log_key": log_vkey,
            "cosignatures": [{"name": c.name, "time": _utc(c.timestamp)} for c in cosigned],
            "note": note,
        }
    )


@command.command("prove", short_help="Print an inclusion or consistency proof (JSON).")
@click.argument("ref", metavar="[PULSE|CLAIM]", required=False)
@click.option("--size", type=PULSES, help="Prove against the tree of this many entries (default: all).")
@click.option("--from-size", type=PULSES, help="Prove instead that the tree of this size is a prefix of the log.")
@click.option(
    "--remote", metavar="URL", help="Prove against a daemon's ledger (http://HOST:PORT), checking the proof here."
)
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --remote: a checkpoint you kept; the daemon's log must extend it.",
)
@pass_app
def prove(
    app: App, ref: str | None, size: int | None, from_size: int | None, remote: str | None, checkpoint_file: Path | None
) -> None:
    """Print a Merkle proof as JSON: that an entry is in the log (inclusion), or, with
    --from-size M, that the log of M entries is a prefix of today's (consistency).

    Hashes are base64, as in RFC 9162 test vectors. When a signed checkpoint covers the
    proof's tree size it is included, so the proof can be checked offline."""
    if (ref is None) == (from_size is None):
        raise click.UsageError("give either PULSE|CLAIM (inclusion) or --from-size M (consistency)")
    if remote is not None:
        kept = _read_checkpoint(checkpoint_file) if checkpoint_file else None
        found = prove_remote(remote, ref if ref is None else _checked_ref(ref), size, from_size, kept)
        progress(
            f"checked here: the proof leads to the root the log's key signed at size {parse_checkpoint(found.checkpoint).size}"
        )
        if found.extends is not None:
            progress(f"checked here: the log extends the checkpoint you kept at size {found.extends}")
        emit_json({**found.proof, "checkpoint": found.checkpoint})
        return
    if checkpoint_file is not None:
        raise click.UsageError("--checkpoint goes with --remote (a local proof carries the log's own checkpoint)")
    with open_for_signing(app.home) as ledger:
        pulse = _resolve(ledger, ref).pulse if ref is not None else None
        tree_size, note = tree_to_prove(ledger, size, app.home)
        if from_size is not None:
            proof = ledger.consistency_proof(from_size, tree_size).to_json()
        else:
            proof = ledger.inclusion_proof(pulse or 0, tree_size).to_json()
    emit_json({**proof, "checkpoint": note})


@command.command("post", short_help="Sign an entry with a wallet of this home and post it to a daemon.")
@click.argument("kind")
@click.argument("body")
@click.option("--remote", metavar="URL", required=True, help="The daemon (http://HOST:PORT) whose ledger records it.")
@click.option(
    "--wallet", "wallet_name", required=True, shell_complete=wallets, help="The wallet of this home that signs it."
)
@json_option
@pass_app
def post(app: App, kind: str, body: str, remote: str, wallet_name: str, as_json: bool) -> None:
    """Sign an entry of KIND with BODY (a JSON object) as a wallet of this home, for the
    ledger a daemon serves, and post it there: its signature authenticates it, the
    daemon's rules decide. Prints its Pulse and claim id (--json: with the receipt)."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise WrongValue(f"BODY is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise WrongValue("BODY must be a JSON object")
    answer = post_remote(remote, load_wallet(app.home, wallet_name), kind, doc)
    if as_json:
        emit_json(answer)
    else:
        click.echo(f"recorded at Pulse {answer['pulse']} of {remote}: claim {answer['claim']}")


@command.command("verify", short_help="Recheck every entry, rule, the tree and checkpoints.")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A checkpoint saved earlier: the log must still extend it (catches truncation and rewrites).",
)
@click.option(
    "--jobs", type=click.IntRange(1, 256), default=1, show_default=True, help="Check signatures in this many processes."
)
@click.option(
    "--witnesses",
    "quorum",
    type=click.IntRange(min=1),
    help="Require a checkpoint of the log cosigned by this many of the --witness-key witnesses.",
)
@click.option(
    "--witness-key",
    "witness_keys",
    multiple=True,
    metavar="VKEY",
    help="A witness you trust, as its verifier key (`agentd witness show`); repeat for each.",
)
@click.option(
    "--remote", metavar="URL", help="Verify a daemon's ledger (http://HOST:PORT), fetched over HTTP and checked here."
)
@json_option
@pass_app
def verify(
    app: App,
    checkpoint_file: Path | None,
    jobs: int,
    quorum: int | None,
    witness_keys: tuple[str, ...],
    remote: str | None,
    as_json: bool,
) -> None:
    """Recompute everything: each entry's bytes, canonical form and signature, every
    rule by replaying the log (each entry names this log and its author's next
    sequence number, and is recorded once), the Merkle tree against the stored tree
    and the head, rows beyond the head, and consistency with the log's own checkpoints
    and the one given. With --witnesses N, a checkpoint must carry N valid cosignatures
    of the witnesses given. On failure names the first bad Pulse and why, and exits 3.

    With --remote URL the log is a daemon's: every entry, tile and checkpoint is fetched
    over HTTP and all of the above recomputed here, trusting nothing it sends; give
    --checkpoint with one you kept from an earlier audit. No home is needed."""
    witnesses = _witnessing(quorum, witness_keys)
    note = _read_checkpoint(checkpoint_file) if checkpoint_file else None
    try:
        with open_remote(remote) if remote else open_ledger(app.home, check=False, read_only=True) as ledger:
            report = ledger.verify(
                jobs=jobs, checkpoint=note, progress=lambda n: progress(f"checked {n} entries"), witnesses=witnesses
            )
    except DamagedStore as exc:
        report = VerifyReport(problem=Problem(None, str(exc)))
    if as_json:
        emit_json(report.to_json())
    if not report.ok:
        raise CheckFailed(str(report.problem))
    if not as_json:
        sizes = ", ".join(map(str, report.checkpoints)) or "none yet"
        click.echo(f"ok: {report.size} entries, {report.signatures} signatures and every rule hold")
        # Checkpoints (C2SP signed notes) write the root in base64: both, to compare with either.
        click.echo(
            f"root {report.root.hex()} (base64 {base64.b64encode(report.root).decode()}, as checkpoints write it)"
        )
        click.echo(f"consistent with checkpoints at sizes: {sizes}")
        if witnesses:
            click.echo(
                f"witnessed: the checkpoint at size {report.witnessed} is cosigned by {', '.join(report.cosigners)}"
            )


def _witnessing(quorum: int | None, keys: tuple[str, ...]) -> Witnessing | None:
    if quorum is None:
        if keys:
            raise click.UsageError("--witness-key needs --witnesses N: how many of them must have cosigned")
        return None
    if quorum > len(keys):
        raise click.UsageError(f"--witnesses {quorum} needs at least {quorum} --witness-key options")
    try:
        return Witnessing([parse_witness_vkey(key) for key in keys], quorum)
    except CheckpointError as exc:
        raise click.BadParameter(str(exc), param_hint="--witness-key") from None


@command.command("fork-proof", short_help="Prove that two signed checkpoints of the log conflict.")
@click.argument(
    "checkpoints", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path), metavar="CP1 CP2"
)
@click.option(
    "--check",
    "proof_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Check a saved fork proof instead (exit 0 when it holds, 3 when it does not).",
)
@click.option("--log-key", "log_vkey", metavar="VKEY", help="The log's verifier key (default: this home's ledger's).")
@pass_app
def fork_proof(app: App, checkpoints: tuple[Path, ...], proof_file: Path | None, log_vkey: str | None) -> None:
    """Print, as JSON, the proof that two checkpoints the log signed (CP1, CP2) cannot
    both be of a log that only grows: of one size with two roots, or the larger tree's
    prefix at the smaller size is not the smaller's root. The proof's consistency path
    comes from this home's ledger, which must hold the larger checkpoint's tree.
    Checkpoints that are consistent are an error: there is nothing to prove.

    With --check FILE, check a saved fork proof offline, against the log's key."""
    if (len(checkpoints) == 2) == (proof_file is not None) or len(checkpoints) not in (0, 2):
        raise click.UsageError("give two checkpoint files, CP1 CP2, or --check FILE")
    if proof_file is not None:
        proof = _read_fork_proof(proof_file)
        key = _log_key(app, log_vkey)
        try:
            a, b = proof.check(key)
        except LedgerError as exc:
            raise CheckFailed(f"the fork proof does not hold: {exc}") from None
        click.echo(f"holds: the log {a.origin} signed checkpoints at sizes {a.size} and {b.size} that conflict")
        return
    one, other = (_read_checkpoint(path) for path in checkpoints)
    with open_ledger(app.home) as ledger:
        found = ledger.fork_proof(one, other)
        if log_vkey is not None and found is not None:
            found.check(_log_key(app, log_vkey))
    if found is None:
        raise AgentdError(
            f"{checkpoints[0]} and {checkpoints[1]} are consistent: the log only grew between them, no fork to prove"
        )
    emit_json(found.to_json())
    a, b = (parse_checkpoint(n) for n in (found.first, found.second))
    progress(f"the log forked: its checkpoints at sizes {a.size} and {b.size} conflict (the proof holds)")


def _log_key(app: App, log_vkey: str | None) -> bytes:
    if log_vkey is not None:
        try:
            return parse_vkey(log_vkey)[1]
        except CheckpointError as exc:
            raise click.BadParameter(str(exc), param_hint="--log-key") from None
    with open_ledger(app.home) as ledger:
        return ledger.public_key


def _read_fork_proof(path: Path) -> ForkProof:
    try:
        return ForkProof.from_json(json.loads(_read_text(path)))
    except (ValueError, LedgerError) as exc:
        raise AgentdError(f"{path} is not a fork proof: {exc}") from None


@command.command("export", short_help="Write the exact entries to FILE as JSON lines.")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--force", is_flag=True, help="Replace FILE when it exists.")
@pass_app
def export(app: App, file: Path, force: bool) -> None:
    """Write every entry, exactly as stored, to FILE as JSON lines
    ({"pulse": N, "entry": base64}); '-' writes to stdout. FILE's folder must exist, and
    FILE must not, unless --force; the copy is for others to check, so it is readable by
    them (mode 0644, less your umask)."""
    to_stdout = str(file) == "-"
    if not to_stdout and file.exists() and not force:
        raise AgentdError(f"{file} exists already: give another name, or --force to replace it")
    with open_ledger(app.home, read_only=True) as ledger:
        # Written as they are read: a long log is never held whole.
        lines = (export_line(entry) for entry in ledger.entries())
        if to_stdout:
            count = 0
            for count, line in enumerate(lines, 1):  # noqa: B007  (count is what was exported)
                click.echo(line)
        else:
            with users_umask():
                count = write_copy(file, lines)
    progress(f"exported {count} entries to {file}")


@command.command("import", short_help="Rebuild an exported log in this empty ledger.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A checkpoint of the log from a source you trust: the copy must extend it.",
)
@json_option
@pass_app
def import_(app: App, file: Path, checkpoint_file: Path | None, as_json: bool) -> None:
    """Rebuild an exported log in this home's empty ledger, checking every entry's
    signature and rule as it goes; all of it is recorded, or none.

    Without --checkpoint only the copy's own consistency is checked: a copy cut short
    passes. With it, a copy that does not extend the checkpoint (cut short, pruned,
    reordered) is refused, naming the first bad Pulse where it can be known."""
    note = _read_checkpoint(checkpoint_file) if checkpoint_file else None
    with open_ledger(app.home) as ledger:
        imported = ledger.import_entries(read_copy(_lines(file)), checkpoint=note)
        root = ledger.root().hex() if imported.size else ""
    scope = imported.scope + ("" if note else ": give --checkpoint CP to check it against a checkpoint you trust")
    if as_json:
        emit_json({"entries": imported.size, "root": root or None, "checked": scope})
    else:
        click.echo(f"imported {imported.size} entries; root {root}")
        click.echo(scope)


def _checked_ref(ref: str) -> str:
    """`ref` stripped, or WrongValue when it can be neither a Pulse nor a claim id."""
    ref = ref.strip()
    if not _REF.fullmatch(ref):
        raise WrongValue(f"{ref!r} is neither a Pulse (a number) nor a claim id (4 to 64 hex digits)")
    return ref


def _resolve(ledger: Ledger, ref: str) -> Entry:
    """A Pulse (a number) or a claim id prefix; a long all-digit string is tried as a
    claim first, since claim ids can be all digits too."""
    ref = _checked_ref(ref)
    if _PULSE.fullmatch(ref) and len(ref) < 8:
        return ledger.get(int(ref))
    if _PULSE.fullmatch(ref):
        try:
            return ledger.find(ref)
        except LedgerError:
            return ledger.get(int(ref))
    return ledger.find(ref)


def _as_json(entry: Entry, names: dict[str, str], *, with_bytes: bool) -> dict[str, Any]:
    doc = {
        "pulse": entry.pulse,
        "claim": entry.claim_id,
        "kind": entry.kind,
        "author": entry.author,
        "author_name": names.get(entry.author),
        "at": entry.at,
        "body": entry.body,
    }
    if with_bytes:
        doc["entry"] = base64.b64encode(entry.raw).decode()
    return doc


def _utc(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read_checkpoint(path: Path) -> str:
    """A saved checkpoint's text; a file that is not one is the caller's mistake, not a
    fault of the log, so it is an error rather than a failed check."""
    note = _read_text(path)
    try:
        parse_checkpoint(note)
    except CheckpointError as exc:
        raise AgentdError(f"{path} is not a checkpoint: {exc}") from None
    return note


def _lines(path: Path) -> Iterator[str]:
    """The lines of `path` ('-': stdin) as they are read, not the file whole; one that
    cannot be read, or is not text, is an error naming it."""
    try:
        with nullcontext(sys.stdin) if str(path) == "-" else path.open() as f:
            yield from f
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentdError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _read_text(path: Path) -> str:
    return "".join(_lines(path))
