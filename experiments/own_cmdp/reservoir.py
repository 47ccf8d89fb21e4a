"""A hydropower reservoir with a flood and a drought budget: a CMDP written as a user would
write one of their own, with two constraints.

Used as `--problems reservoir` by `experiments/episode_cost.py` (and as `--benchmark
experiments/own_cmdp/reservoir.py:reservoir` by the other scripts). Nothing in it was tuned
to make the agents look good or bad: the thresholds come from a fixed rule (half the flood
steps and half the drought steps of the cost-optimal policy), as the delivery robot's
(`delivery.py`) does.

States: the storage `s = 0..levels - 1` (`levels = 200`: S = 200), in units of water; the
reservoir starts half full (`levels // 2`). Actions: the release level `a = 0..4`, a nominal
release of `RELEASES[a]` units (0, 4, 8, 12, 16) per step. Horizon `H = 30` steps.

- Each step an inflow of `INFLOWS` units (0, 3, 6, 9, 15, 24; mean 7.62) arrives with the
  probabilities `INFLOW_PROBS` (0.15, 0.2, 0.25, 0.2, 0.12, 0.08), independently of the
  past. The water released is the nominal release, or all the water there is when less
  (`min(RELEASES[a], s + inflow)`); what exceeds the capacity `levels - 1` after the release
  is spilled: `s' = min(s + inflow - released, levels - 1)`.
- Objective cost: the lost hydropower `1 - (released / 16) * head(s)`, with the head
  `head(s) = 0.25 + 0.75 s / (levels - 1)` growing with the storage, in expectation over the
  inflow: in `[0, 1]`. Power is worth most from a full reservoir, and water left at the end
  is worth nothing: the cost-optimal policy hoards water for about a dozen steps (releasing
  less than the demand), holds the reservoir near full (above the high level, risking a
  spill) and then releases at the full rate to the end.
- Constraint 0, the flood budget: 1 for a step with the storage above the high level
  (`0.8 (levels - 1)`) or ending in a spill, in expectation over the inflow.
- Constraint 1, the drought budget: 1 for a step with the storage below the low level
  (`0.2 (levels - 1)`) or with less water released than the demand (`DEMAND = 4` units,
  release level 1), in expectation over the inflow.

The thresholds: half the expected flood steps and half the expected drought steps of the
cost-optimal (unconstrained) policy (float64: 4.566 and 5.950 of its 9.131 and 11.900).
The exact LP (`oj.solve_lp`, float64) says both bind at the constrained optimum (value
17.613 against the unconstrained 17.360; multipliers 0.0304 and 0.0460): it hoards less,
and holds the reservoir lower. The safe baseline, `oj.safest_policy` (least summed flood
and drought steps: it releases about the mean inflow), keeps both budgets with slack 4.566
(`tests/test_reservoir.py`).

At most 6 next states per row (the sparse layout's slots): one per inflow outcome (fewer
where the capacity merges them).
"""

from __future__ import annotations

import jax
import numpy as np

import optaug_jax as oj

RELEASES = (0, 4, 8, 12, 16)  # units of water per step, by release level
INFLOWS = (0, 3, 6, 9, 15, 24)  # units of water per step
INFLOW_PROBS = (0.15, 0.2, 0.25, 0.2, 0.12, 0.08)
DEMAND = 4  # units: a release below it is a drought step


def reservoir_model(levels: int = 200):
  """The stationary rows and costs on the host, float64: `(targets [S, A, 6], probs
  [S, A, 6], cost [S, A], flood [S, A], drought [S, A])`."""
  s = np.arange(levels)[:, None, None]
  release = np.asarray(RELEASES)[None, :, None]
  inflow = np.asarray(INFLOWS)[None, None, :]
  prob = np.broadcast_to(np.asarray(INFLOW_PROBS), (levels, len(RELEASES), len(INFLOWS)))
  capacity = levels - 1
  released = np.minimum(release, s + inflow)
  after = s + inflow - released  # >= 0
  targets = np.minimum(after, capacity)
  spill = after > capacity
  head = 0.25 + 0.75 * s / capacity
  expect = lambda x: np.sum(prob * x, axis=-1)
  cost = expect(1.0 - released / max(RELEASES) * head)
  high, low = 0.8 * capacity, 0.2 * capacity
  flood = expect((s > high) | spill)
  drought = expect((s < low) | (released < DEMAND))
  return targets, prob, cost, flood, drought


@jax.jit
def policy_values(cmdp: oj.CMDP):
  """`((value, constraint values [I]) of the cost-optimal policy, the safest policy
  (`oj.safest_policy`), (value, constraint values) of it)`, by DP, in one compiled call."""
  free = oj.policy_values(cmdp, cmdp.transition_set().optimal_policy(cmdp.cost))
  safe, _ = oj.safest_policy(cmdp)
  return free, safe, oj.policy_values(cmdp, safe)


def reservoir(levels: int = 200, horizon: int = 30, dtype=None) -> oj.benchmarks.Benchmark:
  """The reservoir's `Benchmark` (see the module docstring)."""
  targets, probs, cost, flood, drought = reservoir_model(levels)
  next_states, p = oj.benchmarks.sparse_rows(targets, probs, width=len(INFLOWS))
  tile = lambda x: np.broadcast_to(x, (horizon,) + x.shape)
  start = levels // 2
  budgets = np.stack([flood, drought])

  def model(thresholds, dtype):
    return oj.CMDP(
      transitions=tile(np.asarray(p, dtype)),
      cost=tile(np.asarray(cost, dtype)),
      constraint_costs=np.broadcast_to(
        np.asarray(budgets, dtype)[:, None], (2, horizon) + cost.shape
      ),
      thresholds=np.asarray(thresholds, dtype),
      initial_state=np.asarray(start, np.int32),
      next_states=tile(next_states),
    )

  # The thresholds: half the flood and drought steps of the cost-optimal policy, computed by
  # jax in float64 where it has it (x64), else in float32.
  free = model([float(horizon)] * 2, jax.dtypes.canonicalize_dtype(np.float64))
  (_, steps), _, _ = policy_values(free)
  cmdp = oj.validate_cmdp(model(0.5 * np.asarray(steps, np.float64), np.float64))
  dtype = dtype or np.float32
  cast = oj.CMDP(
    transitions=np.asarray(cmdp.transitions, dtype),
    cost=np.asarray(cmdp.cost, dtype),
    constraint_costs=np.asarray(cmdp.constraint_costs, dtype),
    thresholds=np.asarray(cmdp.thresholds, dtype),
    initial_state=np.asarray(start, np.int32),
    next_states=np.asarray(cmdp.next_states, np.int32),
  )
  _, safe, (_, values) = policy_values(cast)  # oj.safest_policy's policy, and its slack:
  slack = np.min(np.asarray(cast.thresholds) - np.asarray(values))
  return oj.benchmarks.Benchmark(cmdp=cast, safe_policy=safe, slack=float(slack))
