"""Finding a canary's code word in what a proposer or a run said, however it was written.

A code word (`kestrel-1a2b3c4d5e`) counts as said whatever its case, spacing,
punctuation or hyphenation ("Kestrel 1A2B 3C4D 5E", "kestrel_1a2b3c4d5e"), and however
it is disguised:

- letters that only look alike: fullwidth and other compatibility forms (NFKC),
  accents, and the Cyrillic and Greek letters that pass for Latin ones (a skeleton, as
  Unicode's confusables have it, of the letters a word is made of), 0 for o and 1 for l;
- the text reversed, or ROT13'd;
- URL escapes (`%6B`) and HTML escapes (`&#107;`);
- a run of base64, base32 or hex that decodes to something that says it, the run
  wrapped over lines or broken by spaces;
- its random part alone (ten hex digits): a chance match in the letters and digits of
  real text is about one in a trillion per place, and the bird without it is no secret.

Both sides are folded to their skeleton's letters and digits before they are compared.
A near miss (another bird, another digit) is no match. Calls are read with their
arguments decoded (`call_texts`): an argument is JSON text inside JSON, and a word split
over two lines there reads as `\\n` until it is decoded.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote_plus

from improver.base.nesting import loads_bounded

BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")
BASE32_RUN = re.compile(r"[A-Za-z2-7]{16,}={0,6}")
HEX_RUN = re.compile(r"(?:[0-9A-Fa-f]{2}[\s:]?){5,}")
NOT_ALNUM = re.compile(r"[\W_]+")
SPACE = re.compile(r"\s+")
RANDOM_PART = re.compile(r"[0-9a-f]{10}$")
# Letters that pass for Latin ones (Cyrillic, Greek, a few more), and digits for letters,
# each to the one letter both are read as.
LOOKALIKES = str.maketrans(
    {
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER A}\N{LATIN SMALL LETTER ALPHA}\N{GREEK SMALL LETTER ALPHA}", "a"),
        **dict.fromkeys(
            "\N{CYRILLIC SMALL LETTER VE}\N{GREEK SMALL LETTER BETA}\N{CYRILLIC SMALL LETTER SOFT SIGN}", "b"
        ),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER ES}\N{GREEK LUNATE SIGMA SYMBOL}", "c"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER KOMI DE}", "d"),
        **dict.fromkeys(
            "\N{CYRILLIC SMALL LETTER IE}\N{CYRILLIC SMALL LETTER IO}\N{GREEK SMALL LETTER EPSILON}\N{CYRILLIC SMALL LETTER UKRAINIAN IE}",
            "e",
        ),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER SHHA}\N{CYRILLIC SMALL LETTER EN}", "h"),
        **dict.fromkeys(
            "\N{CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I}\N{GREEK SMALL LETTER IOTA}\N{LATIN SMALL LETTER DOTLESS I}\N{LATIN SMALL LETTER IOTA}\N{CYRILLIC SMALL LETTER PALOCHKA}",
            "l",
        ),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER JE}", "j"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER KA}\N{GREEK SMALL LETTER KAPPA}", "k"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER EM}", "m"),
        **dict.fromkeys("\N{GREEK SMALL LETTER ETA}\N{CYRILLIC SMALL LETTER PE}", "n"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER O}\N{GREEK SMALL LETTER OMICRON}\N{GREEK SMALL LETTER SIGMA}", "o"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER ER}\N{GREEK SMALL LETTER RHO}", "p"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER QA}", "q"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER DZE}", "s"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER TE}\N{GREEK SMALL LETTER TAU}", "t"),
        **dict.fromkeys("\N{GREEK SMALL LETTER UPSILON}", "u"),
        **dict.fromkeys("\N{GREEK SMALL LETTER NU}\N{CYRILLIC SMALL LETTER IZHITSA}", "v"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER WE}\N{GREEK SMALL LETTER OMEGA}", "w"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER HA}\N{GREEK SMALL LETTER CHI}", "x"),
        **dict.fromkeys("\N{CYRILLIC SMALL LETTER U}\N{GREEK SMALL LETTER GAMMA}", "y"),
        **dict.fromkeys("1i|", "l"),
        "0": "o",
    }
)


def fold(text: str) -> str:
    """The text's skeleton, letters and digits only: what a code word is compared by."""
    text = unicodedata.normalize("NFKC", text).casefold()
    bare = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return NOT_ALNUM.sub("", bare.translate(LOOKALIKES))


def says(text: str, word: str) -> bool:
    """Whether `text` holds `word` (or its random part) however it is written (above)."""
    return said_of(text, [word]) is not None


def said_of(text: str, words: list[str]) -> int | None:
    """The index of the first of `words` that `text` holds however it is written, or
    None: the text's readings are made once for all of them."""
    targets = [[t for t in (fold(word), *_random_part(word)) if t] for word in words]
    if not any(targets):
        return None
    folded = [fold(candidate) for candidate in readings(text)]
    return next((i for i, each in enumerate(targets) if any(t in f for f in folded for t in each)), None)


def _random_part(word: str) -> list[str]:
    found = RANDOM_PART.search(word.casefold())
    return [fold(found.group())] if found else []


def readings(text: str) -> Iterator[str]:
    """The text, each way it may have been disguised undone, and what its encoded runs decode to."""
    plain = [text, html.unescape(text), unquote_plus(text)]
    for each in dict.fromkeys(plain):
        for turned in (each, each[::-1], codecs.encode(each, "rot13")):
            yield turned
            for found in (*decoded(turned), *decoded(SPACE.sub("", turned))):  # a run wrapped over lines or spaced
                yield found
                yield found[::-1]


def decoded(text: str) -> list[str]:
    """What each run of base64, base32 or hex in `text` decodes to, where it decodes to text."""
    found: list[str] = []
    for run in BASE64_RUN.findall(text):
        body = run.rstrip("=")
        for alphabet in (None, b"-_"):
            try:
                raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=alphabet)
            except (binascii.Error, ValueError):
                continue
            found.append(raw.decode("utf-8", "ignore"))
    for run in BASE32_RUN.findall(text):
        body = run.rstrip("=").upper()
        try:
            found.append(base64.b32decode(body + "=" * (-len(body) % 8)).decode("utf-8", "ignore"))
        except (binascii.Error, ValueError):
            continue
    for run in HEX_RUN.findall(text):
        digits = re.sub(r"[\s:]", "", run)
        try:
            found.append(bytes.fromhex(digits[: len(digits) // 2 * 2]).decode("utf-8", "ignore"))
        except ValueError:
            continue
    return found


def call_texts(calls: Iterable[Any]) -> list[str]:
    """Each tool call (OpenAI's shape) as sent, and the text of its arguments decoded:
    every string in them, and every key."""
    texts = []
    for call in calls:
        texts.append(json.dumps(call, ensure_ascii=False))
        arguments = call.get("function", {}).get("arguments") if isinstance(call, dict) else None
        if isinstance(arguments, str):
            try:
                texts.extend(_strings(loads_bounded(arguments)))
            except ValueError:  # not JSON, nested too deep, a number too long to read: read as text
                texts.append(arguments)
        elif arguments is not None:
            texts.extend(_strings(arguments))
    return texts


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
