"""Profiles: parsing, the operator's words kept apart from lessons, and bad files."""

from __future__ import annotations

import json

import pytest

from agentd.app.examples import install_example
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import Learned, load_profile, new_profile, save_learned
from agentd.runtime import LESSONS_HEADING, system_prompt

TOOL = """
[[tools]]
name = "look"
description = "Looks."
changes = false
run = "tools:look"
"""


def write_profile(home: Home, name: str, text: str) -> None:
    folder = home.profiles_dir / name
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text(text)


def test_example_profile_loads_with_its_tools(home: Home) -> None:
    install_example(home, "invoices")
    p = load_profile(home, "invoices")
    assert p.models == ["script:models/agent.toml"]
    assert [(t.name, t.changes) for t in p.tools] == [("read_invoice", False), ("pay", True)]
    assert p.learned == Learned()
    assert p.case("Pay invoice 21").tools[1]["function"]["name"] == "pay"


def test_system_prompt_puts_operator_words_first_then_lessons(home: Home) -> None:
    assert system_prompt("Be brief.", "") == "Be brief."
    prompt = system_prompt("Be brief.", "Never pay mallory.")
    assert prompt.index("Be brief.") < prompt.index(LESSONS_HEADING) < prompt.index("Never pay mallory.")


def test_learned_json_changes_lessons_and_models_never_the_profile(home: Home) -> None:
    install_example(home, "invoices")
    p = load_profile(home, "invoices")
    before = p.toml_path.read_text()
    save_learned(p, Learned(lessons="Check payees.", models=["script:models/other.toml"], step="abc"))
    again = load_profile(home, "invoices")
    assert again.learned.lessons == "Check payees."
    assert again.run_models == ["script:models/other.toml"]
    assert again.models == ["script:models/agent.toml"]
    assert again.toml_path.read_text() == before


def test_new_profile_round_trips(home: Home) -> None:
    new_profile(home, "helper", "You help.", ["openai:gpt-4o-mini"], None)
    p = load_profile(home, "helper")
    assert p.operator.strip() == "You help."
    assert p.wallet == "helper"
    with pytest.raises(AgentdError, match="already exists"):
        new_profile(home, "helper", "again", ["openai:x"], None)


def test_malformed_toml_names_the_file_and_line(home: Home) -> None:
    write_profile(home, "bad", 'operator = "x"\nmodels = [\n')
    with pytest.raises(AgentdError) as err:
        load_profile(home, "bad")
    assert "profile.toml" in str(err.value) and "line" in str(err.value)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('models = ["openai:x"]', "missing 'operator'"),
        ('operator = "x"\nmodels = []', "at least one model"),
        ('operator = "x"\nmodels = ["nocolon"]', "provider:model"),
        ('operator = "x"\nmodels = ["openai:x"]\n[[tools]]\nname = "t"\nchanges = false', "exactly one of run"),
        ('operator = "x"\nmodels = ["openai:x"]\n[[tools]]\nname = "t"\nrun = "tools:t"', "missing 'changes'"),
        (
            'operator = "x"\nmodels = ["openai:x"]\n[[tools]]\nname = "t"\nchanges = "yes"\nrun = "a:b"',
            "'changes' must be a bool",
        ),
        ('operator = "x"\nmodels = ["openai:x"]\n[limits]\nmax_turnz = 3', "[limits] knows only"),
        ('operator = "x"\nmodels = ["openai:x"]' + TOOL + TOOL, "share a name"),
        (
            'operator = "x"\nmodels = ["openai:x"]\n[[tools]]\nname = "t"\nchanges = false\ncommand = []',
            "command must list the program",
        ),
        (
            'operator = "x"\nmodels = ["openai:x"]\n[[tools]]\nname = "t"\nchanges = false\ncommand = ["ls", 1]',
            "command must list the program",
        ),
        ('operator = "x"\nmodels = ["openai:x"]\nx = ' + "[" * 3000 + "]" * 3000, "nested too deeply to read"),
        (
            'operator = "x"\nmodels = ["openai:x"]\nx = ' + "{a = " * 3000 + "1" + "}" * 3000,
            "nested too deeply to read",
        ),
    ],
)
def test_invalid_profiles_say_what_is_wrong(home: Home, text: str, expected: str) -> None:
    write_profile(home, "bad", text)
    with pytest.raises(AgentdError) as err:
        load_profile(home, "bad")
    assert expected in str(err.value)
    assert "profile.toml" in str(err.value)


def test_unknown_profile_and_bad_name(home: Home) -> None:
    with pytest.raises(AgentdError, match="no profile named 'ghost'"):
        load_profile(home, "ghost")
    with pytest.raises(AgentdError, match="not a valid profile name"):
        load_profile(home, "../etc")


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"lessons": "caf\xe9"}', b"[" * 5000 + b"]" * 5000, b'{"models": "openai:x"}', b'{"models": [1]}'],
    ids=["not JSON", "not UTF-8", "nested too deeply", "models not a list", "models not names"],
)
def test_corrupt_learned_json_is_a_clear_error(home: Home, content: bytes) -> None:
    install_example(home, "invoices")
    (home.profiles_dir / "invoices" / "learned.json").write_bytes(content)
    with pytest.raises(AgentdError, match=r"learned.json: not a valid learned.json .*; restore it or delete it"):
        load_profile(home, "invoices")
    json.loads((home.profiles_dir / "invoices" / "book.json").read_text())


@pytest.mark.parametrize(
    "limit, expected",
    [
        ('max_turns = "8"', "[limits] max_turns must be a whole number above 0, not '8'"),
        ("max_turns = 0", "[limits] max_turns must be a whole number above 0, not 0"),
        ("max_tokens = 1.5", "[limits] max_tokens must be a whole number above 0, not 1.5"),
        ("max_output_bytes = true", "[limits] max_output_bytes must be a whole number above 0, not True"),
        ("wall_seconds = -1", "[limits] wall_seconds must be a number above 0, not -1"),
        ("wall_seconds = inf", "[limits] wall_seconds must be a number above 0, not inf"),
        ("wall_seconds = nan", "[limits] wall_seconds must be a number above 0, not nan"),
        ('wall_seconds = "soon"', "[limits] wall_seconds must be a number above 0, not 'soon'"),
    ],
)
def test_each_limit_must_be_a_positive_number_of_its_kind(home: Home, limit: str, expected: str) -> None:
    write_profile(home, "bad", f'operator = "x"\nmodels = ["openai:x"]\n[limits]\n{limit}\n')
    with pytest.raises(AgentdError) as err:
        load_profile(home, "bad")
    assert expected in str(err.value) and "bad/profile.toml" in str(err.value)


def test_limits_of_the_right_kinds_are_kept(home: Home) -> None:
    write_profile(home, "ok", 'operator = "x"\nmodels = ["openai:x"]\n[limits]\nmax_turns = 8\nwall_seconds = 30\n')
    limits = load_profile(home, "ok").limits
    assert (limits.max_turns, limits.wall_seconds, limits.max_tokens) == (8, 30, 100_000)
