"""Benchmark CMDPs with a strictly feasible baseline, and their registry (host side)."""

from optaug_jax._src.benchmarks import (BENCHMARKS, GRID_MOVES, Benchmark, default_hazards,
                                        factored, factored_unconstrained_value, gridworld,
                                        make_benchmark, media_streaming, random_family,
                                        register_benchmark)

__all__ = (
    "BENCHMARKS",
    "Benchmark",
    "GRID_MOVES",
    "default_hazards",
    "factored",
    "factored_unconstrained_value",
    "gridworld",
    "make_benchmark",
    "media_streaming",
    "random_family",
    "register_benchmark",
)
