"""Tasks as data and their grading: pure, no Django (issue 17 item 1). ``grade`` checks a
task's planted ground truth; ``grade_structure`` only the harness's side of the contract
(the offline small-model lane).

A task is a folder ``evals/tasks/<id>/`` with ``task.toml`` and an optional ``workspace/``
copied into the session's workspace before the first message. ``task.toml``::

    title = "..."                      # one line
    requires_tools = ["read_file"]     # absent from the registry -> "skipped: tool X not present"
    context_window = 200000            # tokens (simulator window and HERMES CONTEXT_WINDOW)
    max_iterations = 30                # the harness's per-turn iteration budget

    [[messages]]                       # sent in order, each after the previous turn settled
    text = "..."                       # the plan for the reference agent (evals/reference_agent.py)
    gap_seconds = 0                    # simulated time (simulator clock) before it is sent
    repeat = 1                         # send it N times ({n} in text = 1..N)
    session = 1                        # 2, 3...: another session of the same user
    only_if_failed = false             # sent only if the previous turn failed (a retry)

    [[faults]]                         # simulator fault injected into request number `at`
    kind = "rate_limit"; at = 2        # 1-based count of model requests in the task
    count = 1                          # queued copies: the retries meet them in turn

    [[steers]]                         # a correction sent mid-turn (turn_steer), once
    when_result = "regex"              # when a request carries a tool result matching this
    text = "..."

    [[approvals]]                      # how the runner answers an approval request
    match = "rm -rf"                   # regex on the command / arguments
    decision = "approve"               # approve | deny | expire
    reason = "..."                     # deny only

    [[answers]]                        # answers to clarify questions, in the order asked
    text = "staging"

    [[schedules]]                      # after the messages: a schedule appending to the session
    prompt = "..."; every_seconds = 3600; fires = 2

    [[mcp_servers]]                    # a team MCP server, saved before the first session the
    name = "ledger"                    # way a team admin saves one: the admin form
    transport = "stdio"                # (accounts/mcp_forms.py: it connects and lists the
    command = "{python} {root}/tests/mcp_servers/stdio_tools.py"    # tools), then
    url = ""                           # mcp_server_save. {python}: this interpreter, {root}:
    expose = "add\necho"               # the checkout. expose / tool_policies as the form's
    default_policy = "ask"             # text ("tool: policy" lines)
    tool_policies = "add: read_only"

    provider = "simulator-openai"      # top level: the session's provider (default: Anthropic wire)

    [budget]                           # a session budget that stops the turn mid-way
    limit_usd = "0.01"; raise_to_usd = "5"   # then raised, and the turn resumed

    [grade]
    max_iterations = 12                # model calls of kind "turn" over the task, children included
    max_cost_usd = 0.5
    status = "completed"               # the last turn's status
    faults_fired = 1                   # at least this many injected faults were answered
    [[grade.files]]   path = "x"; exists = true; contains = "..."; equals = "..."; not_contains = ""
    [[grade.answer]]  contains = "..." | regex = "..." | not_contains = "..."
    [[grade.calls]]   name = "patch"; args = {path = "a.py"}; min = 1; max = 1
                                       # args: each value a substring of that argument
    [[grade.approvals]] match = "rm -rf"; state = "approved" | "denied" | "expired"
    [[grade.events]]  type = "turn.steered"; min = 1
    [[grade.usage]]   purpose = "summary"; min = 2   # model calls by purpose (turn/summary/...)
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
DECISIONS = ("approve", "deny", "expire")


class SpecError(ValueError):
    """A task.toml that does not describe a runnable task (names the file and the field)."""


@dataclass(frozen=True, slots=True)
class Task:
    """One task, loaded. ``data`` is the parsed TOML (validated here), ``root`` its folder."""

    id: str
    root: Path
    data: dict[str, Any]

    @property
    def title(self) -> str:
        return str(self.data.get("title", self.id))

    @property
    def requires_tools(self) -> list[str]:
        return list(self.data.get("requires_tools", []))

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def messages(self) -> list[tuple[str, float, int, bool]]:
        """(text, gap_seconds, session number) per message sent, repeats expanded ({n} =
        1..N). Session 1 is the task's first session; a higher number opens another session
        of the same user (the grade looks at the last one used). The last item: send it only
        when the previous turn failed (the person's retry after a cut stream)."""
        out = []
        for item in self.data.get("messages", []):
            for n in range(1, int(item.get("repeat", 1)) + 1):
                out.append((str(item["text"]).replace("{n}", str(n)),
                            float(item.get("gap_seconds", 0)) if n == 1 else 0.0,
                            int(item.get("session", 1)), bool(item.get("only_if_failed"))))
        return out

    @property
    def grade(self) -> dict[str, Any]:
        return dict(self.data.get("grade", {}))


def load_task(root: Path) -> Task:
    """Parse and check ``root/task.toml``. Raises SpecError."""
    path = root / "task.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise SpecError(f"{path}: {error}") from error
    if not data.get("messages"):
        raise SpecError(f"{path}: a task needs at least one [[messages]]")
    for item in data.get("approvals", []):
        if item.get("decision") not in DECISIONS:
            raise SpecError(f"{path}: approvals.decision must be one of {DECISIONS}")
        re.compile(item.get("match", ""))
    for item in data.get("steers", []):
        re.compile(item["when_result"])
    for item in data.get("mcp_servers", []):
        if not item.get("name") or item.get("transport") not in ("stdio", "http"):
            raise SpecError(f"{path}: mcp_servers needs a name and transport stdio or http")
        if not item.get("command" if item["transport"] == "stdio" else "url"):
            raise SpecError(f"{path}: mcp_servers {item['name']!r} needs a "
                            f"{'command' if item['transport'] == 'stdio' else 'url'}")
    for item in data.get("grade", {}).get("answer", []):
        if "regex" in item:
            re.compile(item["regex"])
    return Task(id=root.name, root=root, data=data)


def load_tasks(names: list[str] | None = None, base: Path = TASKS_DIR) -> list[Task]:
    """Every task under ``base`` (sorted by id), or those named (prefix match)."""
    roots = sorted(p for p in base.iterdir() if (p / "task.toml").exists())
    if names:
        roots = [p for p in roots if any(p.name == n or p.name.startswith(n) for n in names)]
    return [load_task(p) for p in roots]


# --- what a run left behind, and its grade ------------------------------------------------

@dataclass(slots=True)
class Observation:
    """What the runner saw after a task. ``files``: workspace path -> text (None: binary or
    unreadable); ``calls``: every tool call of the task, [(name, arguments)] in order;
    ``approvals``: [("tool name: command text", state)]; ``events``: RunEvent type ->
    count; ``status``: the last turn's status; ``iterations``: model calls of purpose
    "turn"; ``cost_usd`` None when a cost was unknown; tokens by bucket."""

    files: dict[str, str | None] = field(default_factory=dict)
    answer: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    approvals: list[tuple[str, str]] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)
    status: str = ""
    iterations: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    notes: list[str] = field(default_factory=list)
    purposes: dict[str, int] = field(default_factory=dict)
    faults_fired: int = 0
    raw_calls: list[tuple[str, str]] = field(default_factory=list)
    """Every tool call as the model sent it: (name, arguments text), in order."""
    offered: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tool name -> JSON-schema input, of every tool offered to the task's sessions."""
    turns: list[tuple[str, int, str]] = field(default_factory=list)
    """Every turn of the task: (status, iterations charged, how the loop ended: the
    turn.finished payload's status, "" when it did not finish)."""


