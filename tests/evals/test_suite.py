"""The task suite (issue 17) in embedded mode: the reference lane passes a handful of tasks
through the real product path, and deliberate harness breaks make tasks fail.

Each test runs tasks with evals.harness.run_task: session_create, turn_start, the Celery
task run in-process, the real runner, policy, workspace and tools, and the provider
simulator over HTTP with the reference agent (evals/reference_agent.py) as its script.
The breaks (evals/breaks.py) patch the request pipeline (agents/request.py
RequestPipeline.prepare), the one place every request is built, so they stand for a refactor
that keeps unit tests green and changes what the model sees.
"""

from __future__ import annotations

import pytest

from agents.request import RequestPipeline
from evals.breaks import (broken_prepare, drop_oldest_tool_result, reverse_parallel_results,
                          truncate_tool_results)
from evals.harness import run_task
from evals.reference_agent import decide, parse_plan
from evals.spec import grade, grade_structure, load_tasks
from sessions.models import Message

pytestmark = pytest.mark.django_db(transaction=True)

HANDFUL = ["t01_find_patch_verify", "t08_parallel_reads_dependent_patch",
           "t12_approval_denied_reason", "t15_steer_mid_turn", "t16_delegate_three_subtasks",
           "t17_fault_rate_limit_429", "t21_budget_reached_and_resumed",
           "t31_openai_wire_parallel", "t32_clarify_answered", "t33_memory_across_sessions",
           "t36_scheduled_run_appends"]


@pytest.fixture
def lane(hermes_settings, simulator):
    """The reference lane on the session's simulator (its script is set per task)."""
    hermes_settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    yield simulator
    simulator.state.reset()


def run(names, simulator):
    return {task.id: run_task(task, simulator=simulator) for task in load_tasks(names)}


def test_every_task_file_loads_and_the_suite_has_at_least_thirty_graded_tasks():
    tasks = load_tasks()
    graded = [t for t in tasks if t.id.startswith("t")]
    assert len(graded) >= 30
    for task in tasks:
        assert task.messages() and task.grade, task.id


def test_the_reference_lane_passes_a_handful_of_tasks(lane):
    outcomes = run(HANDFUL, lane)
    assert set(outcomes) == set(HANDFUL)
    for name, outcome in outcomes.items():
        assert outcome.status == "pass", (name, outcome.failures)
        assert outcome.iterations > 0 and outcome.cost_usd and outcome.cost_usd > 0


def _task_dir(base, name, toml):
    root = base / name
    root.mkdir()
    (root / "task.toml").write_text(toml)
    return root


def test_a_task_whose_tool_is_absent_is_skipped_never_passed(lane, tmp_path):
    _task_dir(tmp_path, "x01_absent_tool", 'requires_tools = ["read_file", "no_such_tool"]\n'
              '[[messages]]\ntext = "hi"\n[grade]\nmax_iterations = 1\n')
    (task,) = load_tasks(base=tmp_path)
    outcome = run_task(task, simulator=lane)
    assert outcome.status == "skipped: tool no_such_tool not present"


def test_an_mcp_server_the_admin_form_refuses_fails_the_task_with_the_forms_words(
        lane, tmp_path):
    _task_dir(tmp_path, "x02_bad_server", '[[mcp_servers]]\nname = "ledger"\n'
              'transport = "stdio"\ncommand = "{root}/no/such/program"\n'
              '[[messages]]\ntext = "hi"\n[grade]\nmax_iterations = 1\n')
    (task,) = load_tasks(base=tmp_path)
    outcome = run_task(task, simulator=lane)
    assert outcome.status == "fail"
    (failure,) = outcome.failures
    assert failure.startswith("setup: MCP server 'ledger' refused by the admin form")
    assert "refused by the admin form" in failure and "is not an executable" in failure


def test_the_mcp_task_uses_what_the_server_returned(lane):
    """t37's ground truth exists only in the stdio server's results (tests/mcp_servers).
    Its run is also clean on structure: the MCP tools count as offered (they arrive with
    the first turn's tool rebuild, after the session object was made)."""
    (task,) = load_tasks(["t37_mcp_tool_result_used"])
    outcome = run_task(task, simulator=lane, grade_fn=lambda t, obs: [
        *grade(t, obs), *grade_structure(obs, budget=6, statuses=[])])
    assert outcome.status == "pass", outcome.failures
    results = list(Message.objects.filter(role="tool", tool_name__startswith="mcp__ledger__")
                   .order_by("id").values_list("tool_name", "content"))
    assert results == [("mcp__ledger__add", "5016"),
                       ("mcp__ledger__echo", "echo: invoice total 5016")]


def _break(monkeypatch, edit):
    monkeypatch.setattr(RequestPipeline, "prepare", broken_prepare(edit))


