"""Dynamic programming in (extended) finite-horizon MDPs.

Every function here is written for ONE problem; callers `jax.vmap`. Array axes follow
`[H, S, A, S']` (horizon, states, actions, next states).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax import lax

# Full float32 accuracy for the small matmuls of the DP (TF32 on GPUs would break the
# sum-to-one of the filled transition rows at ~1e-3).
_HIGHEST = lax.Precision.HIGHEST

from . import checks

# Scans over the horizon are unrolled (straight-line code) up to this H. XLA:CPU pays a
# fixed cost per loop iteration and cannot fuse across iterations; for the extended DP of
# S=10 A=4 H=10 at 256 vmapped seeds, full unrolling halves the LMO in a solver loop
# (23.5 -> 11.8 us per seed, docs/results/README.md), while a partial unroll (5 of 10) is
# slower than none. Above the limit compile time would grow with H, so longer horizons
# keep a rolled loop. A constant: `oj.kernels.UNROLL_HORIZON` is a read-only copy.
UNROLL_HORIZON = 32


def scan_horizon(f, init, xs, *, reverse=False):
  """`lax.scan` over the leading (horizon) axis of `xs`, unrolled when it is short."""
  length = jax.tree.leaves(xs)[0].shape[0]
  return lax.scan(f, init, xs, reverse=reverse, unroll=bool(length <= UNROLL_HORIZON))

if TYPE_CHECKING:  # pragma: no cover
  from .cmdp import CMDP


class ExtendedSolution(NamedTuple):
  """Solution of an extended (optimistic) MDP."""

  value: jax.Array  # [] optimal value at the initial state
  policy: jax.Array  # [H, S, A] deterministic (one-hot rows)
  transitions: jax.Array  # [H, S, A, S'] minimising transitions, inside the box


class LMOSolution(NamedTuple):
  """One extended DP as a linear minimisation oracle (no `[H, S, A, S']` tensor kept)."""

  value: jax.Array  # [] optimal value at the initial state
  occupancy: jax.Array  # [H, S, A] occupancy of the greedy policy under its transitions
  actions: jax.Array  # [H, S] greedy actions
  greedy_transitions: jax.Array  # [H, S, S'] minimising transitions at (s, a*(s))
  state_occupancy: jax.Array  # [H, S]


def occupancy(
    transitions: jax.Array, policy: jax.Array, initial_state: jax.typing.ArrayLike, *,
    check: bool = False,
) -> jax.Array:
  """State-action occupancy measure `q_h(s, a) = P[s_h = s, a_h = a]`.

  The forward recursion of the paper's eq. (jin-recurstion) and eq. (decomp-occ).

  Args:
    transitions: `[H, S, A, S']` transition probabilities.
    policy: `[H, S, A]` non-stationary stochastic policy.
    initial_state: integer scalar, the initial state `s_1`.
    check: also check traced arguments through `checkify` (see `oj.checked`); concrete
      arguments are always checked: rows are distributions, the initial state is valid.

  Returns:
    `[H, S, A]` occupancy measure; each `q_h` sums to 1.
  """
  chex.assert_rank([transitions, policy], [4, 3])
  horizon, num_states, num_actions, _ = transitions.shape
  chex.assert_shape(policy, (horizon, num_states, num_actions))
  checks.initial_state(initial_state, num_states, "occupancy", check=check)
  checks.distribution("transitions", transitions, "occupancy", check=check)
  checks.distribution("policy", policy, "occupancy", check=check)
  dtype = jnp.result_type(transitions.dtype, policy.dtype)
  d0 = jax.nn.one_hot(initial_state, num_states, dtype=dtype)

  def step(d, xs):
    p_h, pi_h = xs
    q_h = d[:, None] * pi_h
    return jnp.einsum("sa,sat->t", q_h, p_h, precision=_HIGHEST), q_h

  _, q = scan_horizon(step, d0, (transitions, policy))
  return q


def policy_values(cmdp: CMDP, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Exact expected costs of `policy` in `cmdp`.

  Args:
    cmdp: an (unbatched) `CMDP`.
    policy: `[H, S, A]` policy.

  Returns:
    `(cost_value, constraint_values)`: `V^pi(c, p)` (scalar) and `V^pi(d_i, p)` `[I]`.
  """
  q = occupancy(cmdp.transitions, policy, cmdp.initial_state)
  cost_value = jnp.sum(cmdp.cost * q)
  constraint_values = jnp.einsum("ihsa,hsa->i", cmdp.constraint_costs, q)
  return cost_value, constraint_values


