"""The media-streaming CMDP of Bura et al. (2022), "DOPE" (see `media_streaming`)."""

from __future__ import annotations

import numpy as np

from ._common import (
  Benchmark,
  stationary_benchmark,
)


def media_streaming(*, horizon: int = 10, dtype=None) -> Benchmark:
  """Media streaming (Bura et al. 2022, "DOPE"), `S = 10`, `A = 2`, one constraint.

  State `j` is the buffer level `j / 10`; the episode starts with an empty buffer
  (state 0). Action 0 is the fast service (`mu = 0.9`, constraint cost 1), action 1 the
  slow one (`mu = 0.1`, constraint cost 0). With arrival rate 0.8, from state `s` under
  service rate `mu` the buffer goes one level up with probability `0.2 mu` (capped at
  state 9), one level down with probability `0.8 (1 - mu)` (floored at state 0), and
  stays otherwise (`0.8 mu + 0.2 (1 - mu)`); the same at every step. The objective cost is
  1 per step spent with an empty buffer (state 0), for both actions. Threshold
  `alpha = H / 2`: at most half of the steps may use the fast service in expectation.

  The fast service is never worse for the objective, and the unconstrained optimum uses
  it at every step where it matters (about `H - 1` times), so the constraint binds.
  Baseline: the LP-optimal policy for `alpha / 5`; its slack is about `4 alpha / 5`.

  Args:
    horizon: `H`.
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    `Benchmark(cmdp, safe_policy [H, 10, 2], slack)`.
  """
  num_states, arrival = 10, 0.8
  service = np.array([0.9, 0.1])
  p = np.zeros((num_states, 2, num_states))
  for s in range(num_states):
    for a, mu in enumerate(service):
      p[s, a, min(s + 1, num_states - 1)] += mu * (1.0 - arrival)
      p[s, a, max(s - 1, 0)] += (1.0 - mu) * arrival
      p[s, a, s] += mu * arrival + (1.0 - mu) * (1.0 - arrival)
  cost = np.zeros((num_states, 2))
  cost[0, :] = 1.0
  constraint = np.zeros((num_states, 2))
  constraint[:, 0] = 1.0
  return stationary_benchmark(p, cost, constraint, horizon, dtype)
