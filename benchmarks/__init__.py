"""Benchmarks: standalone measurement scripts (run with python benchmarks/<name>.py).

Not tests and not imported by the app; each prints a table and exits non-zero when a target
fails.
"""
