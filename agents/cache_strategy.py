"""The cache strategy a session gets by default: TTL per breakpoint tier and the cold-resume
prune, chosen from the session's observed rhythm (issue 15 item 4; beyond hermes, whose
planner never looks at how long a session has been idle).

Pure: the runner hands in plain numbers (``SessionRhythm``), the planner gets a
``CacheStrategy`` back. Prices are relative to one uncached input token (Anthropic prompt
caching docs, hermes-facts §3): a 5-minute write costs 1.25, a 1-hour write 2.0, a read 0.1.

The arithmetic, per idle gap ``g`` between two turns, for the two tiers:

- **Prompt tier** (system + tools, ``P`` tokens, written once per session and read on every
  request). At 1h its one write costs 2.0·P instead of 1.25·P (0.75·P more), and every resume
  after a gap in (5 min, 1 h] reads it (0.1·P) instead of rewriting it (1.25·P): one such gap
  repays the premium (1.15·P > 0.75·P). So the prompt goes to 1h unless the session has shown
  only gaps that 5 minutes covers (a gapless burst) or only gaps longer than an hour (nothing
  survives them). A session with no gap observed yet is assumed human-paced (1h): the loss
  when that is wrong is 0.75·P once.
- **Message tier** (history ``H`` tokens, of which ``R`` a cold prune would reclaim; ``G``
  tokens appended and ``n`` requests per burst). Per long gap (5 min < g ≤ 1 h):
    * kept warm at 1h: every write in the burst pays 0.75 more per token (0.75·G), the resume
      reads the history (0.1·H), and the prunable part stays in every later request of the
      next burst (0.1·R·n);
    * let go cold at 5m and pruned on resume: the resume rewrites what the prune left,
      1.25·(H − R); the prune itself is free (no model call).
  1h wins iff 0.75·G + 0.1·H + 0.1·R·n < 1.25·(H − R). Big tool outputs (large R) favour the
  cold prune; small outputs and 10–20-minute gaps favour keeping warm. Until a long gap has
  been seen the message tier stays at 5m (the cheaper write) with the cold prune on.

Expected gaps come from what was observed: a session that has had long gaps is expected to
have them again (human-paced), one that has had only short ones is a burst.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.messages import TTL

TTL_5M_S = 300.0
"""The 5-minute tier's lifetime, seconds (refreshed on every hit)."""
TTL_1H_S = 3600.0
"""The 1-hour tier's lifetime, seconds."""
WRITE_5M = 1.25
WRITE_1H = 2.0
READ = 0.1
"""Prices relative to one uncached input token (Anthropic prompt caching)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRhythm:
    """What the session has shown so far, as plain values.

    gaps_s: idle gaps between the end of a turn and the next user message, seconds, oldest
        first (the gap before the turn being planned included, when known).
    prompt_tokens: system prompt + tool schemas (the prompt tier), tokens.
    history_tokens: the live history, tokens (estimate).
    prunable_tokens: what a cold prune of that history would reclaim, tokens (0..history).
    burst_growth_tokens: tokens appended per burst (between long gaps), tokens; the history
        divided by the bursts seen is a fair estimate.
    burst_requests: model requests per burst, mean.
    """

    gaps_s: tuple[float, ...] = ()
    prompt_tokens: int = 0
    history_tokens: int = 0
    prunable_tokens: int = 0
    burst_growth_tokens: int = 0
    burst_requests: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheStrategy:
    """The choice: ``prompt_ttl`` for the two system breakpoints, ``message_ttl`` for the
    rolling ones, ``prune_on_cold_resume``: prune hard before the first request after a gap
    longer than the message TTL the PREVIOUS turn wrote with (the prefix is gone, the rewrite
    is free; a tail kept warm at 1h is simply never cold within an hour). ``reason`` is one
    human sentence for the event log."""

    prompt_ttl: TTL
    message_ttl: TTL
    prune_on_cold_resume: bool
    reason: str

    @property
    def message_ttl_seconds(self) -> float:
        return TTL_1H_S if self.message_ttl == "1h" else TTL_5M_S


def long_gaps(gaps_s: tuple[float, ...]) -> tuple[float, ...]:
    """Gaps the 5-minute tier does not survive but the 1-hour tier does, seconds."""
    return tuple(g for g in gaps_s if TTL_5M_S < g <= TTL_1H_S)


def warm_beats_cold(rhythm: SessionRhythm) -> bool:
    """True when keeping the message tier warm at 1h costs less per long gap than letting it
    go cold and pruning on resume (module docstring: 0.75·G + 0.1·H + 0.1·R·n < 1.25·(H − R)).
    """
    h = max(0, rhythm.history_tokens)
    r = min(max(0, rhythm.prunable_tokens), h)
    warm = ((WRITE_1H - WRITE_5M) * max(0, rhythm.burst_growth_tokens) + READ * h
            + READ * r * max(0.0, rhythm.burst_requests))
    cold = WRITE_5M * (h - r)
    return warm < cold


def choose_cache_strategy(rhythm: SessionRhythm) -> CacheStrategy:
    """The default strategy for the next request of a session (module docstring)."""
    gaps = rhythm.gaps_s
    survivable = long_gaps(gaps)
    if not gaps:
        return CacheStrategy(prompt_ttl="1h", message_ttl="5m", prune_on_cold_resume=True,
                             reason="no idle gap seen yet: the prompt is kept for an hour, "
                                    "messages for 5 minutes, pruned if they go cold")
    if not survivable:
        every_short = all(g <= TTL_5M_S for g in gaps)
        return CacheStrategy(
            prompt_ttl="5m", message_ttl="5m", prune_on_cold_resume=True,
            reason=("only short gaps so far: everything at 5 minutes, the cheaper write"
                    if every_short else
                    "gaps longer than an hour: nothing survives them, so 5 minutes"))
    if warm_beats_cold(rhythm):
        return CacheStrategy(prompt_ttl="1h", message_ttl="1h", prune_on_cold_resume=True,
                             reason="gaps under an hour with little to prune: the whole "
                                    "conversation is kept warm for an hour")
    return CacheStrategy(prompt_ttl="1h", message_ttl="5m", prune_on_cold_resume=True,
                         reason="gaps under an hour with much to prune: the prompt is kept "
                                "for an hour, the tail goes cold and is pruned on resume")