def _args_match(want: dict[str, Any], got: dict[str, Any]) -> bool:
    return all(str(value) in str(got.get(key, "")) for key, value in want.items())


def grade(task: Task, obs: Observation) -> list[str]:
    """The failed checks of ``obs`` against the task's [grade] (empty list = pass)."""
    spec = task.grade
    failures: list[str] = list(obs.notes)
    status = spec.get("status", "completed")
    if obs.status != status:
        failures.append(f"status {obs.status!r}, expected {status!r}")
    if "max_iterations" in spec and obs.iterations > int(spec["max_iterations"]):
        failures.append(f"{obs.iterations} iterations > ceiling {spec['max_iterations']}")
    if "max_cost_usd" in spec:
        if obs.cost_usd is None:
            failures.append("cost unknown, a ceiling is set")
        elif obs.cost_usd > float(spec["max_cost_usd"]):
            failures.append(f"cost ${obs.cost_usd:.4f} > ceiling ${spec['max_cost_usd']}")
    if obs.faults_fired < int(spec.get("faults_fired", 0)):
        failures.append(f"{obs.faults_fired} injected fault(s) fired, expected "
                        f"{spec['faults_fired']}: the task did not test its fault")
    for item in spec.get("files", []):
        path, text = item["path"], obs.files.get(item["path"])
        if item.get("exists", True) is False:
            if path in obs.files:
                failures.append(f"file {path} exists, should not")
            continue
        if path not in obs.files:
            failures.append(f"file {path} missing")
            continue
        text = text or ""
        if "equals" in item and text != item["equals"]:
            failures.append(f"file {path} is {text[:80]!r}, expected {item['equals'][:80]!r}")
        if "contains" in item and item["contains"] not in text:
            failures.append(f"file {path} lacks {item['contains']!r}")
        if "not_contains" in item and item["not_contains"] in text:
            failures.append(f"file {path} still holds {item['not_contains']!r}")
    for item in spec.get("answer", []):
        if "contains" in item and item["contains"] not in obs.answer:
            failures.append(f"answer lacks {item['contains']!r}: {obs.answer[:160]!r}")
        if "not_contains" in item and item["not_contains"] in obs.answer:
            failures.append(f"answer holds {item['not_contains']!r}")
        if "regex" in item and not re.search(item["regex"], obs.answer, re.MULTILINE):
            failures.append(f"answer does not match /{item['regex']}/: {obs.answer[:160]!r}")
    for item in spec.get("calls", []):
        count = sum(1 for name, args in obs.calls
                    if name == item["name"] and _args_match(item.get("args", {}), args))
        low, high = int(item.get("min", 1)), item.get("max")
        if count < low or (high is not None and count > int(high)):
            failures.append(f"{count} {item['name']} call(s) matching {item.get('args', {})}, "
                            f"expected {low}..{high if high is not None else 'any'}")
    for item in spec.get("approvals", []):
        states = [state for command, state in obs.approvals
                  if re.search(item.get("match", ""), command)]
        if item["state"] not in states:
            failures.append(f"no approval /{item.get('match', '')}/ {item['state']} "
                            f"(saw {states or 'none'})")
    for item in spec.get("events", []):
        count = obs.events.get(item["type"], 0)
        if count < int(item.get("min", 1)) or count > int(item.get("max", 10**9)):
            failures.append(f"{count} {item['type']} event(s), expected "
                            f"{item.get('min', 1)}..{item.get('max', 'any')}")
    for item in spec.get("usage", []):
        count = obs.purposes.get(item["purpose"], 0)
        if count < int(item.get("min", 1)) or count > int(item.get("max", 10**9)):
            failures.append(f"{count} model call(s) for {item['purpose']}, expected "
                            f"{item.get('min', 1)}..{item.get('max', 'any')}")
    return failures


