"""Benchmarks of helix_django: ``python -m bench`` (see docs/performance.md)."""
