"""The inventory CMDPs: Bura et al.'s (2022) small one, and a lost-sales model of 200 stock
levels (sparse)."""

from __future__ import annotations

import math

import numpy as np

from ..checking import arguments
from ..cmdp import (
  merge_repeated_next_states,
)
from ..errors import ArgumentError
from ..transition_set import TransitionSet
from ._common import (
  Benchmark,
  _finish,
  _lp_baseline,
  _numpy_cmdp,
  sparse_rows,
)

# Demand distribution of `inventory` on 0..5 units per step (Bura et al. 2022).
INVENTORY_DEMAND = (0.3, 0.2, 0.2, 0.2, 0.05, 0.05)


def inventory(*, horizon: int = 7, dtype=None) -> Benchmark:
  """Inventory control (Bura et al. 2022, "DOPE"), `S = 6`, `A = 6`, one constraint.

  Source: the authors' public code, archanabura/DOPE-DoublyOptimisticPessimisticExploration,
  `Codes/InventoryControl/model-in.py` (read, not run; no code copied). Their run: `H = 7`,
  `K = 10^6` episodes (`NUMBER_EPISODES`), `delta = 0.01`.

  State `s` is the stock, 0..5 units; the episode starts with an empty store (state 0).
  Action `a` orders `min(a, 5 - s)` units, so that the stock after ordering is
  `y = min(s + a, 5)`. A demand `D` of 0..5 units arrives with probabilities
  `INVENTORY_DEMAND` = 0.3, 0.2, 0.2, 0.2, 0.05, 0.05; `min(D, y)` units are sold, unmet
  demand is lost, and the next stock is `max(y - D, 0)` (so every `D >= y` lands in state 0:
  the rows repeat that next state, merged as `merge_repeated_next_states` does). The same
  at every step.

  Costs, scaled to `[0, 1]` as their script does (each divided by its maximum over the
  available `(s, a)`):

  - objective: their reward is the expected revenue `0.08 E[min(D, y)]` (8/100 per unit
    sold; their sum `sum_d P(s'|s,a) f(d)` over the demands with `y - d >= 0` is this
    expectation, since `P(0|s,a) = P(D >= y)`), divided by its maximum `0.08 x 1.65`
    (`y = 5`), and maximised. Here the objective cost is `1 - reward` (the scaled revenue
    lost against a full store), minimised: `V = H - V_reward`, the same optimal policies and
    the same regrets;
  - constraint: the ordering cost `4 + 2 x` for an order of `x > 0` units (0 for none) plus
    the holding cost `y` of the stock after ordering, divided by its maximum 19 (5 units
    ordered into an empty store). Threshold `alpha = H / 2` (their `CONSTRAINT`).

  Conversion of the action set: their state `s` offers only the orders `0..5 - s` (the
  free capacity), so the number of actions varies with the state; the CMDP format needs
  `A` actions everywhere, so here every state has the 6 actions and an order beyond the
  free capacity is cut to it: in state `s`, the actions `a >= 5 - s` are copies (same
  costs, same transitions) of the full order. Copies change neither the distributions of
  (stock, order) that policies can reach nor the optimum; a learner does have more
  `(s, a)` pairs to visit (36 against their 21). Their horizon convention is ours (`H`
  steps `h = 0..H-1`, each with its costs, the start distribution at step 0).

  The revenue needs stock and the stock costs budget: the unconstrained optimum keeps the
  store full at every step (objective 0, constraint value 4.505 for `H = 7`), above
  `alpha = 3.5`, so the constraint binds (`V* = 0.33468`, multiplier 0.921). Baseline:
  the LP-optimal policy for `alpha / 5` (their `C_b = CONSTRAINT / 5`); its slack is
  `4 alpha / 5` (2.8 for `H = 7`, objective 5.4443).

  Args:
    horizon: `H` (theirs: 7).
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    `Benchmark(cmdp, safe_policy [H, 6, 6], slack)`.
  """
  arguments.check_int("horizon", horizon, low=1)
  horizon = int(horizon)
  demand = np.asarray(INVENTORY_DEMAND)
  num_states = len(demand)  # stock 0..5; demand 0..5
  stock, action = np.meshgrid(np.arange(num_states), np.arange(num_states), indexing="ij")
  order = np.minimum(action, num_states - 1 - stock)  # [S, A], cut to the free capacity
  level = stock + order  # y, the stock after ordering
  # Candidate next stocks of each (s, a), one per demand; repeats of 0 merged.
  targets = np.maximum(level[..., None] - np.arange(num_states), 0)
  ns, slots = merge_repeated_next_states(targets, np.broadcast_to(demand, targets.shape))
  p = np.zeros((num_states, num_states, num_states))
  s_idx, a_idx = np.meshgrid(np.arange(num_states), np.arange(num_states), indexing="ij")
  for n in range(num_states):
    taken = ns[..., n] >= 0
    p[s_idx[taken], a_idx[taken], ns[..., n][taken]] = slots[..., n][taken]
  sales = np.minimum(np.arange(num_states)[None, None, :], level[..., None])  # [S, A, D]
  revenue = np.sum(demand * sales, axis=-1)  # E[min(D, y)] (the price 0.08 cancels)
  spend = np.where(order > 0, 4.0 + 2.0 * order, 0.0) + level
  tile = lambda x: np.broadcast_to(x, (horizon,) + x.shape)
  model = _numpy_cmdp(
    TransitionSet.point(tile(p)),
    tile(1.0 - revenue / revenue.max()),
    tile(spend / spend.max()),
    horizon / 2.0,
    0,
  )
  return _finish(model, _lp_baseline(model), dtype)