def _precedence(values: jax.Array) -> jax.Array:
  """`M[j, k] = 1` iff next state `j` comes before `k` in ascending (value, index) order.

  A strict total order: ties are broken by the lower index, so the result does not depend
  on a sort's stability (CPU and GPU agree).
  """
  idx = jnp.arange(values.shape[0])
  vj, vk = values[:, None], values[None, :]
  before = (vj < vk) | ((vj == vk) & (idx[:, None] < idx[None, :]))
  return before.astype(values.dtype)


# Ways to write the shared-order greedy fill (see `box_minimize`); `experiments/benchmark.py`
# times them side by side. Every kernel that fills takes `fill=` (default `DEFAULT_FILL`,
# chosen by measurement; a constant, never reassigned).
FILL_METHODS = ("matmul", "sort", "scan", "unrolled")
DEFAULT_FILL = "matmul"


def check_fill(fill: str) -> str:
  """Returns `fill` if it names a fill formulation, else raises `ValueError`."""
  if fill not in FILL_METHODS:
    raise ValueError(f"fill: expected one of {FILL_METHODS}, got {fill!r}")
  return fill


def _sorted_order(values: jax.Array) -> jax.Array:
  """Indices of `values` in ascending order, ties by index (a stable sort)."""
  return jnp.argsort(values, stable=True)


def _fill_sorted(free, capacity_sorted, method):
  """Mass given to each next state in sorted order, `[..., S']` (sorted axis last)."""
  if method == "sort":
    before = jnp.cumsum(capacity_sorted, axis=-1) - capacity_sorted
    return jnp.clip(free[..., None] - before, 0.0, capacity_sorted)
  if method == "scan":
    def step(remaining, cap_j):
      give = jnp.clip(remaining, 0.0, cap_j)
      return remaining - give, give
    _, gives = lax.scan(step, free, jnp.moveaxis(capacity_sorted, -1, 0))
    return jnp.moveaxis(gives, 0, -1)
  # "unrolled": the same sequential fill as straight-line code (fuses into one loop).
  gives = []
  remaining = free
  for j in range(capacity_sorted.shape[-1]):
    give = jnp.clip(remaining, 0.0, capacity_sorted[..., j])
    remaining = remaining - give
    gives.append(give)
  return jnp.stack(gives, axis=-1)


def box_minimize(
    values: jax.Array, lower: jax.Array, upper: jax.Array, *, method: str = DEFAULT_FILL,
) -> tuple[jax.Array, jax.Array]:
  """`min_p p . values` over `{p in simplex, lower <= p <= upper}` for every row.

  Greedy fill (the inner minimum of the paper's eq. (bw-ind)): start at `lower`, give the
  free mass `1 - sum(lower)` to the next states in ascending order of `values` (ties by
  index), each up to `upper - lower`. The order is computed once and shared by every row.

  Args:
    values: `[S']` values of the next states.
    lower: `[..., S']` lower bounds (rows with `sum(lower) <= 1 <= sum(upper)`).
    upper: `[..., S']` upper bounds.
    method: how the fill is written (same result up to rounding; default `DEFAULT_FILL`,
      chosen by `experiments/benchmark.py`; one of `FILL_METHODS`):
      `"matmul"`: the mass a next state receives is `clip(free - capacity before it, 0,
        capacity)`, "capacity before" a matmul with the 0/1 precedence matrix (no sort);
      `"sort"`: stable argsort, gather, cumsum, scatter back;
      `"scan"`: `lax.scan` over the sorted next states carrying the free mass;
      `"unrolled"`: the same sequential fill, unrolled at trace time.

  Returns:
    `(minimum [...], minimiser [..., S'])`.
  """
  if method not in FILL_METHODS:
    raise ValueError(f"method: expected one of {FILL_METHODS}, got {method!r}")
  capacity = upper - lower
  free = 1.0 - jnp.sum(lower, axis=-1)
  if method == "matmul":
    capacity_before = jnp.matmul(capacity, _precedence(values), precision=_HIGHEST)
    p = lower + jnp.clip(free[..., None] - capacity_before, 0.0, capacity)
  else:
    order = _sorted_order(values)
    give_sorted = _fill_sorted(free, jnp.take(capacity, order, axis=-1), method)
    inverse = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0]))
    p = lower + jnp.take(give_sorted, inverse, axis=-1)
  return jnp.matmul(p, values, precision=_HIGHEST), p


