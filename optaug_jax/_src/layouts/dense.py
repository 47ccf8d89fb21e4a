"""The dense layout: a row holds all `S` next states, entry `s'` is next state `s'`.

A step's rows are filled with the set's greedy-fill formulation (`box.box_minimize`, or
`box.blocked_fill` whose minimisers are written for the rows asked for only), and pushed
forward by a matrix product.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import box, horizon, numerics
from ..checking import arguments
from ..errors import ArgumentError


class Dense:
  """The dense layout (see the package docstring for the interface); `fill` is the greedy
  fill's formulation (`box.FILL_METHODS`, resolved for the width)."""

  __slots__ = ("fill",)
  sparse = False
  next_states = None  # no index array: entry s' is next state s'

  def __init__(self, fill: str):
    self.fill = fill

  def width(self, lower: Any) -> int:
    """`W`, the entries of a row (`S`)."""
    return np.shape(lower)[-1]

  # --- the backward pass ------------------------------------------------------------------

  def backward_arrays(self, lower, upper, horizon: int):
    """`(arrays, to_step, rolled)`: the box's arrays a backward pass scans, the map from a
    step's scanned slices to what `fill_step` takes (the identity here), and whether a
    stationary box keeps the scan rolled (never in this layout)."""
    del horizon
    return (lower, upper), lambda slices: tuple(slices), False

  def fill_step(self, v_next: jax.Array, slices) -> tuple[jax.Array, Any]:
    """`(expected [S, A], fill)`: the greedy fill of every row `(s, a)` of a step in the
    order of `v_next [S]`; `filled` is what `rows` and `minimisers` read."""
    lower_h, upper_h = slices
    if self.fill == "blocked":
      fill = box.blocked_fill(v_next, lower_h, upper_h)
      return fill.expected, fill
    return box.box_minimize(v_next, lower_h, upper_h, method=self.fill)

  def rows(self, filled, actions: jax.Array, slices) -> tuple[jax.Array, None]:
    """The minimisers of the rows `(s, actions[s])`: `(p [S, S'], None)`."""
    lower_h, upper_h = slices
    if self.fill == "blocked":
      rows = lambda x: jnp.take_along_axis(x, actions[:, None, None], axis=1)[:, 0]
      picked = box.take_rows(filled, actions)
      return box.blocked_minimiser(picked, rows(lower_h), rows(upper_h)), None
    return jnp.take_along_axis(filled, actions[:, None, None], axis=1)[:, 0], None

  def minimisers(self, filled, slices) -> tuple[jax.Array, None]:
    """The minimisers of every row: `(p [S, A, S'], None)`."""
    if self.fill == "blocked":
      return box.blocked_minimiser(filled, *slices), None
    return filled, None

  # --- forward pushes and a step's means ---------------------------------------------------

  def push_rows(self, d: jax.Array, p_h: jax.Array, ns_h: None) -> jax.Array:
    """`d' = d P` through the rows `p_h [S, S']` of a deterministic policy."""
    del ns_h
    return numerics.matmul(d, p_h)

  def push(self, q_h: jax.Array, p_h: jax.Array, ns_h: None) -> jax.Array:
    """`d'[t] = sum_{s, a} q_h[s, a] p_h[s, a, t]`."""
    del ns_h
    return numerics.einsum("sa,sat->t", q_h, p_h)

  def expectation(self, v_next, lower_h, upper_h, ns_h: None) -> jax.Array:
    """`[S, A]` minimum of `p . v_next` over each row's box."""
    del ns_h
    return box.box_expectation(v_next, lower_h, upper_h, self.fill)

  def kernel_expectation(self, p_h, v_next, ns_h: None) -> jax.Array:
    """`[S, A]` mean of `v_next` under the kernel's rows `p_h [S, A, S']`."""
    del ns_h
    return numerics.matmul(p_h, v_next)

  # --- a named vertex, fixed points, indices -----------------------------------------------

  def ordered_fill(self, actions, order_values, lower, upper) -> tuple[jax.Array, None]:
    """The rows `(s, actions[h, s])` of every step filled in the order of
    `order_values[h]`: `(p [H, S, S'], None)`, a scan over the steps."""

    def rows(x, a):  # [S, A, S'] -> [S, S'], row (s, a[s]): selects, not a gather
      out = x[:, 0]
      for b in range(1, x.shape[1]):
        out = jnp.where((a == b)[:, None], x[:, b], out)
      return out

    def step(carry, xs):
      a_h, w_h, lower_h, upper_h = xs
      return carry, box.box_minimize(w_h, rows(lower_h, a_h), rows(upper_h, a_h), method=self.fill)[
        1
      ]

    arrays = (actions, order_values, lower, upper)
    _, p = horizon.horizon_scan(step, None, arrays, actions.shape[0])
    return p, None

  def index_order_point(self, lower, upper, dtype) -> jax.Array:
    """The box's point filled in the order of the next states' indices."""
    order = jnp.arange(lower.shape[-1], dtype=dtype)
    return box.box_minimize(order, lower, upper, method=self.fill)[1]

  def targets(self, shape: tuple[int, ...]) -> np.ndarray:
    """The next state of every entry of a `shape` (`[..., S']`) array, on the host."""
    return np.broadcast_to(np.arange(shape[-1]), shape)

  def entries(self, dense: np.ndarray) -> np.ndarray:
    """A dense `[..., S']` array in this layout, on the host: itself."""
    return dense

  def next_state(self, draw: jax.Array, ns_h: None, state, action) -> jax.Array:
    """The next state of entry `draw` of row `(state, action)`: the entry itself."""
    del ns_h, state, action
    return draw

  def count_slot(self, steps, states, actions, observed):
    """`(found, entry)`: where an observed `(h, s, a, s')` is counted: entry `s'`, always."""
    del steps, states, actions
    return jnp.ones(observed.shape, bool), observed

  # --- a declared support, and the observations outside it ---------------------------------

  def declared_support(self, support, counts) -> tuple[Any, Any]:
    """`(support, off_support)` in `counts`' shape: a declared bool support `[H, S, A, S']`
    or `[S, A, S']` (`None`: every next state is possible, none is off it) as a mask
    (reduced over `h` for pooled counts) and the number of observed `(h, s, a, s')`
    outside it."""
    if support is None:
      return None, np.int32(0)
    _, horizon, num_states, num_actions = counts.constraint_cost_sums.shape
    shape = (horizon, num_states, num_actions, num_states)
    mask: Any = arguments.known_array(support, "support", shape, bool)
    if counts.transitions.shape[0] == 1:
      mask = mask.any(axis=0, keepdims=True)  # on the host when known
    return mask, jnp.sum((counts.transitions > 0) & ~mask, dtype=jnp.int32)

  def count_off_support(self, off_support, found):
    """The counts' tally of observations without an entry: none here (every `s'` has its
    entry; `Counts.off_support` is `None`)."""
    del found
    return off_support

  def off_support_observations(self, counts, support) -> tuple[np.ndarray, np.ndarray]:
    """Host side: `(indices [M, 4], counts [M])`, each observed `(h, s, a, s')` outside a
    declared bool `support` (`None`: none) and how often it was seen, summed over leading
    batch axes."""
    transitions = np.asarray(counts.transitions)
    if transitions.ndim < 4:
      raise ArgumentError(
        "counts.transitions", f"expected [..., H, S, A, S'], got shape {transitions.shape}"
      )
    observed = transitions.reshape((-1,) + transitions.shape[-4:]).sum(0, dtype=np.int64)
    if support is None:
      return np.zeros((0, 4), np.int64), np.zeros((0,), np.int64)
    if transitions.shape[-4] > 1:
      steps = transitions.shape[-4]
    else:
      steps = np.shape(support)[0] if np.ndim(support) == 4 else 1
    shape = (steps,) + observed.shape[1:]
    mask = np.asarray(arguments.known_array(support, "support", shape, bool))
    if observed.shape[0] == 1:
      mask = np.asarray(mask.any(0, keepdims=True))
    indices = np.argwhere((observed > 0) & ~mask)
    return indices, observed[tuple(indices.T)]

  def require_dense(self, field: str, why: str) -> None:
    """Nothing: the dense layout is what a dense-only computation takes (`Sparse` raises
    `ArgumentError(field, why)`)."""
    del field, why

  def check_rows(self, field: str, num_states: int, num_actions: int) -> None:
    """Nothing: the dense layout holds no next states to check against `S` and `A`."""
    del field, num_states, num_actions
