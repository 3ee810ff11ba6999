"""Benchmark sections: each exposes ``NAME`` and ``async run(sizes) -> list[Row]``."""
