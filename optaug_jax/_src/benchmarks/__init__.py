"""Benchmark CMDPs with a known strictly feasible baseline, and their registry. Host side,
never jitted.

A module per family (`media_streaming`, `factored`, `gridworld`, `queue`, `inventory` with
`lost_sales`, `random_family`), what they share in `_common`, and the registry here: an
explicit table (`BENCHMARKS`), which `register_benchmark` extends with a user's own.

Each constructor returns a `Benchmark(cmdp, safe_policy, slack)`: a validated `CMDP`, a
baseline policy `[H, S, A]` and its true slack `min_i (alpha_i - V^pi(d_i, p)) > 0` (the
paper's Assumption "Strictly feasible policy"), ready for `optaug(safe_policy=...,
slack=...)`. In each of the first seven the single constraint binds at the optimum: the
constrained optimum (`solve_lp`) is strictly worse than the unconstrained one and its
multiplier is positive (Kitamura et al.'s bind on some instances only: see below).

- `media_streaming`: the media-streaming CMDP of Bura et al. (2022), "DOPE: Doubly
  Optimistic and Pessimistic Exploration for Safe Reinforcement Learning" (NeurIPS), as
  a finite-horizon cost-minimisation problem. A client buffer (10 levels) is filled by a
  fast or a slow service; an empty buffer costs 1 per step, and the fast service costs 1
  unit of a budget of `H / 2`.
- `factored`: the small "factored" CMDP of the same paper, in the form used here: three
  states on a cycle; staying is expensive but free of constraint cost, moving is cheap
  but uses the budget `H / 2`. Its optima can be checked by hand (see `factored`).
- `inventory`: the inventory-control CMDP of the same paper (S = 6 stock levels, orders
  up to the free capacity, H = 7), from the authors' code: lost revenue against a budget
  of `H / 2` on ordering and holding costs (see `inventory` for the conversion).
- `gridworld`: the race-track story of the OptAug-CMDP paper (Müller, Alatur, Ramponi,
  He; Section 1 and the remark on the strictly feasible policy): a slippery grid where
  the fastest line to the finish cuts across hazard ("off-track") cells, a slower line
  avoids them, and the constraint bounds the expected number of hazard visits.
- `queue`: a single-server queue of 200 lengths with service-rate control (3 rates):
  holding cost against an energy budget; a birth-death chain (3 next states per row).
- `lost_sales`: a lost-sales inventory of 200 stock levels with four order sizes and an
  ordering budget (sparse, 13 next states per row): a user's own model of a few hundred
  states, written for the inner solve's cost benchmark.
- `random_family`: one member of `random_cmdp`'s documented family (Dirichlet(1)
  transitions, uniform costs, thresholds halfway between the safe and the unconstrained
  constraint values), with `safe_policy` as baseline. Default sizes S=10, A=4, H=10, I=1.

- `kitamura_random`, `kitamura_streaming`, `kitamura_linear`: the benchmarks of Kitamura et
  al. (NeurIPS 2025) on linear CMDPs, instance `seed` (`oj.linear`), with their features
  (`Benchmark.features`) and their baseline, the utility maximiser. Whether their
  constraint binds depends on the instance (`oj.linear.kitamura_random` and neighbours).

Baselines of the other benchmarks are LP-optimal policies of the same CMDP with a fifth of
the threshold (so their slack is four fifths of the threshold when that smaller constraint
binds).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ArgumentError
from ._common import Benchmark, sparse_rows
from .factored import factored, factored_unconstrained_value
from .gridworld import GRID_LP_MAX_VARIABLES, GRID_MOVES, default_hazards, gridworld
from .inventory import INVENTORY_DEMAND, inventory, lost_sales
from .kitamura import kitamura_linear, kitamura_random, kitamura_streaming
from .media_streaming import media_streaming
from .queue import QUEUE_ENERGY, QUEUE_RATES, queue
from .random_family import random_family

# The registry: name -> constructor (keyword arguments only).
BENCHMARKS: dict[str, Callable[..., Benchmark]] = {
  "media_streaming": media_streaming,
  "factored": factored,
  "gridworld": gridworld,
  "queue": queue,
  "inventory": inventory,
  "lost_sales": lost_sales,
  "random_family": random_family,
  "kitamura_random": kitamura_random,
  "kitamura_streaming": kitamura_streaming,
  "kitamura_linear": kitamura_linear,
}


def register_benchmark(name: str) -> Callable:
  """Decorator registering a benchmark constructor (keyword arguments only) under `name`."""

  def register(fn):
    if name in BENCHMARKS:
      raise ArgumentError("name", f"benchmark {name!r} is already registered")
    BENCHMARKS[name] = fn
    return fn

  return register


def make_benchmark(name: str, **kwargs) -> Benchmark:
  """The benchmark `BENCHMARKS[name](**kwargs)`; raises `ValueError` for an unknown name."""
  if name not in BENCHMARKS:
    raise ArgumentError("name", f"unknown benchmark {name!r}; known: {sorted(BENCHMARKS)}")
  return BENCHMARKS[name](**kwargs)


__all__ = (
  "BENCHMARKS",
  "GRID_LP_MAX_VARIABLES",
  "GRID_MOVES",
  "INVENTORY_DEMAND",
  "QUEUE_ENERGY",
  "QUEUE_RATES",
  "Benchmark",
  "default_hazards",
  "factored",
  "factored_unconstrained_value",
  "gridworld",
  "inventory",
  "kitamura_linear",
  "kitamura_random",
  "kitamura_streaming",
  "lost_sales",
  "make_benchmark",
  "media_streaming",
  "queue",
  "random_family",
  "register_benchmark",
  "sparse_rows",
)