def _backward(reward, lower, upper, *, full_transitions: bool = False,
              method: str = DEFAULT_FILL):
  """Backward induction of the paper's eq. (bw-ind).

  Returns `(value_1 [S], actions [H, S], transitions)`, where `transitions` is the greedy
  slice `[H, S, S']` (all the forward pass needs) or, with `full_transitions`, the
  minimisers of every `(s, a)`, `[H, S, A, S']`. `method`: the fill of `box_minimize`.
  """
  num_states = reward.shape[1]

  def step(v_next, xs):
    r_h, lower_h, upper_h = xs
    expected, p = box_minimize(v_next, lower_h, upper_h, method=method)  # [S, A], [S, A, S']
    q_values = r_h + expected
    actions = jnp.argmin(q_values, axis=-1)  # first index on ties
    if not full_transitions:
      p = jnp.take_along_axis(p, actions[:, None, None], axis=1)[:, 0]
    return jnp.min(q_values, axis=-1), (actions, p)

  v0 = jnp.zeros((num_states,), reward.dtype)
  v1, (actions, p) = scan_horizon(step, v0, (reward, lower, upper), reverse=True)
  return v1, actions, p


def _forward_deterministic(actions, greedy_transitions, initial_state, num_actions, dtype):
  """Occupancy of a deterministic policy given only its transitions at `(s, a*(s))`."""
  num_states = actions.shape[1]
  d0 = jax.nn.one_hot(initial_state, num_states, dtype=dtype)

  def step(d, p_h):
    return jnp.matmul(d, p_h, precision=_HIGHEST), d

  _, d = scan_horizon(step, d0, greedy_transitions)  # [H, S]
  q = d[..., None] * jax.nn.one_hot(actions, num_actions, dtype=dtype)
  return q, d


def extended_lmo(
    reward: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
    initial_state: jax.typing.ArrayLike,
    *,
    fill: str = DEFAULT_FILL,
) -> LMOSolution:
  """Linear minimisation over the occupancy measures of the box: one extended DP.

  `min_{q in Q(box)} reward . q`, where `Q(box)` holds the occupancy measures of every
  policy under every transition kernel in `[lower, upper]` (the set `Z` of the paper's
  Appendix C, projected on `q`). The backward pass is `extended_value_iteration`'s; the
  forward pass recomputes the occupancy of the greedy (deterministic) policy from its
  transitions at `(s, a*(s))` only. This is the oracle of every inner solver.

  Args:
    reward: `[H, S, A]` linear costs (any sign).
    lower: `[H, S, A, S']` lower transition bounds.
    upper: `[H, S, A, S']` upper bounds; each row needs `sum(lower) <= 1 <= sum(upper)`.
    initial_state: integer scalar.
    fill: the greedy-fill formulation (`FILL_METHODS`).

  Returns:
    `LMOSolution(value, occupancy, actions, greedy_transitions, state_occupancy)`;
    `value == sum(reward * occupancy)` up to rounding.
  """
  v1, actions, p_greedy = _backward(reward, lower, upper, method=fill)
  q, d = _forward_deterministic(
      actions, p_greedy, initial_state, reward.shape[-1], reward.dtype
  )
  return LMOSolution(
      value=v1[initial_state],
      occupancy=q,
      actions=actions,
      greedy_transitions=p_greedy,
      state_occupancy=d,
  )


