"""The two layouts of a transition-shaped array, as two implementations of one interface.

A transition-shaped array (a kernel, a box's bounds, counts) is `[H or 1, S, A, W]`: entry
`w` of row `(h, s, a)` belongs to one next state. In the dense layout (`Dense`) `W = S` and
entry `w` is next state `w`; in the sparse layout (`Sparse`) `W = N` slots and entry `n` is
next state `next_states[h, s, a, n]` (-1: an empty slot, whose entries are 0). The
recursions of `planning.py` are written once against this interface and never test the
layout; what differs between the layouts is the per-step work on one step's rows:

- `fill_step` / `rows` / `minimisers`: the greedy fill of every row of a step (the inner
  minimum of the extended DP), the rows of a policy picked from it, or all of them;
- `backward_arrays`: how the box enters a backward pass (the sparse layout moves a
  stationary box to slot-major once, and the other steps' slices in the step);
- `push_rows` / `push`: the forward push of a state distribution through the rows of a
  deterministic policy, or of an occupancy through a whole kernel;
- `expectation` / `kernel_expectation`: a step's optimistic (box) or plain (kernel) means;
- `ordered_fill`: the rows of a named vertex filled in a given order, every step;
- `index_order_point`, `targets`, `next_state`, `count_slot`: a fixed point of a box, the
  next state of every entry (host), a sampled entry's next state, an observed next state's
  slot.

Per-step methods take the step's slices as the recursion scans them: a step of a
transition-shaped array and the step's `ns_h` (the slots' next states; `None` in the dense
layout, where nothing needs them). A layout is static apart from `Sparse.next_states`; it
is rebuilt from the set's leaves (`TransitionSet`), so it needs no pytree of its own.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax.numpy as jnp
import numpy as np

from .. import box
from .dense import Dense
from .sparse import Sparse

Layout = Dense | Sparse

__all__ = ("Dense", "Layout", "Sparse", "TransitionSetLike", "of", "of_support")


class TransitionSetLike(Protocol):
  """What the recursions of `planning.py` read of a transition set: its bounds and its
  layout. `TransitionSet` (`transition_set.py`) is the implementation; the protocol lets
  `planning.py` sit below the set whose methods call it."""

  lower: Any
  upper: Any
  layout: Layout
  is_point: bool

  @property
  def kernel(self) -> Any: ...

  @property
  def next_states(self) -> Any: ...

  @property
  def width(self) -> int: ...


def of(next_states: Any, fill: str = box.DEFAULT_FILL) -> Layout:
  """The layout of a transition-shaped array: `Sparse(next_states, fill)` where the slots'
  next states are given, `Dense(fill)` where they are `None`. `fill` is the resolved
  greedy-fill formulation of the dense layout (`box.resolve_fill`; the default, for the
  callers that fill nothing: counts, sampling); the sparse layout fills over its slots
  whatever it is and only reports it."""
  return Dense(fill) if next_states is None else Sparse(next_states, fill)


def of_support(support: Any, stationary: bool = False) -> Layout:
  """The layout a setting's declared support (`Setting.support`) is in: `Sparse` for int
  next states `[H, S, A, N]` or `[S, A, N]` (held as `[H, S, A, N]` int32, or `[1, S, A,
  N]` without a step axis or when `stationary`: the counts pool the steps), `Dense` for a
  bool mask or no support. A step axis of length 1 keeps every transition-shaped array of
  a run (the counts, the box, the extended DP's slots) at `[1, S, A, N]`."""
  if support is None:
    return Dense(box.DEFAULT_FILL)
  dtype = getattr(support, "dtype", None)
  if np.dtype(np.asarray(support).dtype if dtype is None else dtype) == bool:
    return Dense(box.DEFAULT_FILL)
  ns = jnp.asarray(support, jnp.int32)
  return Sparse(ns[None] if ns.ndim == 3 else ns[:1] if stationary else ns, box.DEFAULT_FILL)
