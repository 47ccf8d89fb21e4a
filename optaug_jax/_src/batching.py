"""Control flow that stays control flow under `vmap`.

Under `jax.vmap`, a `lax.cond` with a batched predicate becomes a `select`: every member
runs BOTH branches. For an agent whose phase (pre-training or exploration) depends on its
episode count, every pre-training episode of a vmapped run would also pay a full inner
solve whose result is thrown away. `batch_cond` keeps the per-member semantics of
`lax.cond` but decides at run time, from the whole batch, which branches some member needs:
when all members are on one side that branch runs alone (a real `lax.cond`); only a batch
split between the phases (e.g. seeds resumed from different episodes) runs both and
selects.

`for_active` does the same for the body of a loop under `vmap`: a batched `while_loop`
runs its body for every member until the slowest stops, and `for_active` computes the
expensive call in it only for the members still running, gathered into a smaller batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def _over_the_batch(reduce):
  """A function that returns its boolean scalar as it is, but under `vmap` returns
  `reduce(pred)` over the batch axis, unbatched (a `custom_vmap` rule)."""

  @jax.custom_batching.custom_vmap
  def fn(pred):
    return pred

  @fn.def_vmap
  def rule(axis_size, in_batched, pred):
    del axis_size
    return (reduce(pred, axis=0) if in_batched[0] else pred), False

  return fn


_every = _over_the_batch(jnp.all)  # pred; under vmap all(pred) over the batch
_some = _over_the_batch(jnp.any)  # pred; under vmap any(pred) over the batch
_largest = _over_the_batch(jnp.max)  # x; under vmap max(x) over the batch


def some(pred) -> jax.Array:
  """`pred` (a boolean scalar); under `vmap`, whether it holds for some member of the batch
  (unbatched): the condition of a loop whose body keeps its finished members as they are
  (`inner.loops.iterate(frozen_by_body=True)`)."""
  return _some(jnp.asarray(pred, bool))


def batch_cond(pred, true_fun, false_fun, *operands):
  """`lax.cond(pred, true_fun, false_fun, *operands)` that skips untaken branches under vmap.

  Every batch member gets the output of the branch its own `pred` selects, as with
  `lax.cond` (tests: vmapped OptAug runs, one split between its phases, against each
  seed's unbatched run). Unbatched, it is a plain `lax.cond`. Under `vmap` with
  a batched `pred`, one of three programs runs, chosen at run time: `true_fun` alone when
  every member's `pred` is true, `false_fun` alone when none is, and both with a per-member
  select otherwise (what `vmap` of `lax.cond` always does). Nested `vmap`s reduce over the
  innermost batch axis; outer axes fall back to the select.

  `true_fun` is traced (and compiled) twice, `false_fun` once: pass the expensive branch
  (the inner solve, the LP) as `false_fun`.

  Args:
    pred: boolean scalar.
    true_fun: a function of `*operands`.
    false_fun: a function of `*operands` with the same output structure.
    *operands: passed to the branch.

  Returns:
    The output of the branch `pred` selects.
  """
  pred = jnp.asarray(pred, bool)
  every, some = _every(pred), _some(pred)

  def not_every(*ops):
    out = false_fun(*ops)  # traced once: pass the expensive branch as `false_fun`
    mixed = lambda: jax.tree.map(lambda t, f: jnp.where(pred, t, f), true_fun(*ops), out)
    return lax.cond(some, mixed, lambda: out)

  return lax.cond(every, true_fun, not_every, *operands)


def bucket_sizes(axis_size: int) -> tuple[int, ...]:
  """The batch sizes `for_active` compiles for a batch of `axis_size`: 1, 2, 4, ... below
  it, and `axis_size` itself."""
  sizes = [1]
  while sizes[-1] * 2 < axis_size:
    sizes.append(sizes[-1] * 2)
  return tuple(sorted(set([*sizes, axis_size])))


def for_active(active, fn, *operands):
  """`fn(*operands)`, computed under `vmap` only for the members whose `active` is True.

  For the expensive call in the body of a loop that runs under `vmap` (the exact search's
  extended DP): a batched `lax.while_loop` runs its body for every member until the
  slowest one stops, and selects. Here the active members are gathered (in their batch
  order) into the smallest batch of `bucket_sizes(axis_size)` that holds them, `fn` runs
  vmapped over that batch alone, and the results go back to their members' places: a
  batch pays at most twice its active members' calls instead of one call per member.

  Every active member gets `fn` of its own operands; an inactive member's output is
  unspecified (zeros, or its own `fn` where it filled a bucket): use it only where the
  caller discards it, as a batched loop does for a finished member. Unbatched it is
  `fn(*operands)`. `fn` must be a function of `operands` alone (it may not close over
  traced values: those would not be gathered). Nested `vmap`s gather over the innermost
  batch axis, with one bucket for all outer members (the largest they need).

  Each bucket size is a compiled copy of `fn` (5 for a batch of 16, 9 for 256).

  Args:
    active: boolean scalar.
    fn: a function of `*operands` (pytrees of arrays).
    *operands: passed to `fn`.

  Returns:
    `fn(*operands)` for an active member.
  """

  @jax.custom_batching.custom_vmap
  def call(active, operands):
    del active
    return fn(*operands)

  @call.def_vmap
  def rule(axis_size, in_batched, active, operands):
    active_batched, operands_batched = in_batched
    if not active_batched:  # every member runs or none does: no gathering
      axes = jax.tree.map(lambda b: 0 if b else None, operands_batched)
      out = jax.vmap(lambda ops: fn(*ops), in_axes=(axes,), axis_size=axis_size)(operands)
      return out, jax.tree.map(lambda _: True, out)
    sizes = bucket_sizes(axis_size)
    # The active members first, in batch order; the bucket that holds them all.
    order = jnp.argsort(~active, stable=True)
    count = _largest(jnp.sum(active, dtype=jnp.int32))
    bucket = jnp.searchsorted(jnp.asarray(sizes, jnp.int32), count, side="left")

    def gathered(size):
      def branch(operands):
        picked = order[:size]
        take = lambda x, b: x[picked] if b else x
        part = jax.tree.map(take, operands, operands_batched)
        axes = jax.tree.map(lambda b: 0 if b else None, operands_batched)
        out = jax.vmap(lambda ops: fn(*ops), in_axes=(axes,), axis_size=size)(part)
        return jax.tree.map(
          lambda y: jnp.zeros((axis_size, *y.shape[1:]), y.dtype).at[picked].set(y), out
        )

      return branch

    out = lax.switch(jnp.minimum(bucket, len(sizes) - 1), [gathered(n) for n in sizes], operands)
    return out, jax.tree.map(lambda _: True, out)

  return call(jnp.asarray(active, bool), operands)
