"""Imports point down (issue 11, item 2): agents ← sessions ← approvals ← accounts ← hermes_web.

Every import of the project's own packages is walked with ast, including imports placed
inside functions (an import inside a function hides a cycle from Python, not from this
test). Two rules:

- no cycle between files, and no package imports a package above it in ``ORDER``;
- agents/ imports neither Django (nor Channels/Celery) nor any of the apps.

A failure names each offending edge as ``file:line importer -> imported``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Lower layers first; a package may import only packages at or below its own index.
ORDER = ["agents", "sessions", "approvals", "accounts", "hermes_web"]
SKIP = {".venv", "tests", "benchmarks", "node_modules", ".git", "var"}


def _modules() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for top in ORDER:
        for path in (ROOT / top).rglob("*.py"):
            if SKIP & set(path.relative_to(ROOT).parts):
                continue
            mod = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            files[mod.removesuffix(".__init__")] = path
    return files


def _edges(files: dict[str, Path]) -> list[tuple[str, str, int, str]]:
    """Every (importer, imported project module, line, raw name) pair, nested imports too."""
    edges = []
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                names = [f"{base}.{alias.name}" for alias in node.names] + [base]
            else:
                continue
            for raw in names:
                name = raw
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if not name or name == mod:
                    continue
                if path.name == "__init__.py" and name.startswith(mod + "."):
                    continue  # a package re-exporting its own submodules
                edges.append((mod, name, node.lineno, raw))
                break
    return edges


def _top(mod: str) -> str:
    return mod.split(".")[0]


FILES = _modules()
EDGES = _edges(FILES)


def test_the_walker_sees_imports_inside_functions():
    """The walk is not fooled by nesting: a known nested import would show up."""
    tree = ast.parse("def f():\n    from sessions import runner\n")
    assert any(isinstance(n, ast.ImportFrom) for n in ast.walk(tree))
    assert len(EDGES) > 200


def test_no_upward_arrow():
    upward = sorted(f"{FILES[a].relative_to(ROOT)}:{line} {a} -> {b}"
                    for a, b, line, _ in EDGES
                    if ORDER.index(_top(b)) > ORDER.index(_top(a)))
    assert upward == []


def test_no_cycle_between_files():
    graph: dict[str, set[str]] = {m: set() for m in FILES}
    for a, b, _, _ in EDGES:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    assert cycles == []


@pytest.mark.parametrize("forbidden", ["django", "channels", "celery"])
def test_agents_imports_no_framework(forbidden):
    offenders = []
    for mod, path in FILES.items():
        if _top(mod) != "agents":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            offenders += [f"{mod}:{node.lineno} {n}" for n in names
                          if n.split(".")[0] == forbidden]
    assert offenders == []


def test_agents_imports_none_of_the_apps():
    assert sorted(f"{a} -> {b}" for a, b, _, _ in EDGES
                  if _top(a) == "agents" and _top(b) != "agents") == []
