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


@jax.custom_batching.custom_vmap
def _every(pred):
  """`pred` itself; under `vmap`, `all(pred)` over the batch, unbatched."""
  return pred


@_every.def_vmap
def _every_rule(axis_size, in_batched, pred):
  del axis_size
  return (jnp.all(pred) if in_batched[0] else pred), False


@jax.custom_batching.custom_vmap
def _some(pred):
  """`pred` itself; under `vmap`, `any(pred)` over the batch, unbatched."""
  return pred


@_some.def_vmap
def _some_rule(axis_size, in_batched, pred):
  del axis_size
  return (jnp.any(pred) if in_batched[0] else pred), False


def batch_cond(pred, true_fun, false_fun, *operands):
  """`lax.cond(pred, true_fun, false_fun, *operands)` that skips untaken branches under vmap.

  Every batch member gets the output of the branch its own `pred` selects, as with
  `lax.cond` (tested bitwise against `lax.cond` under `vmap` for a whole OptAug run).
  Unbatched, it is a plain `lax.cond`. Under `vmap` with
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
