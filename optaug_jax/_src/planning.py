"""Dynamic programming in (extended) finite-horizon MDPs.

Every function here is written for ONE problem; callers `jax.vmap`. Array axes follow
`[H, S, A, S']` (horizon, states, actions, next states). The greedy fill of a transition
box, which the extended DP calls at every step, is in `box.py`.

Why one file: every pass (backward induction, the forward occupancy, the
policy evaluations) exists in the dense and in the sparse layout, and the two variants sit
next to each other so that a reader can check, pass by pass, that they compute the same
numbers (tests/test_sparse.py checks it); they share the horizon scans and their
unrolling limits.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax import lax

from . import box
from .checking import kernels

# Full float32 accuracy for the small matmuls of the DP (TF32 on GPUs would break the
# sum-to-one of the filled transition rows at ~1e-3).
_HIGHEST = lax.Precision.HIGHEST

# Scans over the horizon are unrolled (straight-line code) up to this H: XLA:CPU pays a
# fixed cost per loop iteration and cannot fuse across iterations; longer horizons keep a
# rolled loop (compile time would grow with H). A constant: `oj.kernels.UNROLL_HORIZON` is
# a read-only copy. Measurements: docs/design.md, "Tuned constants".
UNROLL_HORIZON = 32
# ... and only while H times the largest per-step slice (elements of one problem) stays
# below this: an unrolled step copies its slice into a buffer of its own before a dot, so
# an unrolled scan holds H copies per call and per vmapped seed. A constant, like
# `UNROLL_HORIZON`. Measurements: docs/design.md, "Tuned constants".
UNROLL_MAX_ELEMENTS = 2**21
# ... except the backward pass of a sparse DP over a stationary box (a step axis of length 1,
# as pooled counts give) with at least this many slots per row: it stays rolled. Unrolled,
# every step reads the whole box and XLA:CPU recomputes what the slot fill derives from it
# (its N (N - 1) / 2 pairwise comparisons) in each of the H steps: at 13 slots a DP took 2.5x
# as long unrolled, at 5 slots a rolled one was slower in a solver loop. A constant, like
# `UNROLL_HORIZON`. Measurements: docs/design.md, "Tuned constants".
STATIONARY_ROLL_MIN_SLOTS = 8


def scan_horizon(f, init, xs, *, reverse=False, rolled=False):
  """`lax.scan` over the leading (horizon) axis of `xs`, unrolled when it is short.

  Unrolled when the horizon is at most `UNROLL_HORIZON` and the horizon times the largest
  per-step slice of `xs` is at most `UNROLL_MAX_ELEMENTS` (sizes of one problem: under
  `vmap` the batch axis does not count), unless `rolled`.
  """
  leaves = jax.tree.leaves(xs)
  length = leaves[0].shape[0]
  step_size = max(math.prod(x.shape[1:]) for x in leaves)
  unroll = length <= UNROLL_HORIZON and length * step_size <= UNROLL_MAX_ELEMENTS
  unroll = unroll and not rolled
  return lax.scan(f, init, xs, reverse=reverse, unroll=bool(unroll))


if TYPE_CHECKING:  # pragma: no cover
  from .transition_set import TransitionSet


def _horizon_scan(f, init, arrays, horizon: int, *, reverse=False, roll_stationary=False):
  """`scan_horizon` of `f(carry, per_step)` over the `horizon` steps of `arrays`.

  An array whose leading (step) axis has length 1 while `horizon > 1` is stationary: every
  step receives its one slice, closed over instead of scanned (no `[H, ...]` copy is made,
  and the slice stays in cache). `None` entries pass through as `None`. With
  `roll_stationary`, a scan that closes over a stationary array stays rolled
  (`STATIONARY_ROLL_MIN_SLOTS`).
  """
  fixed = tuple(x is not None and x.shape[0] == 1 and horizon > 1 for x in arrays)
  xs = tuple(None if is_fixed else x for x, is_fixed in zip(arrays, fixed))

  def body(carry, sliced):
    merged = tuple(x[0] if is_fixed else y for x, y, is_fixed in zip(arrays, sliced, fixed))
    return f(carry, merged)

  rolled = roll_stationary and any(fixed)
  return scan_horizon(body, init, xs, reverse=reverse, rolled=rolled)


# --- The sparse layout -------------------------------------------------------------------
# A transition-shaped array `[H, S, A, N]` holds, in slot `n` of row `(h, s, a)`, the entry
# of next state `next_states[h, s, a, n]`; a slot with index -1 is empty (its entries are
# 0). `next_states` (and every transition-shaped array) may have a step axis of length 1:
# the same support (or bounds) at every step. Kernels read `v[next_states]` where the dense
# layout reads `v`, and scatter-add where it multiplies by a matrix, so their work is
# `S A N` per step instead of `S A S'`.


def _sparse_backward(reward, lower, upper, next_states, *, full_transitions: bool = False):
  """`_backward` in the sparse layout: `(value_1 [S], actions [H, S], p, next states,
  next_values [H, S])`.

  `p` is `[H, S, N]` (the greedy rows) or, with `full_transitions`, `[H, S, A, N]`; the
  next states are `[H, S, N]` (greedy rows) or `None` (the caller's `next_states`).

  Each step moves its `[S, A, N]` slices to slot-major `[N, S, A]` (`box.slot_fill`) in
  cache; a stationary (`[1, ...]`) array is moved once, before the scan.
  """
  horizon, num_states = reward.shape[:2]
  boxes: tuple[Any, ...] = (lower, upper, next_states)
  fixed = tuple(x.shape[0] == 1 and horizon > 1 for x in boxes)
  boxes = tuple(jnp.moveaxis(x, -1, 1) if f else x for x, f in zip(boxes, fixed))

  def step(v_next, xs):
    r_h, *slices = xs
    lower_h, upper_h, ns_h = (
      x if f else jnp.moveaxis(x, -1, 0) for x, f in zip(slices, fixed)
    )  # [N, S, A]
    expected, p = box.slot_fill(v_next[box.slot_states(ns_h)], lower_h, upper_h)
    q_values = r_h + expected
    actions = jnp.argmin(q_values, axis=-1)  # first index on ties
    if full_transitions:
      return jnp.min(q_values, axis=-1), (actions, jnp.moveaxis(p, 0, -1), None, v_next)
    rows = lambda x: jnp.take_along_axis(x, actions[None, :, None], axis=2)[..., 0].T
    return jnp.min(q_values, axis=-1), (actions, rows(p), rows(ns_h), v_next)

  v0 = jnp.zeros((num_states,), reward.dtype)
  v1, (actions, p, ns, next_values) = _horizon_scan(
    step,
    v0,
    (reward,) + boxes,
    horizon,
    reverse=True,
    roll_stationary=next_states.shape[-1] >= STATIONARY_ROLL_MIN_SLOTS,
  )
  return v1, actions, p, ns, next_values


def _scatter(weights: jax.Array, next_states: jax.Array, num_states: int) -> jax.Array:
  """`d[t] = sum of weights[...] over the slots whose next state is t`, `[S]` (the sparse
  layout's forward step: a scatter-add where the dense layout has a matrix product)."""
  return (
    jnp.zeros((num_states,), weights.dtype)
    .at[box.slot_states(next_states).reshape(-1)]
    .add(weights.reshape(-1))
  )


def _sparse_forward_deterministic(
  actions, greedy_transitions, greedy_next_states, initial_state, num_actions, dtype
):
  """`_forward_deterministic` in the sparse layout."""
  num_states = actions.shape[1]
  d0 = jax.nn.one_hot(initial_state, num_states, dtype=dtype)

  def step(d, xs):
    p_h, ns_h = xs
    return _scatter(d[:, None] * p_h, ns_h, num_states), d

  _, d = scan_horizon(step, d0, (greedy_transitions, greedy_next_states))  # [H, S]
  q = d[..., None] * jax.nn.one_hot(actions, num_actions, dtype=dtype)
  return q, d


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
  kernel: TransitionSet,
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
    if ns_h is not None:
      return _scatter(q_h[..., None] * p_h, ns_h, num_states), q_h
    return jnp.einsum("sa,sat->t", q_h, p_h, precision=_HIGHEST), q_h

  _, q = _horizon_scan(step, d0, (transitions, policy, next_states), horizon)
  return q


def _backward(reward, lower, upper, *, method: str, full_transitions: bool = False):
  """Backward induction of the paper's eq. (bw-ind).

  Returns `(value_1 [S], actions [H, S], transitions, next_values [H, S])`, where
  `next_values[h]` is `V_{h+1}` (the keys of step h's fill) and `transitions` is the greedy
  slice `[H, S, S']` (all the forward pass needs) or, with `full_transitions`, the
  minimisers of every `(s, a)`, `[H, S, A, S']`. `method`: the fill of `box_minimize`, as
  the `TransitionSet` resolved it (`"blocked"` writes the minimisers of the greedy rows
  only).
  """
  num_states = reward.shape[1]

  def step(v_next, xs):
    r_h, lower_h, upper_h = xs
    if method == "blocked":
      fill = box.blocked_fill(v_next, lower_h, upper_h)
      expected = fill.expected  # [S, A]
    else:
      expected, p = box.box_minimize(v_next, lower_h, upper_h, method=method)  # [S, A, S']
    q_values = r_h + expected
    actions = jnp.argmin(q_values, axis=-1)  # first index on ties
    if method == "blocked":
      if full_transitions:
        p = box.blocked_minimiser(fill, lower_h, upper_h)
      else:
        rows = lambda x: jnp.take_along_axis(x, actions[:, None, None], axis=1)[:, 0]
        p = box.blocked_minimiser(box.take_rows(fill, actions), rows(lower_h), rows(upper_h))
    elif not full_transitions:
      p = jnp.take_along_axis(p, actions[:, None, None], axis=1)[:, 0]
    return jnp.min(q_values, axis=-1), (actions, p, v_next)

  v0 = jnp.zeros((num_states,), reward.dtype)
  v1, (actions, p, next_values) = _horizon_scan(
    step,
    v0,
    (reward, lower, upper),
    reward.shape[0],
    reverse=True,
  )
  return v1, actions, p, next_values


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
  transitions: TransitionSet,
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
  lower, upper, next_states = transitions.lower, transitions.upper, transitions.next_states
  if next_states is not None:
    v1, actions, p_greedy, ns_greedy, next_values = _sparse_backward(
      reward, lower, upper, next_states
    )
    q, d = _sparse_forward_deterministic(
      actions, p_greedy, ns_greedy, initial_state, reward.shape[-1], reward.dtype
    )
  else:
    v1, actions, p_greedy, next_values = _backward(reward, lower, upper, method=transitions.fill)
    q, d = _forward_deterministic(actions, p_greedy, initial_state, reward.shape[-1], reward.dtype)
    ns_greedy = None
  return LMOSolution(
    value=v1[initial_state],
    occupancy=q,
    actions=actions,
    greedy_transitions=p_greedy,
    state_occupancy=d,
    greedy_next_states=ns_greedy,
    next_values=next_values,
  )


def _ordered_fill(actions, order_values, transitions: TransitionSet):
  """The rows `(s, actions[h, s])` of every step filled in the order of `order_values[h]`
  (the greedy fill of `box.py` with those values as its keys): `(p [H, S, S' or N],
  next states [H, S, N] or None)`. No step depends on another.

  Sparse rows are picked and filled slot-major (`[N, H, S]`, as `_sparse_backward` fills
  them), every step at once.
  """
  horizon = actions.shape[0]
  lower, upper, next_states = transitions.lower, transitions.upper, transitions.next_states
  method = transitions.fill
  if next_states is None:

    def rows(x, a):  # [S, A, S'] -> [S, S'], row (s, a[s]): selects, not a gather
      out = x[:, 0]
      for b in range(1, x.shape[1]):
        out = jnp.where((a == b)[:, None], x[:, b], out)
      return out

    def dense_step(carry, xs):
      a_h, w_h, lower_h, upper_h = xs
      return carry, box.box_minimize(w_h, rows(lower_h, a_h), rows(upper_h, a_h), method=method)[1]

    _, p = _horizon_scan(dense_step, None, (actions, order_values, lower, upper), horizon)
    return p, None

  # Sparse: every step's rows at once, slot-major `[N, H, S]` (no scan: a step's rows are
  # `S N` entries, and a scan step per `h` costs more than its fill; a stationary `[1, ...]`
  # array broadcasts). The policy's rows are picked by a chain of selects over the `A`
  # actions (exact, and vectorised where a gather is not) before the slot axis moves first,
  # and the slot-major arrays come out of a `lax.map` over the slots, whose outputs are
  # buffers (the barrier keeps XLA from forwarding its inputs past the loop): fused into
  # the fill instead, the picks, the transposes and the gather of the keys
  # `order_values[h, ns[h, s]]` are evaluated again for each of its `N` fusions (lost_sales,
  # 13 slots: the re-fill 45% cheaper, the same bits).
  steps = jnp.arange(horizon)[:, None] * order_values.shape[-1]
  flat = order_values.reshape(-1)

  def pick(x):  # [H or 1, S, A, N] -> [N, H, S], the entries of the policy's rows
    out = x[:, :, 0]
    for a in range(1, x.shape[2]):
      out = jnp.where((actions == a)[..., None], x[:, :, a], out)
    return jnp.moveaxis(jnp.broadcast_to(out, actions.shape + x.shape[-1:]), -1, 0)

  def slot(rows):
    lo, up, ns = jax.lax.optimization_barrier(rows)
    return lo, up, ns, flat[box.slot_states(ns) + steps]

  lo, up, ns, keys = jax.lax.map(slot, (pick(lower), pick(upper), pick(next_states)))
  _, p = box.slot_fill(keys, lo, up)
  return jnp.moveaxis(p, 0, -1), jnp.moveaxis(ns, 0, -1)


def policy_vertex(
  reward: jax.Array,
  actions: jax.Array,
  order_values: jax.Array,
  transitions: TransitionSet,
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
  p, ns = _ordered_fill(actions, order_values, transitions)
  if transitions.next_states is not None:
    q, d = _sparse_forward_deterministic(
      actions, p, ns, initial_state, reward.shape[-1], reward.dtype
    )
  else:
    q, d = _forward_deterministic(actions, p, initial_state, reward.shape[-1], reward.dtype)
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
  transitions: TransitionSet,
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
  lower, upper, next_states = transitions.lower, transitions.upper, transitions.next_states
  kernels.transition_set(transitions, "extended_value_iteration", check=check)
  chex.assert_rank(reward, 3)
  width = reward.shape[1] if next_states is None else next_states.shape[-1]
  chex.assert_shape(lower, (None,) + reward.shape[1:] + (width,))
  kernels.initial_state(initial_state, reward.shape[1], "extended_value_iteration", check=check)
  if next_states is not None:
    v1, actions, minimisers, _, _ = _sparse_backward(
      reward, lower, upper, next_states, full_transitions=True
    )
  else:
    v1, actions, minimisers, _ = _backward(
      reward, lower, upper, full_transitions=True, method=transitions.fill
    )
  policy = jax.nn.one_hot(actions, reward.shape[2], dtype=reward.dtype)
  return ExtendedSolution(value=v1[initial_state], policy=policy, transitions=minimisers)


def optimistic_policy_evaluation(
  reward: jax.Array, policy: jax.Array, transitions: TransitionSet, *, check: bool = False
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
  fill = transitions.fill

  def step(v_next, xs):
    r_h, pi_h, lower_h, upper_h, ns_h = xs
    if ns_h is None:
      expected = box.box_expectation(v_next, lower_h, upper_h, fill)
    else:
      expected, _ = box.row_fill(v_next[box.slot_states(ns_h)], lower_h, upper_h)
    q_values = r_h + expected
    v = jnp.sum(pi_h * q_values, axis=-1)
    return v, (v, q_values)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, (values, q_values) = _horizon_scan(
    step,
    v0,
    (reward, policy, transitions.lower, transitions.upper, transitions.next_states),
    reward.shape[0],
    reverse=True,
  )
  return values, q_values


def optimal_policy(reward: jax.Array, kernel: TransitionSet, *, check: bool = False) -> jax.Array:
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
    if ns_h is None:
      expected = jnp.matmul(p_h, v_next, precision=_HIGHEST)
    else:
      expected = jnp.sum(p_h * v_next[box.slot_states(ns_h)], axis=-1)
    q_values = r_h + expected
    return jnp.min(q_values, axis=-1), jnp.argmin(q_values, axis=-1)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, actions = _horizon_scan(
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
