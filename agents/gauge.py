"""The context gauge: how full a session's context window is, as the harness sees it.

Pure arithmetic over token counts (no Django): the caller estimates the parts with
agents/context/tokens.py (``estimate_text_tokens`` for the system prompt and the tool schemas,
``estimate_message_tokens`` per live message) and passes the session's calibration anchor
(agents/context/tokens.py UsageAnchor: a rough estimate paired with the prompt tokens the provider
billed for it). The projection is the Calibrator's own rule (seed, "fire on the
projection"): billed_baseline + max(0, rough_now - rough_baseline), or rough_now without an
anchor, so the gauge shows the number the compaction gate compares with the threshold
(agents/context/compaction.py compaction_threshold).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.context.tokens import UsageAnchor


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextGauge:
    """One reading, all in tokens.

    ``floor``: system prompt + tool schemas (sent on every request, never reduced by
    compaction); ``history``: the live transcript (rough estimate); ``projected``: the
    calibrated estimate of the whole prompt; ``threshold``: where automatic compaction
    fires; ``window``: the model's context window; ``calibrated``: whether a billed anchor
    corrected the rough estimate. Derived: ``headroom`` (tokens left before compaction, >=
    0), ``percent`` (projected / threshold, 0-100, clamped) and ``floor_percent`` /
    ``history_percent`` (the two parts' shares of the bar)."""

    floor: int
    history: int
    projected: int
    threshold: int
    window: int
    calibrated: bool

    @property
    def headroom(self) -> int:
        return max(0, self.threshold - self.projected)

    @property
    def percent(self) -> int:
        return _share(self.projected, self.threshold)

    @property
    def floor_percent(self) -> int:
        """The floor's share of the bar: its part of the projection, scaled like the bar."""
        rough = self.floor + self.history
        if rough <= 0:
            return 0
        return min(self.percent, round(self.percent * self.floor / rough))

    @property
    def history_percent(self) -> int:
        return max(0, self.percent - self.floor_percent)

    @property
    def level(self) -> str:
        """'ok' under 60% of the threshold, 'warn' under 85%, else 'high' (colours only)."""
        return "ok" if self.percent < 60 else "warn" if self.percent < 85 else "high"


def _share(part: int, whole: int) -> int:
    if whole <= 0:
        return 100
    return max(0, min(100, round(100 * part / whole)))


def context_gauge(*, floor: int, history: int, threshold: int, window: int,
                  anchor: UsageAnchor | None = None) -> ContextGauge:
    """The gauge for a prompt of ``floor`` + ``history`` rough tokens. ``anchor``: the
    session's calibration anchor when it still describes the live prefix (the caller checks
    the fingerprint, as Calibrator.from_dict does), else None. Raises ValueError for a
    negative count or a non-positive window."""
    if min(floor, history, threshold) < 0 or window <= 0:
        raise ValueError("token counts must be >= 0 and the window > 0")
    rough = floor + history
    projected = rough if anchor is None else anchor.billed + max(0, rough - anchor.rough)
    return ContextGauge(floor=floor, history=history, projected=projected,
                        threshold=threshold, window=window, calibrated=anchor is not None)
