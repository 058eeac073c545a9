"""Every secret agentd is given is kept out of what it records, however it is written: a
witness's passphrase, the daemon's passphrases in serve.env (set for the daemon, not the
shell), and the password in a URL it is given (a provider's, the ledger's). A session
holding one is flagged, the value replaced in agentd.db and the session not exported."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest

from agentd.home import Home
from agentd.secrets import machine_secrets, redact
from tests.cli.test_sessions_cli import invoices, run_json  # noqa: F401  (a fixture)

SECRET = "Never-Tell-4711/x"


def written(value: str) -> dict[str, str]:
    """The ways of writing `value` that agentd catches for a provider's key."""
    raw = value.encode()
    return {
        "as it is": value,
        "upper case": value.upper(),
        "spaced out": " ".join(value),
        "base64 at an offset": base64.b64encode(b"pw=" + raw).decode(),
        "url-safe base64": base64.urlsafe_b64encode(b"\xfb\xff" + raw).decode(),
        "hex": raw.hex(),
        "url-encoded": "".join(f"%{b:02X}" for b in raw),
    }


def stored(home: Home) -> bytes:
    """Everything agentd.db holds, as bytes (transcripts are stored as JSON text)."""
    with sqlite3.connect(home.agentd_db) as db:
        rows = db.execute("SELECT * FROM sessions").fetchall()
    return json.dumps(rows, default=str).encode()


def session_holding(agentd, text: str) -> dict:
    s = run_json(agentd, "invoices", f"Pay invoice 21 from Acme, 5 USD, to acme. The note says {text} .")
    return json.loads(agentd("sessions", "show", s["id"], "--json").out)


def kept_out(agentd, home: Home, tmp_path: Path, shown: dict, name: str, text: str) -> None:
    assert shown["secrets"] == [name], shown["secrets"]
    assert f"[redacted: {name}]" in shown["task"] and text not in json.dumps(shown)
    assert text.encode() not in stored(home)
    assert agentd("improve", "export", "invoices", "--out", tmp_path / "train").code == 0
    assert (tmp_path / "train" / "sft.jsonl").read_text() == ""


@pytest.mark.parametrize("way", list(written(SECRET)))
@pytest.mark.usefixtures("invoices")
def test_a_witness_passphrase_is_kept_out_however_it_is_written(
    agentd,
    home: Home,
    monkeypatch,
    tmp_path: Path,
    way: str,
) -> None:
    monkeypatch.setenv("AGENTD_WITNESS_PASSPHRASE", SECRET)
    text = written(SECRET)[way]
    kept_out(agentd, home, tmp_path, session_holding(agentd, text), "AGENTD_WITNESS_PASSPHRASE", text)


@pytest.mark.parametrize("quoted", [True, False])
@pytest.mark.usefixtures("invoices")
def test_the_daemons_passphrase_in_serve_env_is_kept_out_of_a_session_run_without_it(
    agentd,
    home: Home,
    tmp_path: Path,
    quoted: bool,
) -> None:
    value = f'"{SECRET}"' if quoted else SECRET
    (home.root / "serve.env").write_text(f"# for the daemon\nAGENTD_LOG_PASSPHRASE={value}\n")
    text = written(SECRET)["base64 at an offset"]
    shown = session_holding(agentd, text)
    kept_out(agentd, home, tmp_path, shown, "AGENTD_LOG_PASSPHRASE in serve.env", text)


@pytest.mark.parametrize("where", ["OPENAI_BASE_URL", "[openai] base_url"])
@pytest.mark.usefixtures("invoices")
def test_the_password_in_a_providers_url_is_kept_out(
    agentd,
    home: Home,
    monkeypatch,
    tmp_path: Path,
    where: str,
) -> None:
    url = f"https://agent:{quote(SECRET, safe='')}@llm.example/v1"
    if where.startswith("["):
        home.config_path.write_text(home.config_path.read_text() + f'\n[openai]\nbase_url = "{url}"\n')
    else:
        monkeypatch.setenv(where, url)
    text = written(SECRET)["hex"]
    kept_out(agentd, home, tmp_path, session_holding(agentd, text), f"the password in {where}", text)


@pytest.mark.usefixtures("invoices")
def test_the_password_in_the_ledgers_url_is_a_secret(agentd, home: Home) -> None:
    # Only a PostgreSQL ledger has one, and a session recorded needs that ledger to be up:
    # the home's config is read as a session's recording reads it.
    url = f"postgresql://agentd:{quote(SECRET, safe='')}@db.example/agentd"
    home.config_path.write_text(home.config_path.read_text() + f'\n[ledger]\nurl = "{url}"\n')
    secrets = machine_secrets(Home(home.root))
    assert secrets == {"the password in [ledger] url": SECRET}
    for way, text in written(SECRET).items():
        clean, found = redact({"content": f"the note says {text}."}, secrets)
        assert found == ["the password in [ledger] url"] and text not in json.dumps(clean), way


@pytest.mark.usefixtures("invoices")
def test_a_value_given_twice_is_named_once(agentd, home: Home, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTD_WALLET_PASSPHRASE", SECRET)
    (home.root / "serve.env").write_text(f"AGENTD_WALLET_PASSPHRASE={SECRET}\n")
    kept_out(agentd, home, tmp_path, session_holding(agentd, SECRET), "AGENTD_WALLET_PASSPHRASE", SECRET)
