"""Dynamic programming in (extended) finite-horizon MDPs.

Every function here is written for ONE problem; callers `jax.vmap`. Array axes follow
`[H, S, A, W]` (horizon, states, actions, a row's entries: the `S` next states of the dense
layout or the `N` slots of the sparse one). Each recursion (backward induction, the forward
passes, the evaluations) is written once, over the horizon scans here; what one step does to
its rows in a layout (the greedy fill, the row pick, the forward push) is the set's layout's
(`layouts/`, `TransitionSet.layout`). Nothing here tests the layout; tests/test_sparse.py
checks that the two give the same numbers. The functions take a `TransitionSet`; they are
typed with the protocol of what they read of it (`layouts.TransitionSetLike`), so that the
set, whose methods call them, sits above this module.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from .checking import kernels
from .horizon import horizon_scan, scan_horizon
from .layouts import TransitionSetLike


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
  greedy_transitions: jax.Array  # [H, S, S'] minimising transitions at (s, a*(s)) ([H, S, N]
  #                                 slots in the sparse layout)
  state_occupancy: jax.Array  # [H, S]
  greedy_next_states: jax.Array | None = None  # [H, S, N] int32, the next state of each slot
  #                                 of `greedy_transitions` (sparse layout only; None dense)
  next_values: jax.Array | None = None  # [H, S] the values V_{h+1} whose order filled step
  #                                 h's rows (0 at the last step): with `actions`, the
  #                                 vertex's name in any box (`policy_vertex`)


def occupancy(
  kernel: TransitionSetLike,
  policy: jax.Array,
  initial_state: jax.typing.ArrayLike,
  *,
  check: bool = False,
) -> jax.Array:
  """State-action occupancy measure `q_h(s, a) = P[s_h = s, a_h = a]`.

  The forward recursion of the paper's eq. (jin-recurstion) and eq. (decomp-occ).

  Args:
    kernel: the known transitions, a point `TransitionSet` (`TransitionSet.point(p,
      next_states)`): `[H, S, A, S']` probabilities (a step axis of length 1: the same at
      every step), or `[H, S, A, N]` slots of its `next_states`.
    policy: `[H, S, A]` non-stationary stochastic policy.
    initial_state: integer scalar, the initial state `s_1`.
    check: also check traced arguments through `checkify` (see `oj.checked`); concrete
      arguments are always checked: rows are distributions, the initial state is valid.

  Returns:
    `[H, S, A]` occupancy measure; each `q_h` sums to 1.
  """
  transitions, next_states = kernel.kernel, kernel.next_states
  kernels.transition_set(kernel, "occupancy", check=check)
  chex.assert_rank(policy, 3)
  horizon, num_states, num_actions = policy.shape
  chex.assert_shape(transitions, (None, num_states, num_actions, None))
  kernels.initial_state(initial_state, num_states, "occupancy", check=check)
  kernels.distribution("policy", policy, "occupancy", check=check)
  dtype = jnp.result_type(transitions.dtype, policy.dtype)
  d0 = jax.nn.one_hot(initial_state, num_states, dtype=dtype)

  def step(d, xs):
    p_h, pi_h, ns_h = xs
    q_h = d[:, None] * pi_h
    return kernel.layout.push(q_h, p_h, ns_h), q_h

  _, q = horizon_scan(step, d0, (transitions, policy, next_states), horizon)
  return q


def _backward(reward, transitions: TransitionSetLike, *, full_transitions: bool = False):
  """Backward induction of the paper's eq. (bw-ind).

  Returns `(value_1 [S], actions [H, S], transitions, next states, next_values [H, S])`,
  where `next_values[h]` is `V_{h+1}` (the keys of step h's fill) and `transitions` is the
  greedy slice `[H, S, W]` (all the forward pass needs; with its slots' next states `[H, S,
  N]` in the sparse layout, else `None`) or, with `full_transitions`, the minimisers of
  every `(s, a)`, `[H, S, A, W]` (next states `None`: the set's).
  """
  layout = transitions.layout
  horizon, num_states = reward.shape[:2]
  arrays, to_step, rolled = layout.backward_arrays(transitions.lower, transitions.upper, horizon)

  def step(v_next, xs):
    r_h, *slices = xs
    slices = to_step(slices)
    expected, filled = layout.fill_step(v_next, slices)
    q_values = r_h + expected
    actions = jnp.argmin(q_values, axis=-1)  # first index on ties
    rows = (
      layout.minimisers(filled, slices)
      if full_transitions
      else layout.rows(filled, actions, slices)
    )
    return jnp.min(q_values, axis=-1), (actions, rows, v_next)

  v0 = jnp.zeros((num_states,), reward.dtype)
  v1, (actions, (p, ns), next_values) = horizon_scan(
    step, v0, (reward,) + arrays, horizon, reverse=True, roll_stationary=rolled
  )
  return v1, actions, p, ns, next_values


def _forward_deterministic(layout, actions, p_greedy, ns_greedy, initial_state, num_actions, dtype):
  """Occupancy of a deterministic policy given only its transitions at `(s, a*(s))` (and
  their next states, sparse layout): `(q [H, S, A], d [H, S])`."""
  num_states = actions.shape[1]
  d0 = jax.nn.one_hot(initial_state, num_states, dtype=dtype)

  def step(d, xs):
    p_h, ns_h = xs
    return layout.push_rows(d, p_h, ns_h), d

  _, d = scan_horizon(step, d0, (p_greedy, ns_greedy))  # [H, S]
  q = d[..., None] * jax.nn.one_hot(actions, num_actions, dtype=dtype)
  return q, d


@jax.named_scope("extended_dp")
def extended_lmo(
  reward: jax.Array,
  transitions: TransitionSetLike,
  initial_state: jax.typing.ArrayLike,
  *,
  check: bool = False,
) -> LMOSolution:
  """Linear minimisation over the occupancy measures of the box: one extended DP.

  `min_{q in Q(box)} reward . q`, where `Q(box)` holds the occupancy measures of every
  policy under every transition kernel in `[lower, upper]` (the set `Z` of the paper's
  Appendix C, projected on `q`). The backward pass is `extended_value_iteration`'s; the
  forward pass recomputes the occupancy of the greedy (deterministic) policy from its
  transitions at `(s, a*(s))` only. This is the oracle of every inner solver.

  Args:
    reward: `[H, S, A]` linear costs (any sign).
    transitions: the box, a `TransitionSet`: `lower`, `upper` `[H, S, A, S']` (a step axis
      of length 1: the same box at every step), or `[H, S, A, N]` slots of its
      `next_states` (int, -1: an empty slot with bounds 0); each row needs `sum(lower) <= 1
      <= sum(upper)`. Its `fill` is the dense layout's greedy-fill formulation
      (`FILL_METHODS`); the sparse layout fills each row over its own `N` slots
      (`box.slot_fill`) whatever the fill is.
    initial_state: integer scalar.
    check: also check a traced box through `checkify` (see `oj.checked`); a concrete box
      is always checked (`TransitionSet`: a kernel in every row, next states in range).

  Returns:
    `LMOSolution(value, occupancy, actions, greedy_transitions, state_occupancy,
    greedy_next_states)`; `value == sum(reward * occupancy)` up to rounding.
  """
  kernels.transition_set(transitions, "extended_lmo", check=check)
  v1, actions, p_greedy, ns_greedy, next_values = _backward(reward, transitions)
  q, d = _forward_deterministic(
    transitions.layout, actions, p_greedy, ns_greedy, initial_state, reward.shape[-1], reward.dtype
  )
  return LMOSolution(
    value=v1[initial_state],
    occupancy=q,
    actions=actions,
    greedy_transitions=p_greedy,
    state_occupancy=d,
    greedy_next_states=ns_greedy,
    next_values=next_values,
  )


@jax.named_scope("refill")
def policy_vertex(
  reward: jax.Array,
  actions: jax.Array,
  order_values: jax.Array,
  transitions: TransitionSetLike,
  initial_state: jax.typing.ArrayLike,
  *,
  check: bool = False,
) -> LMOSolution:
  """A vertex of the extended MDP named by its policy and its fill order, in a given box.

  A vertex `extended_lmo` returns is a deterministic policy and, at each `(h, s)`, the
  greedy fill of the row `(s, a)` in the order of the next step's values
  (`LMOSolution.next_values`). The same policy with the same orders fills the rows of any
  other box: a feasible point of that box, so its Lagrangian `reward' . q` bounds
  `extended_lmo(reward').value` from above for every `reward'`. In the box of the DP that
  returned them, the same vertex (same numbers up to rounding). Work: one fill of the
  policy's rows per step (`1/A` of a DP's) and the forward pass; no backward recursion.

  Args:
    reward: `[H, S, A]` linear costs (for `value`).
    actions: `[H, S]` int, the policy's action at each step and state.
    order_values: `[H, S]` the keys of step `h`'s fill (`LMOSolution.next_values`).
    transitions, initial_state, check: as in `extended_lmo`.

  Returns:
    `LMOSolution` of the vertex (`value = reward . occupancy`; its `actions` and
    `next_values` are the given ones).
  """
  kernels.transition_set(transitions, "policy_vertex", check=check)
  layout = transitions.layout
  p, ns = layout.ordered_fill(actions, order_values, transitions.lower, transitions.upper)
  q, d = _forward_deterministic(
    layout, actions, p, ns, initial_state, reward.shape[-1], reward.dtype
  )
  return LMOSolution(
    value=jnp.sum(reward * q),
    occupancy=q,
    actions=actions,
    greedy_transitions=p,
    state_occupancy=d,
    greedy_next_states=ns,
    next_values=order_values,
  )


def extended_value_iteration(
  reward: jax.Array,
  transitions: TransitionSetLike,
  initial_state: jax.typing.ArrayLike,
  *,
  check: bool = False,
) -> ExtendedSolution:
  """Optimal policy and transitions of an extended MDP (costs are minimised).

  Solves `min_{pi, p'} V^pi(reward, p')` over all policies and all transitions with
  `p'_h(.|s,a)` in `{simplex, lower <= p <= upper}`, by the backward induction of the
  paper's eq. (bw-ind) with the shared-order greedy fill (`box_minimize`). Ties between
  actions go to the lowest index.

  Args:
    reward: `[H, S, A]` per-step costs (any sign).
    transitions: the box, a `TransitionSet` (as in `extended_lmo`); each row needs
      `sum(lower) <= 1 <= sum(upper)`.
    initial_state: integer scalar.
    check: also check traced arguments through `checkify` (see `oj.checked`); concrete
      arguments are always checked: a non-empty box, a valid initial state.

  Returns:
    `ExtendedSolution(value, policy, transitions)`; `transitions` is `[H, S, A, N]` in the
    sparse layout (slots of the set's `next_states`).
  """
  kernels.transition_set(transitions, "extended_value_iteration", check=check)
  chex.assert_rank(reward, 3)
  chex.assert_shape(transitions.lower, (None,) + reward.shape[1:] + (transitions.width,))
  kernels.initial_state(initial_state, reward.shape[1], "extended_value_iteration", check=check)
  v1, actions, minimisers, _, _ = _backward(reward, transitions, full_transitions=True)
  policy = jax.nn.one_hot(actions, reward.shape[2], dtype=reward.dtype)
  return ExtendedSolution(value=v1[initial_state], policy=policy, transitions=minimisers)


def optimistic_policy_evaluation(
  reward: jax.Array, policy: jax.Array, transitions: TransitionSetLike, *, check: bool = False
) -> tuple[jax.Array, jax.Array]:
  """Optimistic evaluation of a FIXED policy: `min_{p' in box} V^pi(reward, p')`.

  Backward induction `Q_h(s,a) = r_h(s,a) + min_{p in box} p . V_{h+1}`,
  `V_h(s) = sum_a pi_h(a|s) Q_h(s,a)` (Efroni et al. 2020's optimistic policy evaluation).

  Args:
    reward: `[H, S, A]` costs.
    policy: `[H, S, A]` policy.
    transitions: the box, a `TransitionSet` (as in `extended_lmo`).
    check: as in `extended_lmo`.

  Returns:
    `(values [H, S], q_values [H, S, A])`; `values[0, s_1]` is the optimistic value.
  """
  kernels.transition_set(transitions, "optimistic_policy_evaluation", check=check)

  def step(v_next, xs):
    r_h, pi_h, lower_h, upper_h, ns_h = xs
    q_values = r_h + transitions.layout.expectation(v_next, lower_h, upper_h, ns_h)
    v = jnp.sum(pi_h * q_values, axis=-1)
    return v, (v, q_values)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, (values, q_values) = horizon_scan(
    step,
    v0,
    (reward, policy, transitions.lower, transitions.upper, transitions.next_states),
    reward.shape[0],
    reverse=True,
  )
  return values, q_values


class SoftSolution(NamedTuple):
  """The entropy-regularised (soft) optimistic backup of a box (`soft_value_iteration`)."""

  values: jax.Array  # [H, S] soft values V_h(s); values[0, s_1] is the soft optimum
  q_values: jax.Array  # [H, S, A] r_h(s, a) + min_{p in box} p . V_{h+1}
  policy: jax.Array  # [H, S, A] softmax(-q_values / temperature) over the actions


def soft_value_iteration(
  reward: jax.Array,
  transitions: TransitionSetLike,
  temperature: jax.typing.ArrayLike,
  *,
  check: bool = False,
) -> SoftSolution:
  """Entropy-regularised optimistic backward induction over a box (costs are minimised):

      Q_h(s, a) = r_h(s, a) + min_{p in box_h(s, a)} p . V_{h+1},
      V_h(s) = -tau log sum_a exp(-Q_h(s, a) / tau),   pi_h(a | s) ∝ exp(-Q_h(s, a) / tau),

  `V_{H+1} = 0`: the soft-min of the Q-values (a log-sum-exp, stable for any `tau > 0`),
  which tends to `extended_value_iteration`'s hard min as `tau -> 0`. The box's inner
  minimum is the layout's greedy fill (dense or sparse), as in every other recursion.
  Differentiable in `reward`, the box and `temperature`.

  Args:
    reward: `[H, S, A]` costs.
    transitions: the box, a `TransitionSet` (a point set: the known kernel).
    temperature: `tau > 0` (may be traced).
    check: as in `extended_lmo`.

  Returns:
    `SoftSolution(values [H, S], q_values [H, S, A], policy [H, S, A])`.
  """
  kernels.transition_set(transitions, "soft_value_iteration", check=check)
  tau = jnp.asarray(temperature, reward.dtype)

  def step(v_next, xs):
    r_h, lower_h, upper_h, ns_h = xs
    q_values = r_h + transitions.layout.expectation(v_next, lower_h, upper_h, ns_h)
    v = -tau * jax.nn.logsumexp(-q_values / tau, axis=-1)
    return v, (v, q_values)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, (values, q_values) = horizon_scan(
    step,
    v0,
    (reward, transitions.lower, transitions.upper, transitions.next_states),
    reward.shape[0],
    reverse=True,
  )
  return SoftSolution(values, q_values, jax.nn.softmax(-q_values / tau, axis=-1))


def box_weighted_expectation(
  occupancy: jax.Array, next_values: jax.Array, transitions: TransitionSetLike
) -> jax.Array:
  """`sum_{h, s, a} occupancy_h(s, a) min_{p in box_h(s, a)} p . next_values[h]`.

  The box's part of the Lagrangian of an extended LP at a primal point `occupancy [H, S,
  A]` and its dual, the values `next_values [H, S]` (`V_{h+1}`, as `LMOSolution.next_values`
  holds them): its derivative in `lower` and `upper` (by `jax.grad`, with the other two
  held fixed) is that of the LP's optimal value at a differentiable point, each row's fill
  differentiated in its own bounds and weighted by the occupancy of its `(h, s, a)`. Unlike
  the derivative of the DP's value itself, it does not depend on which of several tied
  optimal vertices the DP returns (`solve_inner(gradient="envelope")` uses it at `q*`).
  """

  def step(total, xs):
    q_h, v_next, lower_h, upper_h, ns_h = xs
    expected = transitions.layout.expectation(v_next, lower_h, upper_h, ns_h)
    return total + jnp.sum(q_h * expected), None

  total, _ = horizon_scan(
    step,
    jnp.zeros((), occupancy.dtype),
    (occupancy, next_values, transitions.lower, transitions.upper, transitions.next_states),
    occupancy.shape[0],
  )
  return total


def optimal_policy(
  reward: jax.Array, kernel: TransitionSetLike, *, check: bool = False
) -> jax.Array:
  """Deterministic policy minimising `V^pi(reward, kernel)` (plain backward induction).

  Args:
    reward: `[H, S, A]` costs.
    kernel: the known transitions, a point `TransitionSet` (as in `occupancy`).
    check: as in `extended_lmo`.

  Returns:
    `[H, S, A]` one-hot policy; ties go to the lowest action index.
  """
  kernels.transition_set(kernel, "optimal_policy", check=check)

  def step(v_next, xs):
    r_h, p_h, ns_h = xs
    q_values = r_h + kernel.layout.kernel_expectation(p_h, v_next, ns_h)
    return jnp.min(q_values, axis=-1), jnp.argmin(q_values, axis=-1)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, actions = horizon_scan(
    step, v0, (reward, kernel.kernel, kernel.next_states), reward.shape[0], reverse=True
  )
  return jax.nn.one_hot(actions, reward.shape[2], dtype=reward.dtype)


def policy_from_occupancy(q: jax.Array, fallback: jax.Array | None = None) -> jax.Array:
  """Paper's eq. (retrieve-pi): `pi_h(a|s) = q_h(s,a) / sum_a' q_h(s,a')` where state `s` is
  reached at step `h`; there the ratio is 0/0 and the paper leaves the policy free (it does
  not change `q`): `fallback [H, S, A]` where given, else uniform.

  A NaN in `q` propagates to the policy (it is never hidden behind the fallback).
  """
  total = jnp.sum(q, axis=-1, keepdims=True)
  unreached = total == 0
  if fallback is None:
    fallback = jnp.full_like(q, 1.0 / q.shape[-1])
  return jnp.where(unreached, fallback.astype(q.dtype), q / jnp.where(unreached, 1.0, total))
