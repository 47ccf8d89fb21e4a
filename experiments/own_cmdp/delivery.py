"""A delivery robot with a battery: a CMDP written as a user would write one of their own.

Used as `--benchmark experiments/own_cmdp/delivery.py:delivery` by the experiment scripts
(docs/results/outlook/ validates the outlook on it). Nothing in it was tuned to make the
agents look good or bad: the threshold comes from a fixed rule (half the low-battery steps
of the cost-optimal policy).

States: a `side x side` grid of positions times battery levels `0..levels - 1` (`side = 6`,
`levels = 6`: S = 216), index `(row * side + col) * levels + battery`. The robot starts at
`(0, 0)` with a full battery and delivers at `(side - 1, side - 1)`. Actions: 0 charge or wait,
1 up, 2 right, 3 down, 4 left.

- A move with battery > 0 succeeds with probability 0.85 (else the robot stays), and
  drains one battery level with probability 0.5, whether it succeeds or not. A robot with
  an empty battery cannot move.
- Action 0 at a charger (`(0, side - 1)` and `(side - 1, 0)`, and the centre cell) charges
  two levels with probability 0.9, one with 0.1 (capped at the full battery); elsewhere it
  waits.
- Objective cost 1 per step away from the delivery cell (0 there, for every action).
- Constraint cost 1 per step away from the delivery cell with a battery of 1 or less (the
  risk of stranding): the constraint bounds the expected low-battery steps, at half of
  those of the cost-optimal policy.

At most 4 next states per row (the sparse layout's slots): the cell reached or not, times
the battery drained or not.
"""

from __future__ import annotations

import jax
import numpy as np

import optaug_jax as oj


def delivery(
  side: int = 6, levels: int = 6, horizon: int = 30, dtype=None
) -> oj.benchmarks.Benchmark:
  """The delivery robot's `Benchmark` (see the module docstring)."""
  num_cells = side * side
  num_states, num_actions = num_cells * levels, 5
  index = lambda r, c, b: (r * side + c) * levels + b
  moves = {1: (-1, 0), 2: (0, 1), 3: (1, 0), 4: (0, -1)}
  chargers = {(0, side - 1), (side - 1, 0), (side // 2, side // 2)}
  goal = (side - 1, side - 1)
  targets = np.zeros((num_states, num_actions, 4), np.int64)
  probs = np.zeros((num_states, num_actions, 4))
  cost = np.zeros((num_states, num_actions))
  low = np.zeros((num_states, num_actions))
  for r in range(side):
    for c in range(side):
      for b in range(levels):
        s = index(r, c, b)
        cost[s] = 0.0 if (r, c) == goal else 1.0
        low[s] = 1.0 if b <= 1 and (r, c) != goal else 0.0
        # Action 0: charge at a charger, else wait.
        if (r, c) in chargers:
          up2, up1 = min(b + 2, levels - 1), min(b + 1, levels - 1)
          targets[s, 0, :2], probs[s, 0, :2] = (index(r, c, up2), index(r, c, up1)), (0.9, 0.1)
        else:
          targets[s, 0, 0], probs[s, 0, 0] = s, 1.0
        for a, (dr, dc) in moves.items():
          if b == 0:
            targets[s, a, 0], probs[s, a, 0] = s, 1.0
            continue
          nr, nc = min(max(r + dr, 0), side - 1), min(max(c + dc, 0), side - 1)
          outcomes = [
            (index(nr, nc, b - 1), 0.85 * 0.5),
            (index(nr, nc, b), 0.85 * 0.5),
            (index(r, c, b - 1), 0.15 * 0.5),
            (index(r, c, b), 0.15 * 0.5),
          ]
          for n, (t, q) in enumerate(outcomes):
            targets[s, a, n], probs[s, a, n] = t, q
  next_states, p = oj.benchmarks.sparse_rows(targets, probs, width=4)
  tile = lambda x: np.broadcast_to(x, (horizon,) + x.shape)
  start = index(0, 0, levels - 1)

  def model(threshold, dtype):
    return oj.CMDP(
      transitions=tile(np.asarray(p, dtype)),
      cost=tile(np.asarray(cost, dtype)),
      constraint_costs=tile(np.asarray(low, dtype))[None],
      thresholds=np.array([threshold], dtype),
      initial_state=np.asarray(start, np.int32),
      next_states=tile(next_states),
    )

  # The threshold: half the low-battery steps of the cost-optimal policy, computed by jax in
  # float64 where it has it (x64), else in float32.
  fastest = model(float(horizon), jax.dtypes.canonicalize_dtype(np.float64))
  kernel = oj.TransitionSet.point(fastest.transitions, fastest.next_states)
  policy = np.asarray(kernel.optimal_policy(fastest.cost))
  _, low_steps = oj.policy_values(fastest, policy)
  threshold = 0.5 * float(low_steps[0])
  cmdp = oj.validate_cmdp(model(threshold, np.float64))
  dtype = dtype or np.float32
  cast = oj.CMDP(
    transitions=np.asarray(cmdp.transitions, dtype),
    cost=np.asarray(cmdp.cost, dtype),
    constraint_costs=np.asarray(cmdp.constraint_costs, dtype),
    thresholds=np.asarray(cmdp.thresholds, dtype),
    initial_state=np.asarray(start, np.int32),
    next_states=np.asarray(cmdp.next_states, np.int32),
  )
  safe, slack = oj.safest_policy(cast)
  return oj.benchmarks.Benchmark(cmdp=cast, safe_policy=safe, slack=float(slack))
