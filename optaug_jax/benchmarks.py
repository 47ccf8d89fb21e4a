"""Benchmark CMDPs with a strictly feasible baseline, and their registry (host side)."""

from optaug_jax._src.benchmarks import (
  BENCHMARKS,
  GRID_MOVES,
  QUEUE_ENERGY,
  QUEUE_RATES,
  Benchmark,
  default_hazards,
  factored,
  factored_unconstrained_value,
  gridworld,
  make_benchmark,
  media_streaming,
  queue,
  random_family,
  register_benchmark,
  sparse_rows,
)

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
  "queue",
  "QUEUE_ENERGY",
  "QUEUE_RATES",
  "random_family",
  "register_benchmark",
  "sparse_rows",
)
