"""A new user's finding: `simulator-envelope`, a provider profile the code supports
(agents/providers.py), was missing from the README. Every built-in profile must be named
where the README lists HERMES_PROVIDER's values, and each simulator profile explained."""

from __future__ import annotations

import re
from pathlib import Path

from agents.providers import PROFILES

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_the_provider_row_names_every_builtin_profile():
    row = re.search(r"^\| `HERMES_PROVIDER` \|.*$", README, re.MULTILINE).group(0)
    listed = {name.strip() for name in row.split("provider profile:")[1].strip(" |").split(",")}
    assert listed == set(PROFILES), set(PROFILES) ^ listed


def test_every_simulator_profile_is_explained_outside_the_table():
    prose = "\n".join(line for line in README.splitlines() if not line.startswith("|"))
    for name in PROFILES:
        if name.startswith("simulator"):
            assert f"`{name}`" in prose, name
