"""The small "factored" CMDP of Bura et al. (2022), with its hand-derived optimum."""

from __future__ import annotations

import numpy as np

from ._common import (
  Benchmark,
  stationary_benchmark,
)


def factored(*, horizon: int = 6, dtype=None) -> Benchmark:
  """Factored CMDP (after Bura et al. 2022), `S = 3`, `A = 2`, one constraint.

  Action 0 stays (`s -> s`; objective cost 1, constraint cost 0). Action 1 moves along
  the cycle `s -> s + 1 (mod 3)` (objective cost `1 - (s + 1) / 3`, i.e. 2/3, 1/3, 0 in
  states 0, 1, 2; constraint cost 1). Start in state 0; threshold `alpha = H / 2`.

  Hand-checkable optima. A trajectory with `k` moves visits the states in the fixed cycle
  order, so it costs `m_k + (H - k)`, where `m_k` is the sum of the first `k` terms of
  2/3, 1/3, 0, 2/3, 1/3, 0, ... Each move costs at most 2/3 < 1, so the unconstrained
  optimum always moves (`k = H`, constraint value `H`), with value
  `m_H = H // 3 + (0, 2/3, 1)[H % 3]` (2 for `H = 6`). With `alpha = H / 2` and `H` a
  multiple of 3, `m_k >= k / 3` with equality at `k = 0` and `k = H`, so the lower convex
  envelope of `k -> m_k + H - k` is the line `H - 2 k / 3`: the constrained optimum is
  `H - 2 alpha / 3 = 2 H / 3` (4 for `H = 6`, e.g. a fair coin between never and always
  moving) with multiplier 2/3. The baseline (LP-optimal for `alpha / 5`) has value
  `H - 2 alpha / 15` and slack `4 alpha / 5` (5.6 and 2.4 for `H = 6`).

  Args:
    horizon: `H`.
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    `Benchmark(cmdp, safe_policy [H, 3, 2], slack)`.
  """
  num_states = 3
  p = np.zeros((num_states, 2, num_states))
  cost = np.zeros((num_states, 2))
  constraint = np.zeros((num_states, 2))
  for s in range(num_states):
    p[s, 0, s] = 1.0
    p[s, 1, (s + 1) % num_states] = 1.0
    cost[s] = [1.0, 1.0 - (s + 1) / num_states]
    constraint[s] = [0.0, 1.0]
  return stationary_benchmark(p, cost, constraint, horizon, dtype)


def factored_unconstrained_value(horizon: int) -> float:
  """The hand-derived unconstrained optimum of `factored(horizon=horizon)` (see there)."""
  return float(horizon // 3) + (0.0, 2.0 / 3.0, 1.0)[horizon % 3]
