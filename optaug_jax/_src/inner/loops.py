"""The loop form every inner solver shares: stop early, or run a fixed length.

A solver's `tol` decides where its iterates stop changing (the numbers); the caller decides
the loop form. `lax.while_loop` stops there and saves the remaining extended DPs, but it
cannot be reverse-differentiated; `lax.fori_loop` runs the whole budget, keeps a finished
carry as it is (the same numbers), and can (`solve_inner(gradient="unrolled")`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
from jax import lax

from .. import batching

Carry = TypeVar("Carry")


def tree_where(pred, x, y):
  """`jnp.where(pred, x, y)` leaf by leaf."""
  return jax.tree.map(lambda u, v: jnp.where(pred, u, v), x, y)


def iterate(
  body: Callable[[Carry], Carry],
  carry: Carry,
  *,
  num_iters: int,
  running: Callable[[Carry], jax.Array],
  early: bool,
  can_stop: bool = True,
  frozen_by_body: bool = False,
) -> Carry:
  """Runs `body` up to `num_iters` times while `running(carry)` (which must also check the
  iteration count for `early`).

  `early`: a `lax.while_loop` that stops once `running` is False. Otherwise a
  `lax.fori_loop` of exactly `num_iters` steps in which a finished carry stays as it is.
  `can_stop=False` says `body` never finishes: the fixed-length loop then skips the select
  that keeps a finished carry (a copy of the whole carry per step, e.g. the cutting planes'
  vertex memory).

  `frozen_by_body=True` says `body` keeps a carry whose `running` is False as it is (at
  the cost of the selects it chooses, e.g. one slot of a memory): under `vmap`, the early
  loop then runs while some member runs (`batching.some`), without the select of the
  whole carry per step that a batched `lax.while_loop` adds for its finished members.
  """
  if early and frozen_by_body:
    return lax.while_loop(lambda c: batching.some(running(c)), body, carry)
  if early:
    return lax.while_loop(running, body, carry)
  if not can_stop:
    return lax.fori_loop(0, num_iters, lambda _, c: body(c), carry)
  return lax.fori_loop(0, num_iters, lambda _, c: tree_where(running(c), body(c), c), carry)
