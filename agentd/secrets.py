"""The secrets this machine keeps, and keeping them out of transcripts.

A session that held one is flagged (export passes over it) and the value is replaced
in what is stored, so a key never reaches a transcript or the ledger.
"""

from __future__ import annotations

import os
from typing import Any

from agentd.home import Home

SECRET_VARIABLES = ("AGENTD_WALLET_PASSPHRASE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
SECRET_SETTINGS = (("openai", "api_key"), ("anthropic", "api_key"))
# Shorter values would match ordinary words and flag sessions for nothing.
MIN_SECRET_LENGTH = 6


def machine_secrets(home: Home) -> dict[str, str]:
    """Name -> value of every secret this machine keeps."""
    found: dict[str, str] = {}
    for var in SECRET_VARIABLES:
        if os.environ.get(var):
            found[var] = os.environ[var]
    for section, key in SECRET_SETTINGS:
        value = home.setting(section, key)
        if value:
            found[f"[{section}] {key}"] = str(value)
    return {k: v for k, v in found.items() if len(v) >= MIN_SECRET_LENGTH}


def redact(data: Any, secrets: dict[str, str]) -> tuple[Any, list[str]]:
    """Returns `data` with every secret value replaced, and the names of those found."""
    hits: set[str] = set()

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            for name, secret in secrets.items():
                if secret in value:
                    hits.add(name)
                    value = value.replace(secret, f"[redacted: {name}]")
            return value
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk(data), sorted(hits)
