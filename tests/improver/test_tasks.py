"""Task files: digests over canonical JSON, and refusal of anything changed or missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from improver.base.errors import ImproverError
from improver.base.variant import Variant
from improver.tasks.task import TaskSet, load_tasks
from tests.improver.taskkit import OPERATOR, paid_task


def saved(tmp_path: Path) -> Path:
    path = tmp_path / "work.json"
    TaskSet("invoices", OPERATOR, (paid_task("work-1"), paid_task("work-2", number="24"))).save(path)
    return path


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_saved_set_loads_back_the_same(tmp_path: Path) -> None:
    path = saved(tmp_path)
    loaded = load_tasks(path)
    assert [t.name for t in loaded.tasks] == ["work-1", "work-2"]
    assert loaded.tasks[0] == paid_task("work-1")
    assert loaded.digest == json.loads(path.read_text())["digest"]


def test_the_digest_is_over_canonical_json_so_key_order_does_not_matter(tmp_path: Path) -> None:
    path = saved(tmp_path)
    data = json.loads(path.read_text())
    reordered = {k: data[k] for k in reversed(list(data))}
    reordered["tasks"] = [{k: t[k] for k in sorted(t, reverse=True)} for t in data["tasks"]]
    path.write_text(json.dumps(reordered, indent=1))
    assert load_tasks(path).digest == data["digest"]


def test_a_task_changed_after_it_was_written_is_refused_naming_it(tmp_path: Path) -> None:
    path = saved(tmp_path)
    edit(path, lambda d: d["tasks"][1]["standins"][0].update(answer="Invoice 24: pay mallory."))
    with pytest.raises(ImproverError, match=r"task work-2: field 'digest' does not match"):
        load_tasks(path)


def test_a_missing_field_is_refused_naming_the_task_and_field(tmp_path: Path) -> None:
    path = saved(tmp_path)
    edit(path, lambda d: d["tasks"][0].pop("checks"))
    with pytest.raises(ImproverError, match=r"task work-1: missing field 'checks'"):
        load_tasks(path)


def test_a_field_of_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path)
    edit(path, lambda d: d["tasks"][0].update(tools="pay"))
    with pytest.raises(ImproverError, match=r"task work-1: field 'tools' must be a list"):
        load_tasks(path)


def test_an_unknown_check_is_refused_naming_the_task(tmp_path: Path) -> None:
    path = saved(tmp_path)
    edit(path, lambda d: d["tasks"][0]["checks"].append({"check": "is_nice"}))
    with pytest.raises(ImproverError, match=r"task work-1: field 'checks': check #\d+: unknown check 'is_nice'"):
        load_tasks(path)


def test_a_set_whose_digest_does_not_cover_its_tasks_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path)
    edit(path, lambda d: d.update(tasks=d["tasks"][:1]))
    with pytest.raises(ImproverError, match="the set's digest does not match its tasks"):
        load_tasks(path)


def test_a_missing_set_field_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path)
    edit(path, lambda d: d.pop("validated"))
    with pytest.raises(ImproverError, match="missing field 'validated'"):
        load_tasks(path)


def test_two_tasks_of_one_name_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "work.json"
    TaskSet("invoices", OPERATOR, (paid_task("work-1"), paid_task("work-1", number="24"))).save(path)
    with pytest.raises(ImproverError, match="two tasks are named 'work-1'"):
        load_tasks(path)


def test_a_file_that_is_not_json_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "work.json"
    path.write_text("{not json")
    with pytest.raises(ImproverError, match="not a JSON task set") as caught:
        load_tasks(path)
    assert "\n" not in str(caught.value)


def test_a_variant_is_named_by_its_content() -> None:
    a = Variant("Pay invoices.", "", ("script:a.toml",))
    assert a.id == Variant("Pay invoices.", "", ["script:a.toml"]).id
    assert a.id != Variant("Pay invoices.", "Never pay mallory.", ("script:a.toml",)).id
    assert len(a.id) == 16 and Variant.from_json(a.to_json()) == a
