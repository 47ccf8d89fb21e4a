"""Benchmark CMDPs with a known strictly feasible baseline. Host side, never jitted.

Why one file: seven constructors of 60-120 lines each, their registry and
two shared helpers (the float64 NumPy model for the LP reference, and the conversion that
checks the baseline's slack); each constructor reads on its own.

Each constructor returns a `Benchmark(cmdp, safe_policy, slack)`: a validated `CMDP`, a
baseline policy `[H, S, A]` and its true slack `min_i (alpha_i - V^pi(d_i, p)) > 0` (the
paper's Assumption "Strictly feasible policy"), ready for `optaug(safe_policy=...,
slack=...)`. In every benchmark the single constraint binds at the optimum: the constrained
optimum (`solve_lp`) is strictly worse than the unconstrained one and its multiplier is
positive.

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

Baselines are LP-optimal policies of the same CMDP with a fifth of the threshold (so their
slack is four fifths of the threshold when that smaller constraint binds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import validation
from .cmdp import (
  CMDP,
  check_safe_policy,
  merge_repeated_next_states,
  random_cmdp,
  safest_policy,
  validate_cmdp,
)
from .lp import solve_lp
from .transition_set import TransitionSet

BENCHMARKS: dict[str, Callable[..., Benchmark]] = {}


def register_benchmark(name: str) -> Callable:
  """Decorator registering a benchmark constructor (keyword arguments only) under `name`."""

  def register(fn):
    if name in BENCHMARKS:
      raise ValueError(f"name: benchmark {name!r} is already registered")
    BENCHMARKS[name] = fn
    return fn

  return register


class Benchmark(NamedTuple):
  """A benchmark CMDP with a strictly feasible baseline policy."""

  cmdp: CMDP  # validated, in the requested dtype
  safe_policy: jax.Array  # [H, S, A] strictly feasible baseline
  slack: float  # its true slack min_i (alpha_i - V^pi(d_i, p)) > 0


def _numpy_cmdp(
  kernel: TransitionSet,
  cost: np.ndarray,
  constraint_cost: np.ndarray,
  threshold: float,
  initial_state: int,
) -> CMDP:
  """A float64 CMDP with NumPy fields (for the LP reference) and one constraint; `kernel`:
  the transitions in their layout, a point `TransitionSet` of host arrays."""
  next_states = kernel.next_states
  # NumPy fields (the kernels receive JAX arrays; the host code reads these as NumPy).
  fields: dict[str, Any] = dict(
    transitions=np.asarray(kernel.kernel, np.float64),
    cost=np.asarray(cost, np.float64),
    constraint_costs=np.asarray(constraint_cost, np.float64)[None],
    thresholds=np.array([threshold], np.float64),
    initial_state=np.asarray(initial_state, np.int32),
    next_states=None if next_states is None else np.asarray(next_states, np.int32),
  )
  return validate_cmdp(CMDP(**fields))


def _finish(model: CMDP, baseline: np.ndarray, dtype) -> Benchmark:
  """Converts a float64 NumPy CMDP and baseline to JAX arrays of `dtype`; checks the slack."""
  dtype = dtype or jnp.zeros(()).dtype
  cmdp = validate_cmdp(
    CMDP(
      transitions=jnp.asarray(model.transitions, dtype=dtype),
      cost=jnp.asarray(model.cost, dtype=dtype),
      constraint_costs=jnp.asarray(model.constraint_costs, dtype=dtype),
      thresholds=jnp.asarray(model.thresholds, dtype=dtype),
      initial_state=jnp.asarray(model.initial_state, dtype=jnp.int32),
      next_states=(
        None if model.next_states is None else jnp.asarray(model.next_states, dtype=jnp.int32)
      ),
    )
  )
  policy = jnp.asarray(baseline, dtype=dtype)
  return Benchmark(cmdp=cmdp, safe_policy=policy, slack=check_safe_policy(cmdp, policy))


def _lp_baseline(model: CMDP) -> np.ndarray:
  """LP-optimal policy `[H, S, A]` of `model` with a fifth of its thresholds."""
  return solve_lp(model._replace(thresholds=model.thresholds / 5.0)).policy


def _min_cost_policy(cost: np.ndarray, kernel: TransitionSet) -> np.ndarray:
  """Deterministic policy `[H, S, A]` minimising `V^pi(cost, p)` (float64 backward induction
  on host arrays; `kernel`: `p` in its layout, a point `TransitionSet`).

  Ties go to the lowest action index, as in `planning.optimal_policy`.
  """
  transitions, next_states = kernel.kernel, kernel.next_states
  horizon, num_states, num_actions = cost.shape
  policy = np.zeros((horizon, num_states, num_actions))
  value = np.zeros(num_states)
  for h in reversed(range(horizon)):
    if next_states is None:
      q_values = cost[h] + transitions[h] @ value
    else:
      q_values = cost[h] + np.sum(transitions[h] * value[np.maximum(next_states[h], 0)], -1)
    actions = np.argmin(q_values, axis=-1)
    policy[h, np.arange(num_states), actions] = 1.0
    value = q_values[np.arange(num_states), actions]
  return policy


@register_benchmark("media_streaming")
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
  model = _numpy_cmdp(
    TransitionSet.point(np.broadcast_to(p, (horizon,) + p.shape)),
    np.broadcast_to(cost, (horizon,) + cost.shape),
    np.broadcast_to(constraint, (horizon,) + constraint.shape),
    horizon / 2.0,
    0,
  )
  return _finish(model, _lp_baseline(model), dtype)


@register_benchmark("factored")
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
  model = _numpy_cmdp(
    TransitionSet.point(np.broadcast_to(p, (horizon,) + p.shape)),
    np.broadcast_to(cost, (horizon,) + cost.shape),
    np.broadcast_to(constraint, (horizon,) + constraint.shape),
    horizon / 2.0,
    0,
  )
  return _finish(model, _lp_baseline(model), dtype)


def factored_unconstrained_value(horizon: int) -> float:
  """The hand-derived unconstrained optimum of `factored(horizon=horizon)` (see there)."""
  return float(horizon // 3) + (0.0, 2.0 / 3.0, 1.0)[horizon % 3]


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
    raise ValueError(f"size: default hazards need size >= 3, got {size}")
  band = [(r, size - 1 - r) for r in range(size - 1)]
  return tuple(band) + ((size - 1, size - 2),)


def sparse_rows(
  targets: np.ndarray, probs: np.ndarray, width: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
  """The sparse layout of rows given as candidate moves: `(next_states, probabilities)`.

  `targets [..., M]` (int) and `probs [..., M]` list each row's possible moves (repeats
  and zero probabilities allowed); the result merges repeats (`merge_repeated_next_states`),
  drops zeros and sorts each row's next states, in `width` slots (default: the largest
  row), -1 in empty slots.
  """
  targets, probs = np.asarray(targets), np.asarray(probs, np.float64)
  moves = probs > 0
  next_states, merged = merge_repeated_next_states(
    np.where(moves, targets, -1), np.where(moves, probs, 0.0)
  )
  widest = int((next_states >= 0).sum(-1).max(initial=0))
  width = widest if width is None else width
  if width < widest:
    raise ValueError(f"width: {width} slots, but a row has {widest} next states")
  pad = [(0, 0)] * (targets.ndim - 1) + [(0, max(width - targets.shape[-1], 0))]
  next_states = np.pad(next_states, pad, constant_values=-1)[..., :width]
  return next_states, np.pad(merged, pad)[..., :width]


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


@register_benchmark("gridworld")
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
  if size < 2:
    raise ValueError(f"size: must be >= 2, got {size}")
  if not 0.0 <= slip <= 1.0:
    raise ValueError(f"slip: must lie in [0, 1], got {slip}")
  horizon = 3 * size if horizon is None else int(horizon)
  if horizon < 1:
    raise ValueError(f"horizon: must be >= 1, got {horizon}")
  hazards = (
    default_hazards(size) if hazards is None else tuple((int(r), int(c)) for r, c in hazards)
  )
  for cell in hazards:
    if not (0 <= cell[0] < size and 0 <= cell[1] < size):
      raise ValueError(f"hazards: cell {cell} is outside the {size}x{size} grid")
    if cell in ((0, 0), (size - 1, size - 1)):
      raise ValueError(f"hazards: cell {cell} is the start or the goal")

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


# Service rates of `queue`'s actions (slow, medium, fast) and their energy costs.
QUEUE_RATES = (0.2, 0.5, 0.8)
QUEUE_ENERGY = (0.0, 0.5, 1.0)


@register_benchmark("queue")
def queue(
  *,
  capacity: int = 199,
  arrival: float = 0.5,
  horizon: int = 50,
  initial_length: int | None = None,
  budget_fraction: float = 0.3,
  sparse: bool | None = None,
  dtype=None,
) -> Benchmark:
  """A single-server queue with service-rate control: short queues on an energy budget.

  States are the queue lengths `0..capacity` (`S = capacity + 1`). Each step one job
  arrives with probability `arrival` (dropped at capacity) and, if the queue is not empty,
  one job leaves with the probability of the chosen service rate (actions 0, 1, 2: rates
  `QUEUE_RATES` = 0.2, 0.5, 0.8). The length goes up by one (an arrival, no departure),
  down by one (a departure, no arrival) or stays: at most 3 next states per row, the
  sparse shape of a birth-death chain (where `gridworld` has 5 in two dimensions).
  Objective cost: the holding cost `length / capacity` in `[0, 1]`. Constraint cost: the
  energy of the rate, `QUEUE_ENERGY` = 0, 0.5, 1 per step. Threshold: `budget_fraction *
  H`; the unconstrained optimum serves fast whenever the queue is not empty (energy about
  `H`), so the constraint binds. The start is `initial_length` (default: half full).
  Baseline: always the slow rate (energy 0, slack = the threshold).

  Args:
    capacity: the largest queue length (`>= 1`).
    arrival: arrival probability in `[0, 1]`.
    horizon: `H`.
    initial_length: the queue length at the start; default `capacity // 2`.
    budget_fraction: the threshold as a fraction of `H`, in `(0, 1]`.
    sparse: the layout (`True`: 3 slots per row; `False` dense; `None`: sparse when
      `capacity >= 100`).
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    `Benchmark(cmdp, safe_policy [H, S, 3], slack)`.
  """
  validation.check_int("capacity", capacity, low=1)
  if not 0.0 <= arrival <= 1.0:
    raise ValueError(f"arrival: must lie in [0, 1], got {arrival}")
  validation.check_int("horizon", horizon, low=1)
  if not 0.0 < budget_fraction <= 1.0:
    raise ValueError(f"budget_fraction: must lie in (0, 1], got {budget_fraction}")
  capacity, horizon = int(capacity), int(horizon)
  start = capacity // 2 if initial_length is None else int(initial_length)
  if not 0 <= start <= capacity:
    raise ValueError(f"initial_length: must lie in [0, {capacity}], got {initial_length}")
  sparse = capacity >= 100 if sparse is None else bool(sparse)
  num_states = capacity + 1
  length = np.arange(num_states)[:, None]  # [S, 1]
  rate = np.asarray(QUEUE_RATES)[None, :]  # [1, 3]
  arrive = np.where(length < capacity, arrival, 0.0)
  leave = np.where(length > 0, rate, 0.0)
  up, down = arrive * (1.0 - leave), leave * (1.0 - arrive)
  shape = (num_states, len(QUEUE_RATES))
  targets = np.stack(
    [
      np.broadcast_to(np.minimum(length + 1, capacity), shape),
      np.broadcast_to(np.maximum(length - 1, 0), shape),
      np.broadcast_to(length, shape),
    ],
    axis=-1,
  )
  weights = np.stack([up, down, 1.0 - up - down], axis=-1)
  if sparse:
    ns, p = sparse_rows(targets, weights, width=3)
  else:
    ns, p = None, np.zeros(shape + (num_states,))
    s_idx, a_idx = np.meshgrid(np.arange(num_states), np.arange(shape[1]), indexing="ij")
    for m in range(3):
      np.add.at(p, (s_idx, a_idx, targets[..., m]), weights[..., m])
  cost = np.broadcast_to(length / capacity, shape)
  energy = np.broadcast_to(np.asarray(QUEUE_ENERGY)[None, :], shape)
  tile = lambda x: np.broadcast_to(x, (horizon,) + x.shape)
  model = _numpy_cmdp(
    TransitionSet.point(tile(p), None if ns is None else tile(ns)),
    tile(cost),
    tile(energy),
    budget_fraction * horizon,
    start,
  )
  baseline = np.zeros((horizon, num_states, len(QUEUE_RATES)))
  baseline[..., 0] = 1.0
  return _finish(model, baseline, dtype)


# Demand distribution of `inventory` on 0..5 units per step (Bura et al. 2022).
INVENTORY_DEMAND = (0.3, 0.2, 0.2, 0.2, 0.05, 0.05)


@register_benchmark("inventory")
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
  validation.check_int("horizon", horizon, low=1)
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


@register_benchmark("lost_sales")
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
  validation.check_int("capacity", capacity, low=1)
  validation.check_int("max_demand", max_demand, low=1)
  validation.check_int("horizon", horizon, low=1)
  sizes = np.asarray(order_sizes)
  if sizes.ndim != 1 or sizes.size < 1 or not np.issubdtype(sizes.dtype, np.integer):
    raise ValueError(f"order_sizes: expected a non-empty tuple of ints, got {order_sizes!r}")
  if np.any(sizes < 0) or np.max(sizes) < 1:
    raise ValueError(f"order_sizes: must be >= 0 with one positive, got {order_sizes!r}")
  if not 0.0 < budget_fraction <= 1.0:
    raise ValueError(f"budget_fraction: must lie in (0, 1], got {budget_fraction}")
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


@register_benchmark("random_family")
def random_family(
  *,
  seed: int = 0,
  num_states: int = 10,
  num_actions: int = 4,
  horizon: int = 10,
  num_constraints: int = 1,
  concentration: float = 1.0,
  threshold_fraction: float = 0.5,
  dtype=None,
) -> Benchmark:
  """Member `seed` of the default random family of `random_cmdp`, with its safe policy.

  The CMDP is `random_cmdp(PRNGKey(seed), ...)`: transitions `Dirichlet(concentration)`,
  objective and constraint costs uniform on `[0, 1]`, thresholds at `threshold_fraction`
  of the way from the safe policy's constraint values to the unconstrained optimum's (so
  the constraints bind). The baseline is `safe_policy` (minimises the summed constraint
  costs by DP); its slack is checked on the host.

  Args:
    seed: which member of the family (the PRNG seed).
    num_states: `S`.
    num_actions: `A`.
    horizon: `H`.
    num_constraints: `I`.
    concentration: Dirichlet parameter of every transition row.
    threshold_fraction: see `random_cmdp`.
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    A `Benchmark`.
  """
  cmdp = validate_cmdp(
    random_cmdp(
      jax.random.PRNGKey(seed),
      num_states=num_states,
      num_actions=num_actions,
      horizon=horizon,
      num_constraints=num_constraints,
      concentration=concentration,
      threshold_fraction=threshold_fraction,
      dtype=dtype,
    )
  )
  policy, _ = safest_policy(cmdp)
  return Benchmark(cmdp=cmdp, safe_policy=policy, slack=check_safe_policy(cmdp, policy))


def make_benchmark(name: str, **kwargs) -> Benchmark:
  """The benchmark `BENCHMARKS[name](**kwargs)`; raises `ValueError` for an unknown name."""
  if name not in BENCHMARKS:
    raise ValueError(f"name: unknown benchmark {name!r}; known: {sorted(BENCHMARKS)}")
  return BENCHMARKS[name](**kwargs)
