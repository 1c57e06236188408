"""The approval policy: one pure function decides allow / ask / deny for every tool call.

(Being written by the policy helper; the Decision shape below is the shared contract.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The policy's answer for one tool call.

    ``verdict``: allow / ask / deny. ``rule``: the name of the check that decided (e.g.
    "hardline", "deny_list", "bypass", "always_rule", "protected_file", "default_ask").
    ``reason``: a sentence for humans and, on deny, for the model. ``risk_class``: a short
    category ("destructive", "network", "privilege", "instruction_file", ...) used by team
    policies. ``normalized``: the normalised command or path that was matched.
    """

    verdict: Verdict
    rule: str
    reason: str = ""
    risk_class: str = ""
    normalized: str = ""
