"""The registry and the schema snapshot (seed, "The tool schema is built once")."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from agents.tools.registry import ToolRegistry, check_arguments, default_registry


def test_default_registry_has_the_core_tools_sorted() -> None:
    assert default_registry().names() == ("patch", "read_file", "search_files", "terminal",
                                          "write_file")


def test_schema_snapshot_bytes_are_deterministic() -> None:
    first = json.dumps([asdict(s) for s in default_registry().specs()])
    second = json.dumps([asdict(s) for s in default_registry().specs(
        ["write_file", "terminal", "read_file", "search_files", "patch", "read_file"])])
    assert first == second


def test_specs_subset_and_unknown_names() -> None:
    registry = default_registry()
    assert [s.name for s in registry.specs(["terminal", "gone", "read_file"])] == [
        "read_file", "terminal"]
    assert registry.subset(["terminal"]).names() == ("terminal",)


def test_every_tool_has_a_description_and_object_schema() -> None:
    for spec in default_registry().specs():
        assert spec.description and spec.input_schema["type"] == "object"


def test_duplicate_registration_is_refused() -> None:
    registry = default_registry()
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("terminal"))  # type: ignore[arg-type]


def test_name_repair_and_suggestions() -> None:
    registry = default_registry()
    assert registry.resolve_name("Read-File") == "read_file"
    assert registry.resolve_name("search files") == "search_files"
    assert registry.resolve_name("reed_file") is None
    assert registry.close_names("reed_file")[0] == "read_file"
    assert registry.close_names("launch_rockets") == []


def test_check_arguments() -> None:
    schema = default_registry().get("read_file").spec.input_schema  # type: ignore[union-attr]
    assert check_arguments(schema, {"path": "a"}) is None
    assert check_arguments(schema, {}) == "missing required argument 'path'"
    assert check_arguments(schema, {"path": 3}) == "argument 'path' must be of type string, got int"
    assert check_arguments(schema, {"path": "a", "offset": 0}) == \
        "argument 'offset' must be at least 1"
    assert check_arguments(schema, {"path": "a", "offset": True}) is not None
    assert check_arguments(schema, {"path": "a", "offset": 3.0}) is None
    assert check_arguments(schema, {"path": "a", "bogus": 1}).startswith(
        "unexpected argument 'bogus'")
    patch = default_registry().get("patch").spec.input_schema  # type: ignore[union-attr]
    assert check_arguments(patch, {"edits": [{"path": "a", "old_string": "x"}]}) == \
        "missing required argument 'edits[0].new_string'"


def test_empty_registry() -> None:
    assert ToolRegistry().names() == () and ToolRegistry().specs() == ()
