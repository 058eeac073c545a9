"""The secrets this machine keeps, and keeping them out of transcripts.

A session that held one is flagged (export passes over it) and the value is replaced
in what is stored, so a key never reaches a transcript or the ledger. A value is found
however it was written: in any case, spaced out, URL-encoded (in part or whole), as hex,
or in base64 (standard or URL-safe, at any offset inside a longer encoded text).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit

from agentd.home import Home

# Every secret agentd is given: the wallets', the log key's and a witness's passphrases,
# the providers' keys, the token that lets sessions in over HTTP.
SECRET_VARIABLES = (
    "AGENTD_WALLET_PASSPHRASE",
    "AGENTD_LOG_PASSPHRASE",
    "AGENTD_WITNESS_PASSPHRASE",
    "AGENTD_INTAKE_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
)
SECRET_SETTINGS = (("openai", "api_key"), ("anthropic", "api_key"), ("serve", "intake_token"))
# Settings that are URLs, whose password (postgresql://user:PASSWORD@host/db) is a secret.
URL_SETTINGS = (
    ("ledger", "url", "AGENTD_LEDGER_URL"),
    ("openai", "base_url", "OPENAI_BASE_URL"),
    ("anthropic", "base_url", "ANTHROPIC_BASE_URL"),
    ("local", "base_url", "AGENTD_LOCAL_BASE_URL"),
)
# The daemon's passphrases (the systemd unit's EnvironmentFile, beside the home's other
# secrets): a command run without them in its environment must still keep them out of
# what it records.
DAEMON_SECRETS = "serve.env"
# Shorter values would match ordinary words and flag sessions for nothing.
MIN_SECRET_LENGTH = 6
GAP = r"\s*"  # what may stand between the characters of a value someone spaced out


def machine_secrets(home: Home) -> dict[str, str]:
    """Name -> value of every secret this machine keeps, each value under the first name
    it was found by."""
    found = [(var, os.environ.get(var, "")) for var in SECRET_VARIABLES]
    found += [(f"{var} in {DAEMON_SECRETS}", value) for var, value in _daemon_secrets(home)]
    found += [(f"[{section}] {key}", str(home.setting(section, key) or "")) for section, key in SECRET_SETTINGS]
    found += list(_url_passwords(home))
    kept: dict[str, str] = {}
    for name, value in found:
        if len(value.strip()) >= MIN_SECRET_LENGTH and value not in kept.values():
            kept[name] = value
    return kept


def _daemon_secrets(home: Home) -> list[tuple[str, str]]:
    """The secret variables set in the home's serve.env (systemd's KEY=VALUE lines, a
    value perhaps quoted)."""
    try:
        text = (home.root / DAEMON_SECRETS).read_text(errors="replace")
    except FileNotFoundError:
        return []
    pairs = (line.strip().partition("=") for line in text.splitlines())
    return [(var.strip(), _unquoted(value.strip())) for var, _, value in pairs if var.strip() in SECRET_VARIABLES]


def _unquoted(value: str) -> str:
    quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'"
    return value[1:-1] if quoted else value


def _url_passwords(home: Home) -> Iterator[tuple[str, str]]:
    for section, key, var in URL_SETTINGS:
        for name, url in ((var, os.environ.get(var)), (f"[{section}] {key}", home.setting(section, key))):
            try:
                password = urlsplit(str(url)).password if url else None
            except ValueError:  # not a URL at all: the command that uses it says so
                password = None
            if password:
                yield f"the password in {name}", unquote(password)


def redact(data: Any, secrets: dict[str, str]) -> tuple[Any, list[str]]:
    """Returns `data` with every secret value replaced, and the names of those found."""
    hits: set[str] = set()
    patterns = [(name, pattern(value)) for name, value in secrets.items()]

    def clean(text: str) -> str:
        for name, found in patterns:
            text, count = found.subn(f"[redacted: {name}]", text)
            if count:
                hits.add(name)
        return text

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return clean(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {clean(k) if isinstance(k, str) else k: walk(v) for k, v in value.items()}
        return value

    return walk(data), sorted(hits)


@lru_cache(maxsize=64)
def pattern(secret: str) -> re.Pattern[str]:
    """One expression for every way of writing `secret` this module knows."""
    value = secret.strip()
    raw = value.encode()
    ways = [_plain(value), "(?i:" + GAP.join(f"{b:02x}" for b in raw) + ")"]
    ways += [GAP.join(map(re.escape, core)) for core in _base64_cores(raw)]
    return re.compile("|".join(f"(?:{w})" for w in ways))


def _plain(value: str) -> str:
    """The value in any case, spaced out, each character as itself or URL-encoded."""
    return "(?i:" + GAP.join(_character(c) for c in value) + ")"


def _character(c: str) -> str:
    forms = {re.escape(c)} | {"".join(f"%{b:02x}" for b in v.encode()) for v in {c.lower(), c.upper()}}
    if c == " ":
        forms |= {r"\+", r"\s"}
    return "(?:" + "|".join(sorted(forms)) + ")"


def _base64_cores(raw: bytes) -> set[str]:
    """The part of the value's base64 that is the same wherever it starts in a longer
    text: for each of the three offsets, the characters made only of its own bits."""
    cores = set()
    for offset in range(3):
        first = -(-8 * offset // 6)  # the first character after the offset's bits
        last = 8 * (offset + len(raw)) // 6  # the characters made wholly of the value's bits
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(bytes(offset) + raw).decode()[first:last]
            if core:
                cores.add(core)
    return cores
