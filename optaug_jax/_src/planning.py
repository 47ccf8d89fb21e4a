"""Dynamic programming in (extended) finite-horizon MDPs.

Every function here is written for ONE problem; callers `jax.vmap`. Array axes follow
`[H, S, A, S']` (horizon, states, actions, next states).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax import lax

from . import checks

# Full float32 accuracy for the small matmuls of the DP (TF32 on GPUs would break the
# sum-to-one of the filled transition rows at ~1e-3).
_HIGHEST = lax.Precision.HIGHEST

# Scans over the horizon are unrolled (straight-line code) up to this H. XLA:CPU pays a
# fixed cost per loop iteration and cannot fuse across iterations; for the extended DP of
# S=10 A=4 H=10 at 256 vmapped seeds, full unrolling halves the LMO in a solver loop
# (23.5 -> 11.8 us per seed, docs/results/README.md), while a partial unroll (5 of 10) is
# slower than none. Above the limit compile time would grow with H, so longer horizons
# keep a rolled loop. A constant: `oj.kernels.UNROLL_HORIZON` is a read-only copy.
UNROLL_HORIZON = 32
# ... and only while the slices it unrolls are small: an unrolled step reads its slice of
# `xs` through a static slice that XLA:CPU copies into a buffer of its own before a dot,
# so an unrolled scan holds H copies (where a rolled one reuses one buffer), fresh memory
# on every call (a page fault per 4 KiB) and per vmapped seed. The limit is on H times the
# largest per-step slice, in elements of one problem (16 MB of float32 copies of `lower`
# and `upper`). Measured with `experiments/lmo_size.py --unroll` (extended LMO, A=4,
# float32, 2-core CPU, load ~5.5): inside a solver loop (H=10, 8 seeds vmapped) the copies
# are made once and unrolled scans are faster at every size tried ("matmul" 1.4-1.6x at
# S=25..200; "blocked" 1.2x at S=100, 1.4x at S=200, 1.6x at S=400); one call at a time
# (H=20) rolled scans are faster ("blocked" 1.9x at S=25, 1.4x at S=200, 4.4x at S=400).
# Scans unroll up to S=160 at A=4, H=20 (2.0M elements) and roll from S=200 (3.2M) on,
# which bounds the memory of many vmapped seeds at large S and keeps one call fast, at the
# price of up to 1.6x inside solver loops above the limit. A constant, like
# `UNROLL_HORIZON`.
UNROLL_MAX_ELEMENTS = 2**21


def scan_horizon(f, init, xs, *, reverse=False):
  """`lax.scan` over the leading (horizon) axis of `xs`, unrolled when it is short.

  Unrolled when the horizon is at most `UNROLL_HORIZON` and the horizon times the largest
  per-step slice of `xs` is at most `UNROLL_MAX_ELEMENTS` (sizes of one problem: under
  `vmap` the batch axis does not count).
  """
  leaves = jax.tree.leaves(xs)
  length = leaves[0].shape[0]
  step_size = max(math.prod(x.shape[1:]) for x in leaves)
  unroll = length <= UNROLL_HORIZON and length * step_size <= UNROLL_MAX_ELEMENTS
  return lax.scan(f, init, xs, reverse=reverse, unroll=bool(unroll))


if TYPE_CHECKING:  # pragma: no cover
  from .cmdp import CMDP


def _horizon_scan(f, init, arrays, horizon: int, *, reverse=False):
  """`scan_horizon` of `f(carry, per_step)` over the `horizon` steps of `arrays`.

  An array whose leading (step) axis has length 1 while `horizon > 1` is stationary: every
  step receives its one slice, closed over instead of scanned (no `[H, ...]` copy is made,
  and the slice stays in cache). `None` entries pass through as `None`.
  """
  fixed = tuple(x is not None and x.shape[0] == 1 and horizon > 1 for x in arrays)
  xs = tuple(None if is_fixed else x for x, is_fixed in zip(arrays, fixed))

  def body(carry, sliced):
    merged = tuple(x[0] if is_fixed else y for x, y, is_fixed in zip(arrays, sliced, fixed))
    return f(carry, merged)

  return scan_horizon(body, init, xs, reverse=reverse)


# --- The sparse layout -------------------------------------------------------------------
# A transition-shaped array `[H, S, A, N]` holds, in slot `n` of row `(h, s, a)`, the entry
# of next state `next_states[h, s, a, n]`; a slot with index -1 is empty (its entries are
# 0). `next_states` (and every transition-shaped array) may have a step axis of length 1:
# the same support (or bounds) at every step. Kernels read `v[next_states]` where the dense
# layout reads `v`, and scatter-add where it multiplies by a matrix, so their work is
# `S A N` per step instead of `S A S'`.


def _slot_states(next_states: jax.Array) -> jax.Array:
  """`next_states` with empty slots (-1) pointing at state 0 (their entries are 0)."""
  return jnp.maximum(next_states, 0)


def _slot_fill(
  values: jax.Array, lower: jax.Array, upper: jax.Array
) -> tuple[jax.Array, jax.Array]:
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
  """`_slot_fill` of `[..., N]` rows (slot axis last): `(minimum [...], p [..., N])`."""
  first = lambda x: jnp.moveaxis(x, -1, 0)
  minimum, p = _slot_fill(first(values), first(lower), first(upper))
  return minimum, jnp.moveaxis(p, 0, -1)


def _sparse_backward(reward, lower, upper, next_states, *, full_transitions: bool = False):
  """`_backward` in the sparse layout: `(value_1 [S], actions [H, S], p, next states)`.

  `p` is `[H, S, N]` (the greedy rows) or, with `full_transitions`, `[H, S, A, N]`; the
  next states are `[H, S, N]` (greedy rows) or `None` (the caller's `next_states`).

  Each step moves its `[S, A, N]` slices to slot-major `[N, S, A]` (`_slot_fill`) in
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
    expected, p = _slot_fill(v_next[_slot_states(ns_h)], lower_h, upper_h)
    q_values = r_h + expected
    actions = jnp.argmin(q_values, axis=-1)  # first index on ties
    if full_transitions:
      return jnp.min(q_values, axis=-1), (actions, jnp.moveaxis(p, 0, -1), None)
    rows = lambda x: jnp.take_along_axis(x, actions[None, :, None], axis=2)[..., 0].T
    return jnp.min(q_values, axis=-1), (actions, rows(p), rows(ns_h))

  v0 = jnp.zeros((num_states,), reward.dtype)
  v1, (actions, p, ns) = _horizon_scan(step, v0, (reward,) + boxes, horizon, reverse=True)
  return v1, actions, p, ns


def _scatter(weights: jax.Array, next_states: jax.Array, num_states: int) -> jax.Array:
  """`d[t] = sum of weights[...] over the slots whose next state is t`, `[S]` (the sparse
  layout's forward step: a scatter-add where the dense layout has a matrix product)."""
  return (
    jnp.zeros((num_states,), weights.dtype)
    .at[_slot_states(next_states).reshape(-1)]
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


def occupancy(
  transitions: jax.Array,
  policy: jax.Array,
  initial_state: jax.typing.ArrayLike,
  *,
  check: bool = False,
  next_states: jax.Array | None = None,
) -> jax.Array:
  """State-action occupancy measure `q_h(s, a) = P[s_h = s, a_h = a]`.

  The forward recursion of the paper's eq. (jin-recurstion) and eq. (decomp-occ).

  Args:
    transitions: `[H, S, A, S']` transition probabilities (a step axis of length 1: the
      same at every step), or `[H, S, A, N]` slots with `next_states`.
    policy: `[H, S, A]` non-stationary stochastic policy.
    initial_state: integer scalar, the initial state `s_1`.
    check: also check traced arguments through `checkify` (see `oj.checked`); concrete
      arguments are always checked: rows are distributions, the initial state is valid.
    next_states: `None` (dense) or the sparse layout's `[H, S, A, N]` int next state of
      each slot (-1: an empty slot).

  Returns:
    `[H, S, A]` occupancy measure; each `q_h` sums to 1.
  """
  chex.assert_rank([transitions, policy], [4, 3])
  horizon, num_states, num_actions = policy.shape
  chex.assert_shape(transitions, (None, num_states, num_actions, None))
  checks.initial_state(initial_state, num_states, "occupancy", check=check)
  checks.distribution("transitions", transitions, "occupancy", check=check)
  checks.distribution("policy", policy, "occupancy", check=check)
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


def policy_values(cmdp: CMDP, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Exact expected costs of `policy` in `cmdp`.

  Args:
    cmdp: an (unbatched) `CMDP`, dense or sparse.
    policy: `[H, S, A]` policy.

  Returns:
    `(cost_value, constraint_values)`: `V^pi(c, p)` (scalar) and `V^pi(d_i, p)` `[I]`.
  """
  q = occupancy(
    cmdp.transitions, policy, cmdp.initial_state, next_states=getattr(cmdp, "next_states", None)
  )
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
# times them side by side at S=10, `experiments/lmo_size.py` against S. Every kernel that
# fills takes `fill=` (default `DEFAULT_FILL`, chosen by measurement; a constant, never
# reassigned). `"auto"` is not a formulation of its own: it resolves at trace time, by the
# number of next states, to `"matmul"` below `AUTO_BLOCKED_MIN_STATES` and to `"blocked"`
# from there on (`resolve_fill`).
FILL_METHODS = ("matmul", "sort", "scan", "unrolled", "blocked", "auto")
DEFAULT_FILL = "auto"
# The smallest number of next states for which `"auto"` picks `"blocked"`. Measured with
# `experiments/lmo_size.py --crossover` (float32, 2-core CPU, load 4-6, two runs; matmul
# time / blocked time for one problem at A=4, H=20, then for 8 vmapped seeds in a solver
# loop at A=4, H=10): S'=64: 0.72-0.83, 0.61; 96: 0.86-0.97, 0.88-0.99; 128: 1.03-1.05,
# 0.92-0.98; 160: 0.96-1.08, 1.42-1.49; 200: 1.22-2.07, 1.82-1.89. "matmul" does S'^2
# work per row but in few fused operations, and batches better under `vmap`; "blocked"
# is even at S' = 128 and ahead from there on, by more as S' grows.
AUTO_BLOCKED_MIN_STATES = 128


def check_fill(fill: str) -> str:
  """Returns `fill` if it names a fill formulation, else raises `ValueError`."""
  if fill not in FILL_METHODS:
    raise ValueError(f"fill: expected one of {FILL_METHODS}, got {fill!r}")
  return fill


def resolve_fill(fill: str, num_next_states: int) -> str:
  """The formulation `fill` stands for with `num_next_states` next states (trace time)."""
  check_fill(fill)
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
  of 40). Measured on prototypes at S'=100..400 (one problem, A=4, H=20): 5 to 16
  blocks are within noise of each other, 3 or 4 were slower (by 25-80%); fewer
  blocks make the gathered crossing block (and its `block^2` prefix) the cost, more make
  the coarse product (`2 (blocks - 1)` columns) the cost."""
  return min(num_next_states, max(1, math.ceil(2.0 * math.sqrt(num_next_states))))


class _BlockedFill(NamedTuple):
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


def _blocked_fill(values: jax.Array, lower: jax.Array, upper: jax.Array) -> _BlockedFill:
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
  lower_sums = jnp.matmul(lower, ones_and_values.astype(dtype), precision=_HIGHEST)
  free = 1.0 - lower_sums[..., 0]
  expected = lower_sums[..., 1]
  num_bounds = num_blocks - 1
  if num_bounds > 0:
    upto = (block_of[:, None] <= jnp.arange(num_bounds)[None, :]).astype(dtype)
    basis = jnp.concatenate([upto, upto * values[:, None]], axis=1)  # [S', 2 (nb - 1)]
    sums = jnp.matmul(capacity, basis, precision=_HIGHEST)
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
  before = jnp.matmul(cap, _strictly_before(block, dtype), precision=_HIGHEST)
  give = jnp.clip(free[..., None] - before, 0.0, cap)
  expected = expected + jnp.sum(give * member_values, axis=-1)
  return _BlockedFill(expected, crossing, give, block_of, position)


def _blocked_minimiser(fill: _BlockedFill, lower: jax.Array, upper: jax.Array) -> jax.Array:
  """The minimiser `[..., S']` (original order) of rows filled by `_blocked_fill`."""
  block = fill.give.shape[-1]
  crossing = fill.crossing[..., None]
  inside = jnp.clip(fill.position - crossing * block, 0, block - 1)
  partial = jnp.take_along_axis(fill.give, inside, axis=-1)
  given = jnp.where(
    fill.block_of < crossing, upper - lower, jnp.where(fill.block_of > crossing, 0.0, partial)
  )
  return lower + given


def _take_rows(fill: _BlockedFill, actions: jax.Array) -> _BlockedFill:
  """The `(s, actions[s])` rows of a fill of `[S, A]` rows."""
  row = lambda x: jnp.take_along_axis(x, actions.reshape((-1, 1) + (1,) * (x.ndim - 2)), axis=1)[
    :, 0
  ]
  return fill._replace(
    expected=row(fill.expected), crossing=row(fill.crossing), give=row(fill.give)
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
        row, in few passes; see `_blocked_fill`);
      `"auto"`: `"matmul"` below `AUTO_BLOCKED_MIN_STATES` next states, else `"blocked"`.

  Returns:
    `(minimum [...], minimiser [..., S'])`.
  """
  if method not in FILL_METHODS:
    raise ValueError(f"method: expected one of {FILL_METHODS}, got {method!r}")
  method = resolve_fill(method, values.shape[-1])
  if method == "blocked":
    fill = _blocked_fill(values, lower, upper)
    return fill.expected, _blocked_minimiser(fill, lower, upper)
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


def _box_expectation(values, lower, upper, method):
  """`box_minimize(...)[0]` without forming the minimisers where the method allows."""
  if resolve_fill(method, values.shape[-1]) == "blocked":
    return _blocked_fill(values, lower, upper).expected
  return box_minimize(values, lower, upper, method=method)[0]


def _backward(reward, lower, upper, *, full_transitions: bool = False, method: str = DEFAULT_FILL):
  """Backward induction of the paper's eq. (bw-ind).

  Returns `(value_1 [S], actions [H, S], transitions)`, where `transitions` is the greedy
  slice `[H, S, S']` (all the forward pass needs) or, with `full_transitions`, the
  minimisers of every `(s, a)`, `[H, S, A, S']`. `method`: the fill of `box_minimize`
  (`"blocked"` writes the minimisers of the greedy rows only).
  """
  num_states = reward.shape[1]
  method = resolve_fill(method, lower.shape[-1])

  def step(v_next, xs):
    r_h, lower_h, upper_h = xs
    if method == "blocked":
      fill = _blocked_fill(v_next, lower_h, upper_h)
      expected = fill.expected  # [S, A]
    else:
      expected, p = box_minimize(v_next, lower_h, upper_h, method=method)  # [S, A, S']
    q_values = r_h + expected
    actions = jnp.argmin(q_values, axis=-1)  # first index on ties
    if method == "blocked":
      if full_transitions:
        p = _blocked_minimiser(fill, lower_h, upper_h)
      else:
        rows = lambda x: jnp.take_along_axis(x, actions[:, None, None], axis=1)[:, 0]
        p = _blocked_minimiser(_take_rows(fill, actions), rows(lower_h), rows(upper_h))
    elif not full_transitions:
      p = jnp.take_along_axis(p, actions[:, None, None], axis=1)[:, 0]
    return jnp.min(q_values, axis=-1), (actions, p)

  v0 = jnp.zeros((num_states,), reward.dtype)
  v1, (actions, p) = _horizon_scan(step, v0, (reward, lower, upper), reward.shape[0], reverse=True)
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
  next_states: jax.Array | None = None,
) -> LMOSolution:
  """Linear minimisation over the occupancy measures of the box: one extended DP.

  `min_{q in Q(box)} reward . q`, where `Q(box)` holds the occupancy measures of every
  policy under every transition kernel in `[lower, upper]` (the set `Z` of the paper's
  Appendix C, projected on `q`). The backward pass is `extended_value_iteration`'s; the
  forward pass recomputes the occupancy of the greedy (deterministic) policy from its
  transitions at `(s, a*(s))` only. This is the oracle of every inner solver.

  Args:
    reward: `[H, S, A]` linear costs (any sign).
    lower: `[H, S, A, S']` lower transition bounds (a step axis of length 1: the same box
      at every step), or `[H, S, A, N]` slots with `next_states`.
    upper: same shape as `lower`; each row needs `sum(lower) <= 1 <= sum(upper)`.
    initial_state: integer scalar.
    fill: the greedy-fill formulation of the dense layout (`FILL_METHODS`); the sparse
      layout fills each row over its own `N` slots (`_slot_fill`) whatever `fill` is.
    next_states: `None` (dense) or the sparse layout's `[H, S, A, N]` (or `[1, S, A, N]`)
      int next state of each slot (-1: empty, with bounds 0).

  Returns:
    `LMOSolution(value, occupancy, actions, greedy_transitions, state_occupancy,
    greedy_next_states)`; `value == sum(reward * occupancy)` up to rounding.
  """
  if next_states is not None:
    v1, actions, p_greedy, ns_greedy = _sparse_backward(reward, lower, upper, next_states)
    q, d = _sparse_forward_deterministic(
      actions, p_greedy, ns_greedy, initial_state, reward.shape[-1], reward.dtype
    )
    return LMOSolution(
      value=v1[initial_state],
      occupancy=q,
      actions=actions,
      greedy_transitions=p_greedy,
      state_occupancy=d,
      greedy_next_states=ns_greedy,
    )
  v1, actions, p_greedy = _backward(reward, lower, upper, method=fill)
  q, d = _forward_deterministic(actions, p_greedy, initial_state, reward.shape[-1], reward.dtype)
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
  next_states: jax.Array | None = None,
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
    next_states: `None` (dense) or the sparse layout's int next states (`extended_lmo`).

  Returns:
    `ExtendedSolution(value, policy, transitions)`; `transitions` is `[H, S, A, N]` in the
    sparse layout (slots of `next_states`).
  """
  chex.assert_rank([reward, lower, upper], [3, 4, 4])
  chex.assert_equal_shape([lower, upper])
  width = reward.shape[1] if next_states is None else next_states.shape[-1]
  chex.assert_shape(lower, (None,) + reward.shape[1:] + (width,))
  checks.initial_state(initial_state, reward.shape[1], "extended_value_iteration", check=check)
  checks.box(lower, upper, "extended_value_iteration", check=check)
  if next_states is not None:
    v1, actions, transitions, _ = _sparse_backward(
      reward, lower, upper, next_states, full_transitions=True
    )
  else:
    v1, actions, transitions = _backward(reward, lower, upper, full_transitions=True, method=fill)
  policy = jax.nn.one_hot(actions, reward.shape[2], dtype=reward.dtype)
  return ExtendedSolution(value=v1[initial_state], policy=policy, transitions=transitions)


def optimistic_policy_evaluation(
  reward: jax.Array,
  policy: jax.Array,
  lower: jax.Array,
  upper: jax.Array,
  *,
  fill: str = DEFAULT_FILL,
  next_states: jax.Array | None = None,
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
    next_states: `None` (dense) or the sparse layout's int next states (`extended_lmo`).

  Returns:
    `(values [H, S], q_values [H, S, A])`; `values[0, s_1]` is the optimistic value.
  """

  def step(v_next, xs):
    r_h, pi_h, lower_h, upper_h, ns_h = xs
    if ns_h is None:
      expected = _box_expectation(v_next, lower_h, upper_h, fill)
    else:
      expected, _ = row_fill(v_next[_slot_states(ns_h)], lower_h, upper_h)
    q_values = r_h + expected
    v = jnp.sum(pi_h * q_values, axis=-1)
    return v, (v, q_values)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, (values, q_values) = _horizon_scan(
    step, v0, (reward, policy, lower, upper, next_states), reward.shape[0], reverse=True
  )
  return values, q_values


def optimal_policy(
  reward: jax.Array, transitions: jax.Array, *, next_states: jax.Array | None = None
) -> jax.Array:
  """Deterministic policy minimising `V^pi(reward, transitions)` (plain backward induction).

  Args:
    reward: `[H, S, A]` costs.
    transitions: `[H, S, A, S']` known transitions, or `[H, S, A, N]` with `next_states`.
    next_states: `None` (dense) or the sparse layout's int next states (`extended_lmo`).

  Returns:
    `[H, S, A]` one-hot policy; ties go to the lowest action index.
  """

  def step(v_next, xs):
    r_h, p_h, ns_h = xs
    if ns_h is None:
      expected = jnp.matmul(p_h, v_next, precision=_HIGHEST)
    else:
      expected = jnp.sum(p_h * v_next[_slot_states(ns_h)], axis=-1)
    q_values = r_h + expected
    return jnp.min(q_values, axis=-1), jnp.argmin(q_values, axis=-1)

  v0 = jnp.zeros((reward.shape[1],), reward.dtype)
  _, actions = _horizon_scan(
    step, v0, (reward, transitions, next_states), reward.shape[0], reverse=True
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
