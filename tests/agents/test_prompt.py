"""Three-tier system prompt, context files and restart recovery (agents/prompt.py)."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

from agents.cache import plan_breakpoints
from agents.messages import Message, ModelRequest
from agents.prompt import (
    CONTEXT_FILE_MAX_CHARS, DEFAULT_IDENTITY, build_stable_tier, build_system_prompt,
    cap_context_text, find_context_file, load_context_file, recover_stable_len,
    strip_front_matter,
)
from agents.providers import PROFILES

TOOLS = ("read_file", "terminal", "memory", "skills_list", "skill_view")


def build(home: Path | None, workspace: Path, **overrides):
    args = dict(home=home, tool_names=TOOLS, model="claude-sonnet-4-5", provider="anthropic",
                workspace=workspace, caller_context="You are helping on the web.",
                skills_index="# Skills\n- deploy: ship it", memory="likes tea",
                user_profile="name: Ada", session_id="s-42", started_at=date(2025, 3, 7))
    args.update(overrides)
    return build_system_prompt(**args)


def test_prompt_is_deterministic_and_tiers_are_in_order(tmp_path: Path):
    (tmp_path / "SOUL.md").write_text("You are Soul.\n")
    first = build(tmp_path, tmp_path)
    second = build(tmp_path, tmp_path, tool_names=tuple(reversed(TOOLS)))
    assert first.text.encode() == second.text.encode()
    text = first.text
    assert text.startswith("You are Soul.\n\n")
    stable = text[:first.stable_len]
    assert stable == build_stable_tier(home=tmp_path, tool_names=TOOLS,
                                       model="claude-sonnet-4-5", provider="anthropic")
    order = [text.index(s) for s in ("You are Soul.", "skill_view", "You are helping",
                                     "# Skills", "likes tea", "name: Ada", "Session: s-42")]
    assert order == sorted(order)
    assert "skill_view" in stable and "likes tea" not in stable and "s-42" not in stable


def test_date_line_is_the_session_start_date_never_now(tmp_path: Path):
    prompt = build(None, tmp_path, started_at=date(2024, 12, 31))
    lines = prompt.text.splitlines()
    assert lines[-1] == "Conversation started: 2024-12-31"
    assert lines[-3] == "Session: s-42 · Model: claude-sonnet-4-5 · Provider: anthropic"
    assert str(date.today()) not in prompt.text


def test_stable_tier_has_nothing_time_varying_or_session_specific(tmp_path: Path):
    a = build(None, tmp_path, session_id="a", started_at=date(2020, 1, 1), memory="m1")
    b = build(None, tmp_path / "..", session_id="b", started_at=date(2030, 1, 1), memory="m2",
              caller_context="other")
    assert a.text[:a.stable_len] == b.text[:b.stable_len]
    assert a.text.startswith(DEFAULT_IDENTITY)


def test_tool_guidance_only_for_loaded_tools(tmp_path: Path):
    bare = build_stable_tier(home=None, tool_names=(), model="m", provider="p")
    some = build_stable_tier(home=None, tool_names=("todo",), model="m", provider="p")
    assert "todo tool" not in bare and "todo tool" in some
    assert "skill_view" not in some


def test_per_model_notes(tmp_path: Path):
    gemini = build_stable_tier(home=None, tool_names=TOOLS, model="gemini-2.5-pro", provider="p")
    claude = build_stable_tier(home=None, tool_names=TOOLS, model="claude", provider="p")
    assert "function-calling interface" in gemini and "function-calling" not in claude


def test_context_discovery_stops_at_the_workspace_root_even_inside_a_repo(tmp_path: Path):
    """Issue 8 finding 4: hermes walks up to the git root; here nothing above the workspace
    (shared with other users) is ever read, and a linked HERMES.md does not count."""
    repo = tmp_path / "repo"
    workspace = repo / "pkg" / "sub"
    workspace.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".hermes.md").write_text("root hermes")
    (repo / "pkg" / "HERMES.md").write_text("nearer hermes")
    assert find_context_file(workspace) is None
    (workspace / "AGENTS.md").write_text("agents")
    assert find_context_file(workspace) == workspace.resolve() / "AGENTS.md"
    (workspace / "HERMES.md").symlink_to(repo / ".hermes.md")
    assert find_context_file(workspace) == workspace.resolve() / "AGENTS.md"
    (workspace / ".hermes.md").write_text("own")
    assert find_context_file(workspace) == workspace.resolve() / ".hermes.md"


def test_context_discovery_order_in_workspace_and_no_walk_without_repo(tmp_path: Path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "HERMES.md").write_text("parent without a repository")
    assert find_context_file(workspace) is None
    (workspace / ".cursorrules").write_text("cursor")
    assert find_context_file(workspace).name == ".cursorrules"
    (workspace / "CLAUDE.md").write_text("claude")
    assert find_context_file(workspace).name == "CLAUDE.md"
    (workspace / "AGENTS.md").write_text("agents")
    assert find_context_file(workspace).name == "AGENTS.md"
    (workspace / "HERMES.md").write_text("hermes")
    assert find_context_file(workspace).name == "HERMES.md"


def test_front_matter_stripped_and_context_in_context_tier(tmp_path: Path):
    (tmp_path / "AGENTS.md").write_text("---\ntitle: x\nalwaysApply: true\n---\n\nUse tabs.\n")
    section = load_context_file(tmp_path)
    assert section.endswith("Use tabs.") and "alwaysApply" not in section
    assert "(AGENTS.md)" in section
    prompt = build(None, tmp_path)
    assert prompt.text.index("Use tabs.") > prompt.stable_len
    assert prompt.text.index("Use tabs.") < prompt.text.index("# Skills")
    assert strip_front_matter("---\nunclosed\nbody") == "---\nunclosed\nbody"


def test_context_cap_keeps_70_percent_head_and_20_percent_tail(tmp_path: Path):
    body = "".join(f"{i:07d}\n" for i in range(5000))  # 40,000 chars
    capped = cap_context_text(body, "AGENTS.md")
    assert capped.startswith(body[:14_000]) and capped.endswith(body[-4_000:])
    assert f"[... {40_000 - 18_000} chars of AGENTS.md truncated ...]" in capped
    assert len(capped) <= CONTEXT_FILE_MAX_CHARS
    assert cap_context_text("short", "x") == "short"
    exact = "y" * CONTEXT_FILE_MAX_CHARS
    assert cap_context_text(exact, "x") == exact
    (tmp_path / "CLAUDE.md").write_text(body)
    assert "truncated" in build(None, tmp_path).text


def test_recovery_accepts_the_boundary_when_inputs_match(tmp_path: Path):
    (tmp_path / "SOUL.md").write_text("I am the soul.")
    prompt = build(tmp_path, tmp_path)
    recovered = recover_stable_len(prompt.text, home=tmp_path, tool_names=TOOLS,
                                   model="claude-sonnet-4-5", provider="anthropic")
    assert recovered == prompt.stable_len


def test_recovery_after_soul_md_changed_falls_back_and_sends_stored_bytes(tmp_path: Path):
    soul = tmp_path / "SOUL.md"
    soul.write_text("I am the soul.")
    stored = build(tmp_path, tmp_path).text
    kwargs = dict(home=tmp_path, tool_names=TOOLS, model="claude-sonnet-4-5",
                  provider="anthropic")
    assert recover_stable_len(stored, **kwargs) is not None
    soul.write_text("I am a different soul, edited between restarts.")
    os.utime(soul, ns=(1, 1))  # a distinct mtime even on coarse filesystem clocks
    assert recover_stable_len(stored, **kwargs) is None
    request = ModelRequest(model="m", system=stored, messages=(Message(role="user", content="hi"),),
                           stable_len=recover_stable_len(stored, **kwargs))
    planned = plan_breakpoints(request, profile_caps=PROFILES["anthropic"])
    assert planned.system == stored
    assert [b.target for b in planned.breakpoints].count("system") == 1
    assert "system_stable" not in [b.target for b in planned.breakpoints]


def test_recovery_rejects_a_different_tool_set_or_model(tmp_path: Path):
    stored = build(None, tmp_path).text
    assert recover_stable_len(stored, home=None, tool_names=("read_file",),
                              model="claude-sonnet-4-5", provider="anthropic") is None
    assert recover_stable_len(stored, home=None, tool_names=TOOLS, model="gemini-2.5",
                              provider="anthropic") is None
    assert recover_stable_len(stored, home=None, tool_names=TOOLS, model="claude-sonnet-4-5",
                              provider="anthropic") is not None


def test_recovery_memo_is_a_bounded_lru_and_a_hit_is_not_rebuilt(tmp_path: Path, monkeypatch):
    """The memo holds RECOVERY_MEMO_MAX verdicts, least recently used evicted first: a verdict
    read again survives the next insertions, an unread one is rebuilt (counted through the
    one function a miss calls)."""
    import agents.prompt as prompt_module

    with prompt_module._recovery_lock:
        prompt_module._recovery_memo.clear()
    stored = build(None, tmp_path).text
    builds = []
    real = prompt_module.build_stable_tier
    monkeypatch.setattr(prompt_module, "build_stable_tier",
                        lambda **kw: builds.append(kw["model"]) or real(**kw))
    kwargs = dict(home=None, tool_names=TOOLS, provider="anthropic")
    limit = prompt_module.RECOVERY_MEMO_MAX
    for n in range(limit):
        recover_stable_len(stored, model=f"m-{n}", **kwargs)
    recover_stable_len(stored, model="m-0", **kwargs)  # a hit: refreshed, not rebuilt
    assert len(builds) == limit
    recover_stable_len(stored, model="m-new", **kwargs)  # evicts m-1, the least recent
    assert len(prompt_module._recovery_memo) == limit
    recover_stable_len(stored, model="m-0", **kwargs)
    assert len(builds) == limit + 1
    recover_stable_len(stored, model="m-1", **kwargs)
    assert builds[-1] == "m-1" and len(builds) == limit + 2