def test_reversing_parallel_results_fails_the_parallel_tasks_only(lane, monkeypatch):
    _break(monkeypatch, reverse_parallel_results)
    outcomes = run(["t01_find_patch_verify", "t08_parallel_reads_dependent_patch",
                    "t10_parallel_five_reads"], lane)
    assert outcomes["t01_find_patch_verify"].status == "pass"  # one call per step: unaffected
    for name in ("t08_parallel_reads_dependent_patch", "t10_parallel_five_reads"):
        outcome = outcomes[name]
        assert outcome.status == "fail", name
        assert any("out of order" in f for f in outcome.failures), outcome.failures


def test_dropping_the_oldest_tool_result_fails_multi_step_tasks(lane, monkeypatch):
    _break(monkeypatch, drop_oldest_tool_result)
    outcomes = run(["t01_find_patch_verify", "t25_chain_of_ten_files",
                    "t22_resume_after_idle_gap"], lane)
    failed = [name for name, o in outcomes.items() if o.status == "fail"]
    assert failed == list(outcomes), {n: o.failures for n, o in outcomes.items()}
    for outcome in outcomes.values():  # graded failures, not a crashed runner
        assert not any(f.startswith("crashed") for f in outcome.failures), outcome.failures
        print(outcome.task, outcome.failures)


def test_truncating_tool_results_fails_the_tasks_that_need_their_tails(lane, monkeypatch):
    _break(monkeypatch, truncate_tool_results)
    outcomes = run(["t03_write_and_run_script", "t07_page_large_file"], lane)
    assert outcomes["t03_write_and_run_script"].status == "pass"  # short results: unaffected
    paging = outcomes["t07_page_large_file"]
    assert paging.status == "fail"
    assert any("not found in the read_file result" in f for f in paging.failures), \
        paging.failures


# --- the reference agent alone: it reads only the request ----------------------------------

PLAN = """do it
[plan]
1. read_file {"path": "a.txt"} => a:(\\d+) || read_file {"path": "b.txt"} => b:(\\d+)
2. write_file {"path": "c.txt", "content": "${a}+${b}"}
answer: a=${a} b=${b}
[/plan]"""


def _body(*messages):
    return {"messages": list(messages)}


def _step1(ids=("c1", "c2"), results=("1", "2")):
    call = {"role": "assistant", "content": [
        {"type": "text", "text": "step 1: read_file, read_file"},
        {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a.txt"}},
        {"type": "tool_use", "id": "c2", "name": "read_file", "input": {"path": "b.txt"}}]}
    answer = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": i, "content": r} for i, r in zip(ids, results)]}
    return call, answer


def test_the_agent_plans_a_batch_then_a_dependent_call_from_the_results():
    tools = ("read_file", "write_file")
    first = decide("anthropic", _body({"role": "user", "content": PLAN}), tools)
    assert [c.input["path"] for c in first.tool_calls] == ["a.txt", "b.txt"]
    second = decide("anthropic", _body({"role": "user", "content": PLAN}, *_step1()), tools)
    assert second.tool_calls[0].input == {"path": "c.txt", "content": "1+2"}


def test_the_agent_fails_on_reordered_or_mis_paired_results():
    tools = ("read_file", "write_file")
    swapped = decide("anthropic", _body({"role": "user", "content": PLAN},
                                        *_step1(ids=("c2", "c1"))), tools)
    assert swapped.text.startswith("FAILED") and "out of order" in swapped.text
    lost = decide("anthropic", _body({"role": "user", "content": PLAN},
                                     *_step1(ids=("c1", "c9"))), tools)
    assert lost.text.startswith("FAILED") and "mis-paired" in lost.text


def test_the_summariser_keeps_fact_lines_only():
    request = {"system": "x", "messages": [{"role": "user", "content":
               "Summarise.\n<transcript>\n[user]\nhello\nFACT code = 7-A\n[assistant]\nok\n"
               "</transcript>"}]}
    reply = decide("anthropic", request, ())
    assert "FACT code = 7-A" in reply.text and "hello" not in reply.text
    assert parse_plan("no plan here") is None


def test_real_model_lanes_say_what_is_missing(monkeypatch):
    from evals.run import LaneError, lane_environment, main

    for name in ("ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LaneError, match="ANTHROPIC_API_KEY"):
        lane_environment("anthropic")
    with pytest.raises(LaneError, match="OPENAI_BASE_URL"):
        lane_environment("openai")
    assert main(["--provider", "anthropic"]) == 2  # before any Django or simulator work
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert lane_environment("anthropic") == {"HERMES_PROVIDER": "anthropic"}


def test_the_baseline_comparison_names_regressions_beyond_the_noise():
    from evals.run import compare

    row = {"task": "t", "status": "pass", "iterations": 10, "cost_usd": 1.0,
           "tokens": {"input": 100, "read": 0, "write": 0, "output": 0}}
    base = {"tasks": [row]}
    assert compare({"tasks": [{**row, "cost_usd": 1.02}]}, base) == []  # 2%: noise
    (line,) = compare({"tasks": [{**row, "iterations": 12}]}, base)
    assert "iterations 10 -> 12" in line
    (line,) = compare({"tasks": [{**row, "status": "fail", "failures": ["x"]}]}, base)
    assert "fails now" in line
