"""The race-track gridworld of the OptAug-CMDP paper: hazards against the fastest line."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..errors import ArgumentError
from ..lp import solve_lp
from ..transition_set import TransitionSet
from ._common import (
  Benchmark,
  _finish,
  _lp_baseline,
  _min_cost_policy,
  _numpy_cmdp,
  sparse_rows,
)

# Actions of `gridworld`: (row, column) steps of up, right, down, left.
GRID_MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))


def default_hazards(size: int) -> tuple[tuple[int, int], ...]:
  """The default hazard cells `(row, col)` of `gridworld(size)`.

  The anti-diagonal `row + col = size - 1` except its bottom-left end `(size - 1, 0)`
  (a gravel band with one gap), plus the cell `(size - 1, size - 2)` left of the goal (a
  gravel trap before the finish line). Every shortest path from `(0, 0)` to the goal
  crosses the band or the trap. For `size >= 5` the safe line (down the left edge, along
  the bottom row, up one row before the trap, right, down to the goal) is 2 steps longer
  than the shortest one. For `size <= 4` the hazards cut the goal off (the only safe
  policies never finish): on grids this small no hazard set can force a detour, as every
  set either leaves a hazard-free shortest path or cuts the goal off (checked over all
  hazard sets of the 3x3 and 4x4 grids).
  """
  if size < 3:
    raise ArgumentError("size", f"default hazards need size >= 3, got {size}")
  band = [(r, size - 1 - r) for r in range(size - 1)]
  return tuple(band) + ((size - 1, size - 2),)


def _grid_model(
  size: int, slip: float, hazards: Iterable[tuple[int, int]], horizon: int, sparse: bool = False
):
  """Transitions `[H, S, A, S']` (or `[H, S, A, 5]` slots and their next states when
  `sparse`), cost `[H, S, A]`, hazard cost `[H, S, A]` of the grid.

  Returns `(p, cost, hazard, next_states)`; `next_states` is `None` unless `sparse`.
  """
  num_states = size * size
  goal = num_states - 1
  rows, cols = np.divmod(np.arange(num_states), size)
  moves = np.array(GRID_MOVES)
  r = rows[:, None] + moves[None, :, 0]
  c = cols[:, None] + moves[None, :, 1]
  inside = (r >= 0) & (r < size) & (c >= 0) & (c < size)
  dest = np.where(inside, r * size + c, np.arange(num_states)[:, None])  # [S, 4]
  dest[goal] = goal
  # Candidate moves of (s, a): the intended one (1 - slip), each direction (slip / 4).
  targets = np.concatenate(
    [
      np.broadcast_to(dest[:, :, None], (num_states, 4, 1)),
      np.broadcast_to(dest[:, None, :], (num_states, 4, 4)),
    ],
    axis=-1,
  )
  weights = np.broadcast_to(np.array([1.0 - slip] + [slip / 4.0] * 4), (num_states, 4, 5)).copy()
  next_states = None
  if sparse:
    next_states, p = sparse_rows(targets, weights, width=5)
  else:
    p = np.zeros((num_states, 4, num_states))
    s_idx, a_idx = np.meshgrid(np.arange(num_states), np.arange(4), indexing="ij")
    for m in range(5):
      np.add.at(p, (s_idx, a_idx, targets[..., m]), weights[..., m])
  cost = np.ones((num_states, 4))
  cost[goal] = 0.0
  hazard = np.zeros((num_states, 4))
  for r, c in hazards:
    hazard[r * size + c] = 1.0

  def tile(x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(x, (horizon,) + x.shape)

  return tile(p), tile(cost), tile(hazard), None if next_states is None else tile(next_states)


# `gridworld` computes its default budget and baseline by LP (HiGHS) up to this many
# occupancy variables (H S A; size 11 at the default horizon), by dynamic programming above:
# the budget is then half the hazard visits of the fastest policy, ties between equally
# fast actions broken towards fewer hazards (a cost of `_GRID_TIE_WEIGHT` per hazard step),
# and the baseline the policy of fewest hazard visits.
GRID_LP_MAX_VARIABLES = 20_000
_GRID_TIE_WEIGHT = 1e-6


def _policy_value(cost: np.ndarray, kernel: TransitionSet, policy) -> float:
  """`V^pi(cost, p)` from state 0 (float64 forward pass on host arrays; `kernel`: `p` in
  its layout, a point `TransitionSet`)."""
  transitions, next_states = kernel.kernel, kernel.next_states
  horizon, num_states, _ = cost.shape
  d: np.ndarray = np.zeros(num_states)
  d[0] = 1.0
  total = 0.0
  for h in range(horizon):
    q = d[:, None] * policy[h]
    total += float(np.sum(q * cost[h]))
    if next_states is None:
      d = np.einsum("sa,sat->t", q, transitions[h])
    else:
      d = np.bincount(
        np.maximum(next_states[h], 0).ravel(),
        weights=(q[..., None] * transitions[h]).ravel(),
        minlength=num_states,
      )
  return total


def gridworld(
  size: int = 5,
  *,
  slip: float = 0.1,
  hazards: Iterable[tuple[int, int]] | None = None,
  horizon: int | None = None,
  budget: float | None = None,
  sparse: bool | None = None,
  dtype=None,
) -> Benchmark:
  """Slippery race-track grid: reach the far corner fast, with few hazard visits.

  States are the cells of a `size x size` grid, index `row * size + col`; the start is
  `(0, 0)` (top left), the goal `(size - 1, size - 1)` is absorbing. Actions 0..3 are up,
  right, down, left: with probability `1 - slip` the agent moves that way, with probability
  `slip` in a uniformly random one of the 4 directions; a move into a wall stays in place.
  Objective cost 1 per step in every non-goal cell (0 at the goal), so the objective is
  the expected time to finish (capped at `H`). Constraint cost 1 per step in a hazard
  cell, for every action: the constraint bounds the expected number of hazard visits.

  The default hazards (`default_hazards`) make every shortest path cross a hazard; for
  `size >= 5` a safe line 2 steps longer exists (for `size <= 4` no hazard set can force a
  detour, and the default cuts the goal off). Default budget: half of the hazard visits of
  the unconstrained optimum (the least among the cost-optimal policies), so the
  constraint binds; if that optimum visits no hazard, budget 1 (the constraint cannot
  bind). Baseline: the LP-optimal policy for `budget / 5` if that is feasible, else the
  policy minimising the expected hazard visits (backward induction). Above
  `GRID_LP_MAX_VARIABLES` occupancy variables (size > 11 at the default horizon) both come
  from dynamic programming instead of LPs: the budget from the fastest policy (ties
  towards fewer hazards), the baseline the policy of fewest hazard visits.

  Args:
    size: side of the grid (`>= 2`; `>= 3` with the default hazards).
    slip: probability in `[0, 1]` of a uniformly random direction.
    hazards: `(row, col)` cells; neither the start nor the goal. Default:
      `default_hazards(size)`.
    horizon: `H`; default `3 * size`.
    budget: the threshold (expected hazard visits allowed), in `[0, H]`; default above.
    sparse: the transitions' layout: `True` the sparse one (`CMDP.next_states`, 5 slots
      per row: a cell reaches itself and its 4 neighbours), `False` dense `[H, S, A, S]`;
      `None` (default): sparse when `size > 10` (S > 100), where the dense array would
      grow with `S^2` (3.75e9 entries at size 50).
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    `Benchmark(cmdp, safe_policy [H, size**2, 4], slack)`.

  Raises:
    ValueError: on bad arguments, or if the baseline's slack is not positive.
  """
  horizon, hazards = _checked_grid(size, slip, hazards, horizon)
  sparse = size > 10 if sparse is None else bool(sparse)
  p, cost, hazard, ns = _grid_model(size, slip, hazards, horizon, sparse)
  kernel = TransitionSet.point(p, ns)
  if horizon * size * size * 4 > GRID_LP_MAX_VARIABLES:
    # Too large for the LPs in seconds (gridworld(20): 92 s each): dynamic programming.
    fastest = _min_cost_policy(cost + _GRID_TIE_WEIGHT * hazard, kernel)
    if budget is None:
      visits = _policy_value(hazard, kernel, fastest)
      budget = visits / 2.0 if visits > 1e-9 else 1.0
    model = _numpy_cmdp(kernel, cost, hazard, float(budget), 0)
    return _finish(model, _min_cost_policy(hazard, kernel), dtype)
  if budget is None:
    unconstrained = _numpy_cmdp(kernel, cost, hazard, float(horizon), 0)
    best = solve_lp(unconstrained).value
    # Least hazard visits among the cost-optimal policies: minimise the hazard cost
    # subject to the objective cost at most its optimum (roles of the costs swapped).
    swapped = _numpy_cmdp(kernel, hazard, cost, min(best + 1e-7, float(horizon)), 0)
    visits = solve_lp(swapped).value
    budget = visits / 2.0 if visits > 1e-9 else 1.0
  model = _numpy_cmdp(kernel, cost, hazard, float(budget), 0)
  try:
    baseline = _lp_baseline(model)
  except ValueError:  # budget / 5 infeasible: fall back on the least hazardous policy
    baseline = _min_cost_policy(hazard, kernel)
  return _finish(model, baseline, dtype)


def _checked_grid(size: int, slip: float, hazards, horizon):
  """`gridworld`'s arguments checked: `(H, hazard cells)` with their defaults."""
  if size < 2:
    raise ArgumentError("size", f"must be >= 2, got {size}")
  if not 0.0 <= slip <= 1.0:
    raise ArgumentError("slip", f"must lie in [0, 1], got {slip}")
  horizon = 3 * size if horizon is None else int(horizon)
  if horizon < 1:
    raise ArgumentError("horizon", f"must be >= 1, got {horizon}")
  hazards = (
    default_hazards(size) if hazards is None else tuple((int(r), int(c)) for r, c in hazards)
  )
  for cell in hazards:
    if not (0 <= cell[0] < size and 0 <= cell[1] < size):
      raise ArgumentError("hazards", f"cell {cell} is outside the {size}x{size} grid")
    if cell in ((0, 0), (size - 1, size - 1)):
      raise ArgumentError("hazards", f"cell {cell} is the start or the goal")
  return horizon, hazards
