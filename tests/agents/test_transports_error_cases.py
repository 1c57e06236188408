"""Every row of agents/transports/error_cases.json through the one classifier (issue 10
defects 4 and 5; cases B01, B07, B17, B20, B22, B23, B25, B27)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.transports.errors import classify_response

TABLE = json.loads((Path(__file__).resolve().parents[2] / "agents" / "transports"
                    / "error_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", TABLE, ids=[c["id"] for c in TABLE])
def test_error_case_classifies_as_the_table_says(case):
    classified = classify_response(case["status"], case["body"], headers=case.get("headers"))
    for field, expected in case["expect"].items():
        actual = getattr(classified, field)
        actual = actual.value if field == "reason" else actual
        assert actual == expected, f"{case['id']}: {field} = {actual!r}, expected {expected!r}"


@pytest.mark.parametrize("case", [c for c in TABLE if c["status"] == 429],
                         ids=[c["id"] for c in TABLE if c["status"] == 429])
def test_a_429_is_never_an_overflow(case):
    classified = classify_response(429, case["body"], headers=case.get("headers"))
    assert classified.reason.value != "context_overflow" and not classified.compress


def test_overflow_bodies_still_classify_when_a_router_strips_the_status():
    for case in TABLE:
        if case["expect"].get("reason") == "context_overflow":
            assert classify_response(None, case["body"]).compress, case["id"]


def test_the_table_covers_every_provider_the_issue_names():
    providers = {c["provider"] for c in TABLE}
    assert {"anthropic", "openai", "openrouter", "vllm", "ollama", "llamacpp"} <= providers
