"""The greedy fill of a transition box: the inner minimisation of the extended DP.

At every `(h, s, a)` the extended DP (paper, eq. (bw-ind)) needs

    min_{p in [lower, upper], sum p = 1} v . p,

which the greedy fill solves: start from `lower` and pour the remaining mass `1 - sum lower`
into the next states in increasing order of `v` (ties to the lower index), each up to its
`upper`. Dense rows are filled by one of `FILL_METHODS` (`box_minimize`), sparse rows over
their `N` slots (`row_fill`, `slot_fill`). The formulations give the same numbers; they
differ in cost, which docs/design.md ("Tuned constants") records.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from . import numerics
from .checking import arguments, kernels


def slot_states(next_states: jax.Array) -> jax.Array:
  """`next_states` with empty slots (-1) pointing at state 0 (their entries are 0)."""
  return jnp.maximum(next_states, 0)


def slot_fill(values: jax.Array, lower: jax.Array, upper: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The greedy fill of every row over its own `N` slots, slot axis FIRST: `values`,
  `lower`, `upper` are `[N, ...]`; returns `(minimum [...], p [N, ...])`.

  Slots are filled in increasing value, ties to the earlier slot (the lower next state when
  a row's slots are in increasing next-state order, as `to_sparse`, `sparse_rows` and the
  benchmarks build them: then the dense layout's `(value, index)` order). The capacity
  before each slot is a sum over the other slots, one comparison per pair of slots
  (`N (N - 1) / 2`), each an elementwise operation over `[...]`-sized vectors: with the
  slot axis first those are contiguous, which is what lets XLA:CPU vectorise the fill (on
  `[..., N]` rows the minor axis is 5 wide). Empty slots have capacity 0 and take no mass.
  """
  n = values.shape[0]
  capacity = upper - lower
  free = 1.0 - functools.reduce(jnp.add, [lower[j] for j in range(n)])
  before = [jnp.zeros_like(free) for _ in range(n)]
  for j in range(n):
    for k in range(j + 1, n):
      j_first = values[j] <= values[k]
      before[k] = before[k] + jnp.where(j_first, capacity[j], 0.0)
      before[j] = before[j] + jnp.where(j_first, 0.0, capacity[k])
  p = [lower[j] + jnp.clip(free - before[j], 0.0, capacity[j]) for j in range(n)]
  return functools.reduce(jnp.add, [p[j] * values[j] for j in range(n)]), jnp.stack(p)


def row_fill(values: jax.Array, lower: jax.Array, upper: jax.Array) -> tuple[jax.Array, jax.Array]:
  """`slot_fill` of `[..., N]` rows (slot axis last): `(minimum [...], p [..., N])`."""
  first = lambda x: jnp.moveaxis(x, -1, 0)
  minimum, p = slot_fill(first(values), first(lower), first(upper))
  return minimum, jnp.moveaxis(p, 0, -1)


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
# times them side by side at S=10, `experiments/lmo_size.py` against S. Every kernel that
# fills takes `fill=` (default `DEFAULT_FILL`, chosen by measurement; a constant, never
# reassigned). `"auto"` is not a formulation of its own: it resolves at trace time, by the
# number of next states, to `"matmul"` below `AUTO_BLOCKED_MIN_STATES` and to `"blocked"`
# from there on (`resolve_fill`).
FILL_METHODS = ("matmul", "sort", "scan", "unrolled", "blocked", "auto")
DEFAULT_FILL = "auto"
# The smallest number of next states for which `"auto"` picks `"blocked"`: "matmul" does
# S'^2 work per row but in few fused operations and batches better under `vmap`; "blocked"
# is even at S' = 128 and ahead from there on. Measurements: docs/design.md, "Tuned
# constants".
AUTO_BLOCKED_MIN_STATES = 128


def resolve_fill(fill: str, num_next_states: int) -> str:
  """The formulation `fill` stands for with `num_next_states` next states (trace time);
  `ValueError` if `fill` names none of `FILL_METHODS`."""
  arguments.check_choice("fill", fill, FILL_METHODS)
  if fill == "auto":
    return "blocked" if num_next_states >= AUTO_BLOCKED_MIN_STATES else "matmul"
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