# --- the structural grade of the offline real-model lane ----------------------------------

FINAL_STATUSES = ("completed", "failed", "cancelled")


def grade_structure(obs: Observation, *, budget: int,
                    statuses: list[int] | None = None) -> list[str]:
    """The failed structural checks of a run (empty list = pass), for a model too small to
    do the task (issue 17 item 3, the offline lane): what is graded is the harness's side
    of the contract, never the answer.

    - every tool call names an offered tool and carries a JSON object that validates
      against that tool's input schema (JSON Schema, the schema the model was offered);
    - the provider answered no request with an HTTP error (``statuses``: the status of
      every request of the run, read from the provider's own access log; 4xx is a request
      the harness built wrong, 5xx a server that could not serve it);
    - every turn of the run ended (completed; a turn that failed or waits is a failure)
      within ``budget`` iterations (the per-turn budget the harness enforced).
    Harness notes about the model's choices (an unexpected approval or question, answered
    by the runner) are not structural and are ignored; a run that never settled is not."""
    failures = [note for note in obs.notes if "did not settle" in note or
                note.startswith("last turn")]
    for index, (name, raw) in enumerate(obs.raw_calls, 1):
        if name not in obs.offered:
            failures.append(f"call {index}: {name!r} is not an offered tool")
            continue
        try:
            args = json.loads(raw or "{}")
        except ValueError as error:
            failures.append(f"call {index} {name}: arguments are not JSON ({error}): "
                            f"{raw[:120]!r}")
            continue
        if not isinstance(args, dict):
            failures.append(f"call {index} {name}: arguments are not a JSON object: "
                            f"{raw[:120]!r}")
            continue
        schema = obs.offered[name] or {"type": "object"}
        error = best_match(validator_for(schema)(schema).iter_errors(args))
        if error is not None:
            failures.append(f"call {index} {name}: arguments do not fit the schema "
                            f"({error.message[:160]})")
    bad = sorted(s for s in (statuses or []) if s >= 400)
    if bad:
        counts = {s: bad.count(s) for s in bad}
        failures.append("provider answered " + ", ".join(
            f"HTTP {s} x{n}" for s, n in counts.items()))
    if not obs.turns:
        failures.append("no turn ran")
    for index, (status, iterations, _ended) in enumerate(obs.turns, 1):
        if status != "completed":
            failures.append(f"turn {index} ended {status!r}, not completed")
        if iterations > budget:
            failures.append(f"turn {index}: {iterations} iterations > budget {budget}")
    return failures
