"""Finite-horizon constrained MDPs: the container and the conversions between its two
layouts. Its checks (`validate_cmdp`, `check_cmdp`) are in `cmdp_checks.py`."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import layouts
from .checking import arguments
from .errors import ArgumentError
from .transition_set import TransitionSet


class CMDP(NamedTuple):
  """A tabular finite-horizon CMDP (paper, Section 2). Costs are minimised.

  Constraint `i` is `V^pi(d_i, p) <= alpha_i`. A batch of CMDPs is a `CMDP` whose fields
  share leading axes; sizes are always read from the trailing axes.

  Two layouts of the transitions:

  - dense (`next_states=None`, the default): `transitions[h, s, a, s'] = p_h(s'|s,a)`,
    `[H, S, A, S]`;
  - sparse: at most `N` possible next states per `(h, s, a)`: `next_states[h, s, a, n]` is
    the next state of slot `n` (-1: an empty slot) and `transitions[h, s, a, n]` its
    probability (0 in empty slots), both `[H, S, A, N]`. A row names each next state
    at most once (`merge_repeated_next_states` merges repeats). Every kernel then works
    in `S A N` per step instead of `S A S` (`to_sparse`, `to_dense` convert; the
    `Setting.support` of an agent takes the same `next_states`).
  """

  transitions: jax.Array  # [H, S, A, S'] p_h(s'|s,a) (or [H, S, A, N] slots, sparse)
  cost: jax.Array  # [H, S, A] expected objective cost c_h(s,a) in [0, 1]
  constraint_costs: jax.Array  # [I, H, S, A] expected constraint costs d_{i,h}(s,a) in [0, 1]
  thresholds: jax.Array  # [I] alpha_i in [0, H]
  initial_state: jax.Array  # [] int, s_1
  next_states: jax.Array | None = None  # [H, S, A, N] int32 (sparse layout), -1 empty; None
  #                                       in the dense layout

  @property
  def layout(self) -> layouts.Layout:
    """The layout of the transitions: `layouts.Sparse(next_states)` or `layouts.Dense`."""
    return layouts.of(self.next_states)

  @property
  def is_sparse(self) -> bool:
    return self.layout.sparse

  @property
  def max_next_states(self) -> int:
    """`N`: slots per row (sparse), or `S` (dense)."""
    return self.transitions.shape[-1]

  @property
  def horizon(self) -> int:
    return self.transitions.shape[-4]

  @property
  def num_states(self) -> int:
    return self.transitions.shape[-3]

  @property
  def num_actions(self) -> int:
    return self.transitions.shape[-2]

  @property
  def num_constraints(self) -> int:
    return self.thresholds.shape[-1]

  def transition_set(self) -> TransitionSet:
    """The known kernel in its layout, a point `TransitionSet` (`lower = upper =
    transitions`)."""
    return TransitionSet.point(self.transitions, self.next_states)


# Float dtypes the runner computes in (counts, radii and sampling need >= float32).
SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def to_sparse(cmdp: CMDP, *, max_next_states: int | None = None) -> CMDP:
  """The sparse layout of a dense CMDP (host side): the slots of row `(h, s, a)` hold its
  next states of positive probability, in increasing order, then empty slots (-1).

  Args:
    cmdp: a dense, unbatched `CMDP` (a sparse one is returned as it is).
    max_next_states: `N`; default: the largest support of a row. Smaller raises.
  """
  if cmdp.next_states is not None:
    return cmdp
  p = np.asarray(cmdp.transitions)
  if p.ndim != 4:
    raise ArgumentError("transitions", f"to_sparse takes one CMDP, got shape {p.shape}")
  support = p > 0
  widest = int(support.sum(-1).max())
  n = widest if max_next_states is None else int(max_next_states)
  if n < widest:
    raise ArgumentError(
      "max_next_states", f"{n} slots, but a row has {widest} possible next states"
    )
  # Stable order: positive entries first (by index), then the rest; keep the first n.
  order = np.argsort(~support, axis=-1, kind="stable")[..., :n]
  taken = np.take_along_axis(support, order, axis=-1)
  next_states = np.where(taken, order, -1).astype(np.int32)
  probs = np.where(taken, np.take_along_axis(p, order, axis=-1), 0.0).astype(p.dtype)
  return cmdp._replace(transitions=jnp.asarray(probs), next_states=jnp.asarray(next_states))


def to_dense(cmdp: CMDP) -> CMDP:
  """The dense layout of a (possibly sparse, unbatched) CMDP (host side)."""
  if cmdp.next_states is None:
    return cmdp
  # Slots with the same next state add up; empty slots (-1) go to a column that is dropped.
  values, num_states = np.asarray(cmdp.transitions), cmdp.num_states
  ns = np.broadcast_to(np.asarray(cmdp.next_states), values.shape)
  out = np.zeros(values.shape[:-1] + (num_states + 1,), values.dtype)
  flat = out.reshape(-1, num_states + 1)
  rows = np.repeat(np.arange(flat.shape[0]), values.shape[-1])
  np.add.at(flat, (rows, np.where(ns < 0, num_states, ns).reshape(-1)), values.reshape(-1))
  dense = flat.reshape(out.shape)[..., :num_states]
  return cmdp._replace(transitions=jnp.asarray(dense), next_states=None)


def merge_repeated_next_states(next_states, transitions) -> tuple[np.ndarray, np.ndarray]:
  """Host side: sparse-layout rows with each next state named once, repeats merged.

  A row of the sparse layout may not name a next state twice (`validate_cmdp` refuses it).
  Rows built from a model's outcomes often do: an inventory clipped at an empty stock, a
  move into a wall that stays in place. This adds the probabilities of the slots that
  share a next state. Each row of the result holds its distinct next states in increasing
  order (the order `to_sparse` builds, whose ties the sparse kernels break as the dense
  ones do), then empty slots (-1, probability 0), in the same `N` slots: shapes stay
  static. A next state named with probability 0 keeps its slot (it stays possible for
  an agent's support); empty input slots are dropped. A row without repeats keeps its
  (next state, probability) pairs. Vectorised over all rows; no tolerance is involved.

  Args:
    next_states: `[..., N]` int, a state or -1 (an empty slot) per slot.
    transitions: `[..., N]` probabilities of the slots (0 in empty slots), float.

  Returns:
    `(next_states [..., N] int32, transitions [..., N])` as NumPy arrays, the
    probabilities in the input's float dtype, ready for `CMDP(transitions=...,
    next_states=...)`.

  Raises:
    ValueError: shapes that differ, non-integer next states, a next state below -1, or an
      empty slot with a non-zero probability.
  """
  ns, p = np.asarray(next_states), np.asarray(transitions)
  if ns.shape != p.shape or ns.ndim < 1:
    raise ArgumentError(
      "next_states", f"expected the shape of transitions {p.shape} ([..., N]), got {ns.shape}"
    )
  if not np.issubdtype(ns.dtype, np.integer):
    raise ArgumentError("next_states", f"expected integer state indices, got dtype {ns.dtype}")
  if not np.issubdtype(p.dtype, np.floating):
    p = p.astype(np.float64)
  if ns.size and ns.min() < -1:
    where = np.unravel_index(np.argmin(ns), ns.shape)
    raise ArgumentError(
      "next_states",
      f"{int(ns[where])} at {arguments.position(where)} is neither a state nor -1 (an empty slot)",
    )
  arguments.check_empty_slots(ns, p)
  width = ns.shape[-1]
  rows = ns.reshape(-1, width).astype(np.int64)
  probs = p.reshape(rows.shape)
  # Sort each row by next state (stable: repeats stay in slot order), empty slots last.
  big = np.iinfo(np.int64).max
  order = np.argsort(np.where(rows < 0, big, rows), axis=-1, kind="stable")
  rows = np.take_along_axis(rows, order, axis=-1)
  probs = np.take_along_axis(probs, order, axis=-1)
  valid = rows >= 0
  first = valid.copy()
  first[:, 1:] &= rows[:, 1:] != rows[:, :-1]
  slot = np.cumsum(first, axis=-1) - 1  # output slot of each valid input slot
  flat = np.arange(rows.shape[0])[:, None] * width + slot
  # bincount adds in input order: a repeat's probabilities sum in slot order.
  merged = np.bincount(flat[valid], weights=probs[valid], minlength=rows.size)
  out_ns = np.full(rows.size, -1, np.int32)
  out_ns[flat[first]] = rows[first]
  return out_ns.reshape(ns.shape), merged.astype(p.dtype).reshape(ns.shape)
