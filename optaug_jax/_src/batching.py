"""Control flow that stays control flow under `vmap`.

Under `jax.vmap`, a `lax.cond` with a batched predicate becomes a `select`: every member
runs BOTH branches. For an agent whose phase (pre-training or exploration) depends on its
episode count, every pre-training episode of a vmapped run would also pay a full inner
solve whose result is thrown away. `batch_cond` keeps the per-member semantics of
`lax.cond` but decides at run time, from the whole batch, which branches some member needs:
when all members are on one side that branch runs alone (a real `lax.cond`); only a batch
split between the phases (e.g. seeds resumed from different episodes) runs both and
selects.
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
    true_fun, false_fun: functions of `*operands` with the same output structure.
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
