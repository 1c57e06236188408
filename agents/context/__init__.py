"""The context window: estimate and calibration (tokens), prune, compaction, the compaction
breaker, and wire-history repair (seed: the three reductions, calibration; DESIGN.md §5)."""
