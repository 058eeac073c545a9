"""Finding a canary's code word in what a proposer or a run said, however it was written.

A code word (`kestrel-1a2b3c4d5e`) counts as said whatever its case, spacing,
punctuation or hyphenation ("Kestrel 1A2B 3C4D 5E", "kestrel_1a2b3c4d5e"), and when a
run of base64 or hex in the text decodes to something that says it. Both sides are
folded to their letters and digits alone before they are compared. Ordinary prose does
not trip it: the word's random part (ten hex digits) makes a chance match in the
letters and digits of real text about one in a trillion per place, and a near miss
(another bird, another digit) is no match.
"""

from __future__ import annotations

import base64
import binascii
import re

BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")
HEX_RUN = re.compile(r"(?:[0-9A-Fa-f]{2}[\s:]?){8,}")
NOT_ALNUM = re.compile(r"[\W_]+")


def fold(text: str) -> str:
    """Letters and digits only, case folded: what a code word is compared by."""
    return NOT_ALNUM.sub("", text.casefold())


def says(text: str, word: str) -> bool:
    """Whether `text` holds `word`, in any case, spacing, punctuation or hyphenation,
    or encoded in base64 or hex."""
    target = fold(word)
    if not target:
        return False
    return any(target in fold(candidate) for candidate in (text, *decoded(text)))


def decoded(text: str) -> list[str]:
    """What each run of base64 or hex in `text` decodes to, where it decodes to text."""
    found: list[str] = []
    for run in BASE64_RUN.findall(text):
        body = run.rstrip("=")
        for alphabet in (None, b"-_"):
            try:
                raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=alphabet)
            except (binascii.Error, ValueError):
                continue
            found.append(raw.decode("utf-8", "ignore"))
    for run in HEX_RUN.findall(text):
        digits = re.sub(r"[\s:]", "", run)
        try:
            found.append(bytes.fromhex(digits[: len(digits) // 2 * 2]).decode("utf-8", "ignore"))
        except ValueError:
            continue
    return found
