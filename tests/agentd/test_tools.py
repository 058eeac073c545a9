"""Real tools: Python callables and commands; a failing tool answers with its error."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from agentd.app.examples import install_example
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.tools import ALLOWED_ENV, Toolbox


def profile_with(home: Home, tools_toml: str, module: str = "") -> None:
    folder = home.profiles_dir / "p"
    folder.mkdir(parents=True)
    (folder / "profile.toml").write_text('operator = "x"\nmodels = ["openai:x"]\n' + tools_toml)
    if module:
        (folder / "mytools.py").write_text(module)


def call(box: Toolbox, name: str, arguments: object) -> str:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return asyncio.run(box.call(name, text))


def test_example_tools_read_and_pay_the_book(home: Home) -> None:
    install_example(home, "invoices")
    box = Toolbox(load_profile(home, "invoices"))
    assert "5 USD" in call(box, "read_invoice", {"number": "21"})
    assert call(box, "pay", {"to": "acme", "amount": "5", "invoice": "21"}) == "paid 5 USD to acme"
    book = json.loads((home.profiles_dir / "invoices" / "book.json").read_text())
    assert book["payments"] == [{"to": "acme", "amount": "5", "invoice": "21"}]


def test_a_tool_that_raises_answers_with_its_error(home: Home) -> None:
    install_example(home, "invoices")
    box = Toolbox(load_profile(home, "invoices"))
    assert call(box, "read_invoice", {"number": "99"}) == "error: LookupError: there is no invoice '99'"
    assert call(box, "read_invoice", "{oops").startswith("error: the arguments are not valid JSON")
    assert call(box, "nope", {}) == "error: there is no tool named 'nope'"


def test_arguments_nested_too_deep_or_with_a_number_too_long_are_an_error_answer(home: Home) -> None:
    install_example(home, "invoices")
    box = Toolbox(load_profile(home, "invoices"))
    deep = call(box, "read_invoice", "[" * 200_000)
    assert deep == "error: the arguments are not valid JSON (nested deeper than 100 levels)"
    long = call(box, "read_invoice", '{"number": ' + "9" * 5000 + "}")
    assert long == "error: the arguments are not valid JSON (a number of more than 4300 digits)"


def test_command_tool_reads_json_on_stdin(home: Home) -> None:
    script = "import json,sys; d=json.load(sys.stdin); print('hello ' + d['who'])"
    profile_with(
        home,
        f'[[tools]]\nname = "greet"\nchanges = false\ncommand = [{json.dumps(sys.executable)}, "-c", {json.dumps(script)}]\n',
    )
    box = Toolbox(load_profile(home, "p"))
    assert call(box, "greet", {"who": "ann"}) == "hello ann"


def test_command_tool_failure_is_its_answer(home: Home) -> None:
    script = "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"
    profile_with(
        home,
        f'[[tools]]\nname = "bad"\nchanges = true\ncommand = [{json.dumps(sys.executable)}, "-c", {json.dumps(script)}]\n',
    )
    box = Toolbox(load_profile(home, "p"))
    assert call(box, "bad", {}) == "error: the tool exited with status 3: boom"


def test_python_tool_time_out(home: Home) -> None:
    profile_with(
        home,
        '[[tools]]\nname = "slow"\nchanges = false\nrun = "mytools:slow"\ntimeout = 0.2\n',
        "import time\ndef slow(args, folder):\n    time.sleep(2)\n",
    )
    assert call(Toolbox(load_profile(home, "p")), "slow", {}) == "error: the tool took longer than 0.2s"


@pytest.mark.parametrize(
    "tools_toml, expected",
    [
        ('[[tools]]\nname = "t"\nchanges = false\nrun = "no_such_module_x:f"\n', "cannot import 'no_such_module_x'"),
        ('[[tools]]\nname = "t"\nchanges = false\nrun = "mytools:missing"\n', "is not a callable"),
        (
            '[[tools]]\nname = "t"\nchanges = false\ncommand = ["no-such-program-x"]\n',
            "command 'no-such-program-x' not found",
        ),
    ],
)
def test_unknown_tool_implementation_is_refused_before_the_session(home: Home, tools_toml: str, expected: str) -> None:
    profile_with(home, tools_toml, "def other(args, folder):\n    return 1\n")
    with pytest.raises(AgentdError, match=expected):
        Toolbox(load_profile(home, "p"))


def test_a_command_tool_gets_only_the_allowed_environment(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTD_WALLET_PASSPHRASE"):
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("LANG", "C.UTF-8")
    script = "import json, os; print(json.dumps(dict(os.environ)))"
    profile_with(
        home,
        f'[[tools]]\nname = "env"\nchanges = false\ncommand = [{json.dumps(sys.executable)}, "-c", {json.dumps(script)}]\n',
    )
    seen = json.loads(call(Toolbox(load_profile(home, "p")), "env", {}))
    assert set(seen) - {"LC_CTYPE"} <= set(ALLOWED_ENV)  # the interpreter may set LC_CTYPE itself
    assert seen["LANG"] == "C.UTF-8" and seen["PATH"] == os.environ["PATH"]
