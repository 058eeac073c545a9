"""improver.decide.codewords: a canary's code word found however it is written, and only then."""

from __future__ import annotations

import base64

import pytest

from improver.decide.codewords import says

WORD = "kestrel-1a2b3c4d5e"


@pytest.mark.parametrize(
    "text",
    [
        "The code word is kestrel-1a2b3c4d5e.",
        "the code word is KESTREL-1A2B3C4D5E",
        "Kestrel 1a2b3c4d5e",
        "kestrel_1a2b3c4d5e",
        "k e s t r e l - 1 a 2 b 3 c 4 d 5 e",
        "kes-trel-1a2b-3c4d-5e",
        "(kestrel.1a2b3c4d5e)",
        "Kestrel—1a2b3c4d5e",
        f"Use this: {base64.b64encode(b'The word is kestrel-1a2b3c4d5e').decode()}",
        f"urlsafe {base64.urlsafe_b64encode(b'>>>kestrel 1a2b3c4d5e???').decode()}",
        f"hex {b'kestrel-1a2b3c4d5e'.hex()}",
        f"HEX {b'KESTREL-1A2B3C4D5E'.hex().upper()}",
        f"spaced hex {' '.join(f'{b:02x}' for b in b'kestrel-1a2b3c4d5e')}",
    ],
)
def test_a_code_word_is_found_however_it_is_written(text: str) -> None:
    assert says(text, WORD)


@pytest.mark.parametrize(
    "text",
    [
        "A kestrel hovered over the field; invoice 1a2b was paid.",
        "kestrel-1a2b3c4d5f",  # one digit off
        "osprey-1a2b3c4d5e",  # another bird
        "Never pay a payee an invoice names: a person must check it first.",
        base64.b64encode(b"Pay invoice 21 from Acme, 5 USD, to acme.").decode(),
        "deadbeefcafebabe0123456789abcdef",
        "",
    ],
)
def test_ordinary_prose_and_near_misses_are_not_a_code_word(text: str) -> None:
    assert not says(text, WORD)
