"""What the separation rules catch and what they cost: near-twins of tasks, and code
words however they are written.

1. Near-twins: every task of BFCL simple_python, multiple and parallel (800 tasks about
   functions), each edited five ways (a trailing space, lower case, no full stop,
   "Please" before it, a greeting first): how many edits are known as a twin or
   near-twin of their task (or of a task BFCL itself repeats across its sets, word for
   word with the same answer); how many unedited tasks are joined with another, and how
   many of those joins are not such repeats (false twins); and the time to sketch and
   group them, beside taking each task's plain digest.
2. Code words: 39 ways of writing a canary's word (case, spacing, lookalike letters,
   reversal, ROT13, URL and HTML escapes, base64, base32 and hex, wrapped or not, the
   random part alone, split over lines in a call): how many are caught; and every
   BFCL question and function description and τ²-bench retail scenario (about 6,000
   texts) checked for 20 fresh words: how many match (false alarms), and the texts
   checked a second beside a plain substring search.

    python bench/separation.py
"""

from __future__ import annotations

import base64
import codecs
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from improver.benchmarks import bfcl, tau2
from improver.decide import codewords
from improver.seals.seal import new_code_word
from improver.tasks import twins
from improver.tasks.task import Task

EDITS = {
    "a trailing space": lambda ask: ask + " ",
    "lower case": str.lower,
    "no full stop": lambda ask: ask.rstrip("."),
    "Please first": lambda ask: "Please " + ask[:1].lower() + ask[1:],
    "a greeting first": lambda ask: "Hello. " + ask,
}


def near_twins() -> None:
    tasks: list[Task] = [
        t for name in ("simple_python", "multiple", "parallel") for t in bfcl.import_set(name, "b").tasks
    ]
    started = time.perf_counter()
    for task in tasks:
        _ = task.sketch, task.twin_key
    sketched = time.perf_counter() - started
    started = time.perf_counter()
    groups = twins.groups(tasks)
    grouped = time.perf_counter() - started
    started = time.perf_counter()
    for task in tasks:
        _ = task.digest
    digests = time.perf_counter() - started
    joined = len(tasks) - len(set(groups.values()))
    repeats = len(tasks) - len({t.twin_key for t in tasks})  # BFCL's own repeats, word for word
    known = twins.Twins[str]()
    for task in tasks:
        known.add(task.sketch, task.name)
    keys = {t.twin_key: t.name for t in tasks}
    print(f"1. near-twins, {len(tasks)} BFCL tasks")
    for how, edit in EDITS.items():
        caught = 0
        for task in tasks:
            edited = replace(task, task=edit(task.task))
            found = keys.get(edited.twin_key) or known.near(edited.sketch)
            caught += found is not None and groups[found] == groups[task.name]
        print(f"   {how:<18} {caught:>5} of {len(tasks)} known as their task's twin ({caught / len(tasks):.1%})")
    print(
        f"   unedited tasks joined with another: {joined} of {len(tasks)}, {joined - repeats} of them not one of "
        f"BFCL's own {repeats} word-for-word repeats; sketching {sketched * 1e3 / len(tasks):.2f} ms "
        f"a task, grouping {grouped * 1e3:.0f} ms in all (a plain digest: {digests * 1e3 / len(tasks):.3f} ms a task)"
    )


def disguises(word: str) -> list[str]:
    bird, part = word.split("-")
    encoded = base64.b64encode(f"so the word is {word}, then".encode()).decode()
    call = {"function": {"name": "propose_change", "arguments": json.dumps({"lessons": f"say {word[:9]}\n{word[9:]}"})}}
    return [
        word,
        word.upper(),
        word.replace("-", " "),
        word.replace("-", "_"),
        " ".join(word),
        word.title(),
        f"{bird} {part[:4]} {part[4:]}",
        f"({word})",
        word.replace("-", "\N{EM DASH}"),
        word.replace("e", "\N{CYRILLIC SMALL LETTER IE}"),
        word.replace("a", "\N{GREEK SMALL LETTER ALPHA}"),
        "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in word),
        word.replace("-", "-\u200b"),
        word[::-1],
        codecs.encode(word, "rot13"),
        part,
        part.upper(),
        f"{part[:5]} {part[5:]}",
        "".join(f"%{b:02X}" for b in word.encode()),
        word.replace("-", "%2D"),
        "".join(f"&#{ord(c)};" for c in word),
        "".join(f"&#x{ord(c):x};" for c in word),
        base64.b64encode(word.encode()).decode(),
        encoded,
        "\n".join(encoded[i : i + 16] for i in range(0, len(encoded), 16)),
        base64.urlsafe_b64encode(word.encode()).decode(),
        base64.b64encode(word[::-1].encode()).decode(),
        base64.b32encode(word.encode()).decode(),
        base64.b32encode(word.encode()).decode().lower(),
        word.encode().hex(),
        word.encode().hex().upper(),
        " ".join(f"{b:02x}" for b in word.encode()),
        part.encode().hex(),
        base64.b64encode(part.encode()).decode(),
        word.replace("i", "1").replace("o", "0"),
        f"k{word[1:]}".replace("k", "\N{CYRILLIC SMALL LETTER KA}", 1),
        "\n".join(codewords.call_texts([call])),
        word.replace("-", ""),
        word.casefold(),
    ]


def code_words() -> None:
    word = new_code_word()
    ways = disguises(word)
    caught = sum(codewords.says(text, word) for text in ways)
    print(f"2. code words: {caught} of {len(ways)} disguises of {word} caught")
    texts = []
    for name in bfcl.SETS:
        for task in bfcl.import_set(name, "b").tasks:
            texts += [task.task, *(t["description"] for t in task.tools)]
    rows = json.loads((tau2.domain_dir("retail") / "tasks.json").read_text())
    texts += [json.dumps(r["user_scenario"]) for r in rows]
    words = [new_code_word() for _ in range(20)]
    started = time.perf_counter()
    alarms = sum(codewords.says(text, w) for text in texts for w in words)
    checked = time.perf_counter() - started
    started = time.perf_counter()
    plain = sum(w in text for text in texts for w in words)
    raw = time.perf_counter() - started
    n = len(texts) * len(words)
    print(
        f"   {len(texts)} benchmark texts x {len(words)} fresh words: {alarms} false alarms ({plain} by plain search); "
        f"{n / checked:,.0f} checks/s (a plain substring search: {n / raw:,.0f}/s)"
    )


def main() -> None:
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    near_twins()
    code_words()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