def lost_sales(
  *,
  capacity: int = 199,
  order_sizes: tuple[int, ...] = (0, 4, 8, 16),
  max_demand: int = 12,
  horizon: int = 20,
  budget_fraction: float = 0.3,
  dtype=None,
) -> Benchmark:
  """A lost-sales inventory on an ordering budget: `S = capacity + 1` stock levels, sparse.

  State `s` is the stock, `0..capacity`; the episode starts with an empty store. Action
  `a` orders `order_sizes[a]` units (cut to the free capacity), so the stock after ordering
  is `y = min(s + order, capacity)`. A demand `D ~ Binomial(max_demand, 1/2)` arrives; unmet
  demand is lost and the next stock is `max(y - D, 0)`: `max_demand + 1` slots per row
  (the demands that empty the store land in state 0 together, merged by
  `sparse_rows`). The same at every step.

  Objective cost (in `[0, 1]`): half the expected stock left over, `E[(y - D)_+] /
  capacity`, plus half the expected lost sales, `E[(D - y)_+] / max_demand`. Constraint
  cost: the ordering cost `0.2 + 0.8 order / max(order_sizes)` of a positive order (0 for
  none), with threshold `budget_fraction * H`. Without the budget one would order about
  the mean demand at every step; the default budget (`0.3 H`) buys an order of 8 at
  roughly every other step, so the constraint binds. Baseline: never order (constraint
  value 0, slack = the threshold).

  Written for the cost benchmark of the inner solve (`experiments/episode_cost.py`): a
  sparse CMDP of a few hundred states with a handful of actions, as a user's own model
  would be; not from a publication.

  Args:
    capacity: the largest stock (`>= 1`).
    order_sizes: the order of each action (non-negative ints, the first usually 0).
    max_demand: the demand's largest value (`>= 1`).
    horizon: `H`.
    budget_fraction: the threshold as a fraction of `H`, in `(0, 1]`.
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    `Benchmark(cmdp, safe_policy [H, S, A], slack)` (the baseline orders the smallest
    size: nothing with the default sizes).
  """
  arguments.check_int("capacity", capacity, low=1)
  arguments.check_int("max_demand", max_demand, low=1)
  arguments.check_int("horizon", horizon, low=1)
  sizes = np.asarray(order_sizes)
  if sizes.ndim != 1 or sizes.size < 1 or not np.issubdtype(sizes.dtype, np.integer):
    raise ArgumentError("order_sizes", f"expected a non-empty tuple of ints, got {order_sizes!r}")
  if np.any(sizes < 0) or np.max(sizes) < 1:
    raise ArgumentError("order_sizes", f"must be >= 0 with one positive, got {order_sizes!r}")
  if not 0.0 < budget_fraction <= 1.0:
    raise ArgumentError("budget_fraction", f"must lie in (0, 1], got {budget_fraction}")
  capacity, max_demand, horizon = int(capacity), int(max_demand), int(horizon)
  num_states = capacity + 1
  demands = np.arange(max_demand + 1)
  demand = np.asarray([math.comb(max_demand, int(d)) for d in demands], np.float64)
  demand /= demand.sum()
  stock = np.arange(num_states)[:, None]  # [S, 1]
  order = np.minimum(sizes[None, :], capacity - stock)  # [S, A], cut to the free capacity
  level = stock + order  # y
  targets = np.maximum(level[..., None] - demands, 0)  # [S, A, D + 1]
  ns, p = sparse_rows(targets, np.broadcast_to(demand, targets.shape), width=max_demand + 1)
  left = np.sum(demand * np.maximum(level[..., None] - demands, 0), axis=-1)
  lost = np.sum(demand * np.maximum(demands - level[..., None], 0), axis=-1)
  cost = 0.5 * left / capacity + 0.5 * lost / max_demand
  spend = np.where(order > 0, 0.2 + 0.8 * order / sizes.max(), 0.0)
  tile = lambda x: np.broadcast_to(x, (horizon,) + x.shape)
  model = _numpy_cmdp(
    TransitionSet.point(tile(p), tile(ns)), tile(cost), tile(spend), budget_fraction * horizon, 0
  )
  baseline = np.zeros((horizon, num_states, sizes.size))
  baseline[..., int(np.argmin(sizes))] = 1.0
  return _finish(model, baseline, dtype)