def _block_size(num_next_states: int) -> int:
  """Next states per block of the `"blocked"` fill: about `2 sqrt(S')` (S'=400: 10 blocks
  of 40). Fewer blocks make the gathered crossing block (and its `block^2` prefix) the
  cost, more make the coarse product (`2 (blocks - 1)` columns) the cost (docs/design.md,
  "Tuned constants")."""
  return min(num_next_states, max(1, math.ceil(2.0 * math.sqrt(num_next_states))))


class BlockedFill(NamedTuple):
  """The `"blocked"` fill of rows `[...]`, enough to write any row's minimiser."""

  expected: jax.Array  # [...] minimum p . values
  crossing: jax.Array  # [...] int32, the block in which the free mass runs out
  give: jax.Array  # [..., block] mass given inside that block, in ascending order
  block_of: jax.Array  # [S'] int32, the block of each next state
  position: jax.Array  # [S'] int32, each next state's place in ascending order


def _strictly_before(n: int, dtype) -> jax.Array:
  """`T[k, j] = 1` iff `k < j`: `x @ T` is the exclusive prefix sum of `x`'s last axis."""
  idx = jnp.arange(n)
  return (idx[:, None] < idx[None, :]).astype(dtype)


def blocked_fill(values: jax.Array, lower: jax.Array, upper: jax.Array) -> BlockedFill:
  """The shared-order greedy fill in a few passes over the rows, whatever S'.

  Next states are ordered once by `(value, index)` (a two-key sort, so ties never depend on
  the sort's stability) and cut into blocks of consecutive ranks. One product of the
  capacities `upper - lower` with the `[S', 2 (blocks - 1)]` cumulative block indicators
  (and the indicators times `values`) gives every row's capacity and capacity-weighted
  value up to each block boundary; `lower @ [1, values]` gives the free mass and
  `lower . values`. The block where the free mass runs out is the only one filled in part:
  its capacities are gathered in ascending order and filled exactly (an exclusive prefix
  sum as a `[block, block]` product). Blocks before it are full, blocks after it empty.
  Arithmetic per row: `~4 sqrt(S')` multiply-adds per entry, plus `block^2`; the rows are
  read twice (the products) and one block per row is gathered, so time grows with the
  model's entries where "matmul" (`S'` multiply-adds per entry) grows with S' times that.
  """
  num_next = values.shape[-1]
  dtype = lower.dtype
  block = _block_size(num_next)
  num_blocks = -(-num_next // block)
  index = lax.iota(jnp.int32, num_next)
  # -0.0 and 0.0 tie (as in `_precedence`): the sort key is canonical, the arithmetic
  # below keeps `values` (and its gradient).
  key = jnp.where(values == 0, jnp.zeros_like(values), values)
  _, order = lax.sort((key, index), num_keys=2)
  position = jnp.zeros_like(index).at[order].set(index)
  block_of = position // block

  capacity = upper - lower
  ones_and_values = jnp.stack([jnp.ones_like(values), values], axis=1)
  lower_sums = numerics.matmul(lower, ones_and_values.astype(dtype))
  free = 1.0 - lower_sums[..., 0]
  expected = lower_sums[..., 1]
  num_bounds = num_blocks - 1
  if num_bounds > 0:
    upto = (block_of[:, None] <= jnp.arange(num_bounds)[None, :]).astype(dtype)
    basis = jnp.concatenate([upto, upto * values[:, None]], axis=1)  # [S', 2 (nb - 1)]
    sums = numerics.matmul(capacity, basis)
    capacity_upto, weighted_upto = sums[..., :num_bounds], sums[..., num_bounds:]
    crossing = jnp.sum(capacity_upto < free[..., None], axis=-1, dtype=jnp.int32)
    prev = jnp.maximum(crossing - 1, 0)[..., None]
    full = crossing > 0
    free = free - jnp.where(full, jnp.take_along_axis(capacity_upto, prev, axis=-1)[..., 0], 0.0)
    expected = expected + jnp.where(
      full, jnp.take_along_axis(weighted_upto, prev, axis=-1)[..., 0], 0.0
    )
  else:
    crossing = jnp.zeros(free.shape, jnp.int32)

  pad = num_blocks * block - num_next
  in_blocks = lambda x: jnp.pad(x, (0, pad)).reshape(num_blocks, block)
  members = jnp.take(in_blocks(order), crossing, axis=0)  # [..., block] next states
  member_values = jnp.take(in_blocks(values[order]), crossing, axis=0)
  real = jnp.take(in_blocks(jnp.ones((num_next,), bool)), crossing, axis=0)
  cap = jnp.where(real, jnp.take_along_axis(capacity, members, axis=-1), 0.0)
  before = numerics.matmul(cap, _strictly_before(block, dtype))
  give = jnp.clip(free[..., None] - before, 0.0, cap)
  expected = expected + jnp.sum(give * member_values, axis=-1)
  return BlockedFill(expected, crossing, give, block_of, position)


def blocked_minimiser(blocked: BlockedFill, lower: jax.Array, upper: jax.Array) -> jax.Array:
  """The minimiser `[..., S']` (original order) of rows filled by `blocked_fill`."""
  block = blocked.give.shape[-1]
  crossing = blocked.crossing[..., None]
  inside = jnp.clip(blocked.position - crossing * block, 0, block - 1)
  partial = jnp.take_along_axis(blocked.give, inside, axis=-1)
  given = jnp.where(
    blocked.block_of < crossing,
    upper - lower,
    jnp.where(blocked.block_of > crossing, 0.0, partial),
  )
  return lower + given


def take_rows(blocked: BlockedFill, actions: jax.Array) -> BlockedFill:
  """The `(s, actions[s])` rows of a fill of `[S, A]` rows."""
  row = lambda x: jnp.take_along_axis(x, actions.reshape((-1, 1) + (1,) * (x.ndim - 2)), axis=1)[
    :, 0
  ]
  return blocked._replace(
    expected=row(blocked.expected), crossing=row(blocked.crossing), give=row(blocked.give)
  )


def box_minimize(
  values: jax.Array,
  lower: jax.Array,
  upper: jax.Array,
  *,
  method: str = DEFAULT_FILL,
) -> tuple[jax.Array, jax.Array]:
  """`min_p p . values` over `{p in simplex, lower <= p <= upper}` for every row.

  Greedy fill (the inner minimum of the paper's eq. (bw-ind)): start at `lower`, give the
  free mass `1 - sum(lower)` to the next states in ascending order of `values` (ties by
  index), each up to `upper - lower`. The order is computed once and shared by every row.

  Args:
    values: `[S']` values of the next states.
    lower: `[..., S']` lower bounds (rows with `sum(lower) <= 1 <= sum(upper)`).
    upper: `[..., S']` upper bounds.
    method: how the fill is written (same result up to rounding; default `DEFAULT_FILL`;
      one of `FILL_METHODS`):
      `"matmul"`: the mass a next state receives is `clip(free - capacity before it, 0,
        capacity)`, "capacity before" a matmul with the 0/1 precedence matrix (no sort;
        `S'^2` work per row);
      `"sort"`: stable argsort, gather, cumsum, scatter back;
      `"scan"`: `lax.scan` over the sorted next states carrying the free mass;
      `"unrolled"`: the same sequential fill, unrolled at trace time;
      `"blocked"`: one sort, a product with `~sqrt(S')` cumulative block indicators, and
        an exact fill of the one block where the free mass runs out (work `~S'^1.5` per
        row, in few passes; see `blocked_fill`);
      `"auto"`: `"matmul"` below `AUTO_BLOCKED_MIN_STATES` next states, else `"blocked"`.

  Returns:
    `(minimum [...], minimiser [..., S'])`.
  """
  arguments.check_choice("method", method, FILL_METHODS)
  kernels.box(lower, upper, "box_minimize", check=False, rows="")  # concrete rows only
  method = resolve_fill(method, values.shape[-1])
  if method == "blocked":
    fill = blocked_fill(values, lower, upper)
    return fill.expected, blocked_minimiser(fill, lower, upper)
  capacity = upper - lower
  free = 1.0 - jnp.sum(lower, axis=-1)
  if method == "matmul":
    capacity_before = numerics.matmul(capacity, _precedence(values))
    p = lower + jnp.clip(free[..., None] - capacity_before, 0.0, capacity)
  else:
    order = _sorted_order(values)
    give_sorted = _fill_sorted(free, jnp.take(capacity, order, axis=-1), method)
    inverse = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0]))
    p = lower + jnp.take(give_sorted, inverse, axis=-1)
  return numerics.matmul(p, values), p


def box_expectation(values, lower, upper, method):
  """`box_minimize(...)[0]` without forming the minimisers where the method allows."""
  if resolve_fill(method, values.shape[-1]) == "blocked":
    return blocked_fill(values, lower, upper).expected
  return box_minimize(values, lower, upper, method=method)[0]
