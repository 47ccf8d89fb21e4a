"""The sparse layout: a row holds `N` slots, slot `n` of row `(h, s, a)` is next state
`next_states[h, s, a, n]` (-1: an empty slot, whose entries are 0).

`next_states` (and every transition-shaped array) may have a step axis of length 1: the
same support (or bounds) at every step. Kernels read `v[next_states]` where the dense layout
reads `v`, and scatter-add where it multiplies by a matrix, so their work is `S A N` per
step instead of `S A S'`. A step's rows are filled slot-major (`[N, S, A]`, `box.slot_fill`)
in cache.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import box
from ..errors import ArgumentError
from ..numerics import MAX_EPISODES

# A sparse DP over a stationary box (a step axis of length 1, as pooled counts give) with at
# least this many slots per row keeps its backward pass rolled. Unrolled, every step reads
# the whole box and XLA:CPU recomputes what the slot fill derives from it (its N (N - 1) / 2
# pairwise comparisons) in each of the H steps: at 13 slots a DP took 2.5x as long
# unrolled, at 5 slots a rolled one was slower in a solver loop. A constant, like
# `horizon.UNROLL_HORIZON` (`oj.kernels.tuning` sets it for a block).
# Measurements: docs/design.md, "Tuned constants".
STATIONARY_ROLL_MIN_SLOTS = 8
# `Sparse.ordered_fill` (the warm start's re-fill) picks the policy's rows slot-major, out of
# a `lax.map` over the slots, from this many slots per row; below, in the rows' own
# `[H, S, N]` layout. The same bits; OptAug's episode, 16 seeds vmapped, bonus 1, against
# the other way: lost_sales (13 slots) 3.86 against 4.53 ms, gridworld(20) (5 slots) 5.78
# against 6.55, delivery 1.26 against 1.33, the queue (3) 0.97 against 0.98
# (docs/results/episode_cost/, 2026-11-28).
SLOT_MAJOR_PICK_MIN_SLOTS = 8


def scatter(weights: jax.Array, slots: jax.Array, num_states: int) -> jax.Array:
  """`d[t] = sum of weights[...] over the slots whose next state is t`, `[S]` (a forward
  step: a scatter-add where the dense layout has a matrix product)."""
  return (
    jnp.zeros((num_states,), weights.dtype)
    .at[box.slot_states(slots).reshape(-1)]
    .add(weights.reshape(-1))
  )


class Sparse:
  """The sparse layout (see the package docstring for the interface): `next_states` `[H or
  1, S, A, N]` int; `fill` is only reported (slots are always filled by `box.slot_fill`)."""

  __slots__ = ("fill", "next_states")
  sparse = True

  def __init__(self, next_states: Any, fill: str):
    self.next_states = next_states
    self.fill = fill

  def width(self, lower: Any) -> int:
    """`W`, the entries of a row (`N` slots)."""
    del lower
    return np.shape(self.next_states)[-1]

  # --- the backward pass ------------------------------------------------------------------

  def backward_arrays(self, lower, upper, horizon: int):
    """`(arrays, to_step, rolled)`: the box and its slots for a backward pass, a stationary
    (`[1, ...]`) array moved to slot-major `[1, N, S, A]` once, before the scan; `to_step`
    moves the other arrays' step slices `[S, A, N]` to slot-major in the step; `rolled`:
    a stationary box with at least `STATIONARY_ROLL_MIN_SLOTS` slots keeps the scan
    rolled."""
    arrays: tuple[Any, ...] = (lower, upper, self.next_states)
    fixed = tuple(x.shape[0] == 1 and horizon > 1 for x in arrays)
    arrays = tuple(jnp.moveaxis(x, -1, 1) if f else x for x, f in zip(arrays, fixed))

    def to_step(slices):
      return tuple(x if f else jnp.moveaxis(x, -1, 0) for x, f in zip(slices, fixed))

    rolled = self.next_states.shape[-1] >= STATIONARY_ROLL_MIN_SLOTS
    return arrays, to_step, rolled

  def fill_step(self, v_next: jax.Array, slices) -> tuple[jax.Array, jax.Array]:
    """`(expected [S, A], p [N, S, A])`: the greedy fill of every row of a step over its
    slots (slot-major slices from `to_step`) in the order of `v_next [S]`."""
    lower_h, upper_h, ns_h = slices
    return box.slot_fill(v_next[box.slot_states(ns_h)], lower_h, upper_h)

  def rows(self, filled, actions: jax.Array, slices) -> tuple[jax.Array, jax.Array]:
    """The rows `(s, actions[s])`: `(p [S, N], their next states [S, N])`."""
    rows = lambda x: jnp.take_along_axis(x, actions[None, :, None], axis=2)[..., 0].T
    return rows(filled), rows(slices[2])

  def minimisers(self, filled, slices) -> tuple[jax.Array, None]:
    """The minimisers of every row: `(p [S, A, N], None)` (slots of the set's
    `next_states`)."""
    del slices
    return jnp.moveaxis(filled, 0, -1), None

  # --- forward pushes and a step's means ---------------------------------------------------

  def push_rows(self, d: jax.Array, p_h: jax.Array, ns_h: jax.Array) -> jax.Array:
    """`d'` through the rows `p_h [S, N]` (next states `ns_h [S, N]`) of a deterministic
    policy: a scatter-add."""
    return scatter(d[:, None] * p_h, ns_h, d.shape[0])

  def push(self, q_h: jax.Array, p_h: jax.Array, ns_h: jax.Array) -> jax.Array:
    """`d'[t] = sum of q_h[s, a] p_h[s, a, n]` over the slots whose next state is `t`."""
    return scatter(q_h[..., None] * p_h, ns_h, q_h.shape[0])

  def expectation(self, v_next, lower_h, upper_h, ns_h) -> jax.Array:
    """`[S, A]` minimum of `p . v_next` over each row's box (`box.row_fill`)."""
    return box.row_fill(v_next[box.slot_states(ns_h)], lower_h, upper_h)[0]

  def kernel_expectation(self, p_h, v_next, ns_h) -> jax.Array:
    """`[S, A]` mean of `v_next` under the kernel's slots `p_h [S, A, N]`."""
    return jnp.sum(p_h * v_next[box.slot_states(ns_h)], axis=-1)

  # --- a named vertex, fixed points, indices -----------------------------------------------

  def ordered_fill(self, actions, order_values, lower, upper) -> tuple[jax.Array, jax.Array]:
    """The rows `(s, actions[h, s])` of every step filled in the order of
    `order_values[h]`: `(p [H, S, N], next states [H, S, N])`.

    Every step's rows at once (no scan: a step's rows are `S N` entries, and a scan step
    per `h` costs more than its fill; a stationary `[1, ...]` array broadcasts). The
    policy's rows are picked by a chain of selects over the `A` actions (exact, and
    vectorised where a gather is not), then the keys `order_values[h, ns[h, s, n]]` are
    gathered. The picks and the keys are buffers of their own: fused into the fill, they
    would be evaluated again for each of its `N` fusions (lost_sales, 13 slots: 45%
    dearer). From `SLOT_MAJOR_PICK_MIN_SLOTS` slots they are moved slot-major and come
    out of a `lax.map` over the slots (the barrier keeps XLA from forwarding its inputs
    past the loop); below, they stay in the rows' `[H, S, N]` layout behind
    `optimization_barrier`s and only the fill sees them slot-major. The same bits.
    """
    step_starts = jnp.arange(actions.shape[0]) * order_values.shape[-1]  # in the flat keys
    flat = order_values.reshape(-1)
    slot_major = self.next_states.shape[-1] >= SLOT_MAJOR_PICK_MIN_SLOTS

    def pick(x):  # [H or 1, S, A, N] -> [H, S, N], the entries of the policy's rows
      out = x[:, :, 0]
      for a in range(1, x.shape[2]):
        out = jnp.where((actions == a)[..., None], x[:, :, a], out)
      out = jnp.broadcast_to(out, actions.shape + x.shape[-1:])
      return jnp.moveaxis(out, -1, 0) if slot_major else out  # [N, H, S] or [H, S, N]

    barrier = jax.lax.optimization_barrier
    rows = (pick(lower), pick(upper), pick(self.next_states))
    if slot_major:

      def slot(rows):
        lo, up, ns = barrier(rows)
        return lo, up, ns, flat[box.slot_states(ns) + step_starts[:, None]]

      lo, up, ns, keys = jax.lax.map(slot, rows)
      _, p = box.slot_fill(keys, lo, up)
      return jnp.moveaxis(p, 0, -1), jnp.moveaxis(ns, 0, -1)
    lo, up, ns = barrier(rows)
    keys = barrier(flat[box.slot_states(ns) + step_starts[:, None, None]])
    first = lambda x: jnp.moveaxis(x, -1, 0)
    _, p = box.slot_fill(first(keys), first(lo), first(up))
    return jnp.moveaxis(p, 0, -1), ns

  def index_order_point(self, lower, upper, dtype) -> jax.Array:
    """The box's point filled in the order of the slots' next states."""
    return box.row_fill(self.next_states.astype(dtype), lower, upper)[1]

  def targets(self, shape: tuple[int, ...]) -> np.ndarray:
    """The next state of every slot of a `shape` (`[H, S, A, N]`) array, on the host (-1:
    empty)."""
    return np.broadcast_to(np.asarray(self.next_states), shape)

  def entries(self, dense: np.ndarray) -> np.ndarray:
    """A dense `[..., S']` array in this layout, on the host: its entries at the slots
    (`[..., N]`, 0 in an empty slot)."""
    ns = np.asarray(self.next_states)
    ns = np.broadcast_to(ns, dense.shape[:-1] + ns.shape[-1:])
    return np.where(ns >= 0, np.take_along_axis(dense, np.maximum(ns, 0), axis=-1), 0.0)

  def next_state(self, draw: jax.Array, ns_h: jax.Array, state, action) -> jax.Array:
    """The next state of slot `draw` of row `(state, action)`."""
    return ns_h[state, action, draw].astype(jnp.int32)

  def count_slot(self, steps, states, actions, observed):
    """`(found, slot)`: the slot of each observed `(h, s, a, s')` (`found`: it has one)."""
    ns = self.next_states
    rows = ns[jnp.zeros_like(steps) if ns.shape[0] == 1 else steps, states, actions]  # [H, N]
    match = rows == observed[:, None]
    return jnp.any(match, axis=-1), jnp.argmax(match, axis=-1)

  # --- a declared support, and the observations outside it ---------------------------------

  def declared_support(self, support, counts) -> tuple[Any, Any]:
    """`(support, off_support)`: the slots that hold a next state (`next_states >= 0`, the
    setting's declared support in this layout) and the counts' tally of observations that
    had no slot. `support` is the setting's field, read through `next_states`."""
    del support
    ns = self.next_states
    _, horizon, num_states, num_actions = counts.constraint_cost_sums.shape
    if (
      ns.shape[-3:-1] != (num_states, num_actions)
      or ns.shape[0] not in (1, horizon)
      or ns.shape[-1] != counts.transitions.shape[-1]
    ):
      raise ArgumentError(
        "setting.support",
        f"next states of shape {ns.shape} do not"
        f" fit counts of shape {counts.transitions.shape} ([H or 1, S, A, N])",
      )
    off_support = counts.off_support if counts.off_support is not None else np.int32(0)
    return ns >= 0, off_support

  def count_off_support(self, off_support, found):
    """The counts' tally after an episode: plus the observed `s'` without a slot (`~found`),
    saturating at `MAX_EPISODES` (counts built for the dense layout keep `None`)."""
    if off_support is None:
      return None
    missed = jnp.sum(~found, dtype=jnp.int32)
    return jnp.where(
      off_support > MAX_EPISODES - missed,
      jnp.asarray(MAX_EPISODES, jnp.int32),
      off_support + missed,
    )

  def off_support_observations(self, counts, support) -> tuple[np.ndarray, np.ndarray]:
    """Host side: `(indices [0, 4], counts [1] or [0])`: the layout keeps no slot for an
    observed `s'` outside the support, so only their number (`Counts.off_support`, summed
    over leading batch axes) is known, and no tuple is named."""
    del support
    off_support = counts.off_support if counts.off_support is not None else 0
    total = int(np.sum(np.asarray(off_support, np.int64)))
    return np.zeros((0, 4), np.int64), np.full((1 if total else 0,), total, np.int64)

  def require_dense(self, field: str, why: str) -> None:
    """`ArgumentError(field, why)`: a dense-only computation refuses this layout."""
    raise ArgumentError(field, why)

  def check_rows(self, field: str, num_states: int, num_actions: int) -> None:
    """`ArgumentError(field)` where the next states are not `[.., S, A, N]` rows of
    `num_states` states and `num_actions` actions."""
    shape = np.shape(self.next_states)
    if shape[-3:-1] != (num_states, num_actions):
      raise ArgumentError(
        field,
        f"next states of shape {shape} do not fit {num_states} states and {num_actions} actions",
      )