def extended_value_iteration(
    reward: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
    initial_state: jax.typing.ArrayLike,
    *,
    fill: str = DEFAULT_FILL,
    check: bool = False,
) -> ExtendedSolution:
  """Optimal policy and transitions of an extended MDP (costs are minimised).

  Solves `min_{pi, p'} V^pi(reward, p')` over all policies and all transitions with
  `p'_h(.|s,a)` in `{simplex, lower <= p <= upper}`, by the backward induction of the
  paper's eq. (bw-ind) with the shared-order greedy fill (`box_minimize`). Ties between
  actions go to the lowest index.

  Args:
    reward: `[H, S, A]` per-step costs (any sign).
    lower: `[H, S, A, S']` lower bounds on transitions.
    upper: `[H, S, A, S']` upper bounds; each row needs `sum(lower) <= 1 <= sum(upper)`.
    initial_state: integer scalar.
    fill: the greedy-fill formulation (`FILL_METHODS`).
    check: also check traced arguments through `checkify` (see `oj.checked`); concrete
      arguments are always checked: a non-empty box, a valid initial state.

  Returns:
    `ExtendedSolution(value, policy, transitions)`.
  """
  chex.assert_rank([reward, lower, upper], [3, 4, 4])
  chex.assert_equal_shape([lower, upper])
  chex.assert_shape(lower, reward.shape + (reward.shape[1],))
  checks.initial_state(initial_state, reward.shape[1], "extended_value_iteration",
                       check=check)
  checks.box(lower, upper, "extended_value_iteration", check=check)
  v1, actions, transitions = _backward(reward, lower, upper, full_transitions=True,
                                       method=fill)
  policy = jax.nn.one_hot(actions, reward.shape[2], dtype=reward.dtype)
  return ExtendedSolution(value=v1[initial_state], policy=policy, transitions=transitions)


def optimistic_policy_evaluation(
    reward: jax.Array, policy: jax.Array, lower: jax.Array, upper: jax.Array, *,
    fill: str = DEFAULT_FILL,
) -> tuple[jax.Array, jax.Array]:
  """Optimistic evaluation of a FIXED policy: `min_{p' in box} V^pi(reward, p')`.

  Backward induction `Q_h(s,a) = r_h(s,a) + min_{p in box} p . V_{h+1}`,
  `V_h(s) = sum_a pi_h(a|s) Q_h(s,a)` (Efroni et al. 2020's optimistic policy evaluation).

  Args:
    reward: `[H, S, A]` costs.
    policy: `[H, S, A]` policy.
    lower: `[H, S, A, S']` lower transition bounds.
    upper: `[H, S, A, S']` upper transition bounds.
    fill: the greedy-fill formulation (`FILL_METHODS`).

  Returns:
    `(values [H, S], q_values [H, S, A])`; `values[0, s_1]` is the optimistic value.
  """

  def step(v_next, xs):
    r_h, pi_h, lower_h, upper_h = xs
    expected, _ = box_minimize(v_next, lower_h, upper_h, method=fill)
    q_values = r_h + expected
    v = jnp.sum(pi_h * q_values, axis=-1)
    return v, (v, q_values)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, (values, q_values) = scan_horizon(step, v0, (reward, policy, lower, upper),
                                       reverse=True)
  return values, q_values


def optimal_policy(reward: jax.Array, transitions: jax.Array) -> jax.Array:
  """Deterministic policy minimising `V^pi(reward, transitions)` (plain backward induction).

  Args:
    reward: `[H, S, A]` costs.
    transitions: `[H, S, A, S']` known transitions.

  Returns:
    `[H, S, A]` one-hot policy; ties go to the lowest action index.
  """

  def step(v_next, xs):
    r_h, p_h = xs
    q_values = r_h + jnp.matmul(p_h, v_next, precision=_HIGHEST)
    return jnp.min(q_values, axis=-1), jnp.argmin(q_values, axis=-1)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, actions = scan_horizon(step, v0, (reward, transitions), reverse=True)
  return jax.nn.one_hot(actions, reward.shape[2], dtype=reward.dtype)


def policy_from_occupancy(q: jax.Array) -> jax.Array:
  """Paper's eq. (retrieve-pi): `pi_h(a|s) = q_h(s,a) / sum_a' q_h(s,a')`, uniform where 0.

  A NaN in `q` propagates to the policy (it is never hidden behind the uniform fallback).
  """
  total = jnp.sum(q, axis=-1, keepdims=True)
  uniform = jnp.full_like(q, 1.0 / q.shape[-1])
  unreached = total == 0
  return jnp.where(unreached, uniform, q / jnp.where(unreached, 1.0, total))
