// Checks an entry's inclusion proof against the log's signed checkpoint, in the page:
// the leaf hash from the entry's exact bytes, the path up to the root (RFC 9162
// section 2.1.3.2, as ledger/merkle.py does), the root and size the checkpoint signs,
// and the checkpoint's Ed25519 signature by the log's key (C2SP signed note).
"use strict";

const bytesOf = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
const hexOf = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

function joined(parts) {
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  return all;
}

async function sha256(...parts) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", joined(parts)));
}

const leafHash = (entry) => sha256(Uint8Array.of(0), entry);
const nodeHash = (left, right) => sha256(Uint8Array.of(1), left, right);

class Failed extends Error {}

// The root the audit path leads to from leaf `index` of a tree of `size` leaves.
async function rootFrom(index, size, leaf, path) {
  if (!(index >= 0 && index < size)) throw new Failed(`leaf index ${index} is outside a tree of size ${size}`);
  let fn = index, sn = size - 1, r = leaf;
  const half = (n) => Math.floor(n / 2);
  for (const p of path) {
    if (p.length !== 32) throw new Failed("proof hashes are 32 bytes");
    if (sn === 0) throw new Failed("the proof is longer than the tree is deep");
    if (fn % 2 === 1 || fn === sn) {
      r = await nodeHash(p, r);
      while (fn % 2 === 0 && fn !== 0) { fn = half(fn); sn = half(sn); }
    } else {
      r = await nodeHash(r, p);
    }
    fn = half(fn); sn = half(sn);
  }
  if (sn !== 0) throw new Failed("the proof is shorter than the tree is deep");
  return r;
}

// A C2SP signed note: the signed text, its origin, size and root, and its signature lines.
function parseNote(note) {
  const cut = note.indexOf("\n\n");
  if (cut < 0) throw new Failed("the checkpoint is not a signed note (no blank line before its signatures)");
  const text = note.slice(0, cut + 1);
  const [origin, size, root] = text.split("\n");
  if (!/^[0-9]+$/.test(size || "") || !root) throw new Failed("the checkpoint does not hold an origin, a size and a root");
  const signatures = note.slice(cut + 2).split("\n").filter((l) => l).map((line) => {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m) throw new Failed(`a malformed signature line in the checkpoint: ${line}`);
    return { name: m[1], blob: bytesOf(m[2]) };
  });
  return { text, origin, size: Number(size), root: bytesOf(root), signatures };
}

// "checked", "not checked: ..." (a browser without Ed25519), or throws when it fails.
async function checkSignature(note, publicKey) {
  // A signature line names its key and starts with the key's hash (C2SP signed note).
  let ours = null;
  for (const s of note.signatures) {
    const hash = await sha256(new TextEncoder().encode(s.name + "\n"), Uint8Array.of(1), publicKey);
    if (s.blob.length === 68 && same(s.blob.slice(0, 4), hash.slice(0, 4))) { ours = s; break; }
  }
  if (!ours) throw new Failed("the checkpoint bears no signature by the log's key");
  let key;
  try {
    key = await crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
  } catch (e) {
    return "not checked: this browser has no Ed25519";
  }
  const good = await crypto.subtle.verify({ name: "Ed25519" }, key, ours.blob.slice(4), new TextEncoder().encode(note.text));
  if (!good) throw new Failed("the checkpoint's signature does not hold");
  return "checked";
}

async function check(doc, entry, publicKey, say) {
  const leaf = await leafHash(entry);
  if (!same(leaf, bytesOf(doc.leaf_hash))) throw new Failed("the entry's bytes do not hash to the proof's leaf hash");
  say(`the entry's bytes hash to leaf ${hexOf(leaf).slice(0, 16)}…, its claim`);
  if (!doc.checkpoint) throw new Failed("no signed checkpoint covers this tree yet");
  const note = parseNote(doc.checkpoint);
  if (note.size !== doc.tree_size) throw new Failed(`the proof is for a tree of ${doc.tree_size} entries, the checkpoint signs one of ${note.size}`);
  const root = await rootFrom(doc.pulse - 1, doc.tree_size, leaf, doc.proof.map(bytesOf));
  if (!same(root, note.root)) throw new Failed("the proof leads to a different root than the checkpoint signs");
  say(`${doc.proof.length} hashes lead from it to the root ${hexOf(root).slice(0, 16)}… of the tree of ${note.size} entries`);
  const signature = await checkSignature(note, publicKey);
  say(`the checkpoint's signature by the log's key: ${signature}`);
  return note;
}

async function run() {
  const data = document.getElementById("proof-data");
  const status = document.getElementById("proof-status");
  const steps = document.getElementById("proof-steps");
  steps.replaceChildren();
  const say = (text) => { const li = document.createElement("li"); li.textContent = text; steps.append(li); };
  status.className = "checking";
  status.textContent = "Checking in this page…";
  try {
    let doc;
    try { doc = JSON.parse(document.getElementById("proof-doc").value); }
    catch (e) { throw new Failed("the proof is not JSON"); }
    if (!doc || !Array.isArray(doc.proof)) throw new Failed("the proof has no list of hashes");
    const note = await check(doc, bytesOf(data.dataset.entry), bytesOf(data.dataset.logKey), say);
    status.className = "ok";
    status.textContent = `Proof checked: Pulse ${doc.pulse} is in the log's tree of ${note.size} entries, as its signed checkpoint says.`;
  } catch (e) {
    status.className = "failed";
    status.textContent = `Proof FAILED: ${e instanceof Failed ? e.message : "cannot check it (" + e + ")"}`;
  }
}

document.getElementById("check-proof").addEventListener("click", run);
run();
