"""The bracketing root finder of the linear agents' multiplier searches: the Illinois
method (regula falsi whose end kept twice in a row has its value halved), a midpoint where
the interpolation leaves the open bracket (rounding).

Each evaluation is a backward pass, so an end carries its backup (`aux`) and the end that
is returned is never computed twice. OptAug's primal step (`agents.optaug_linear`) finds the
fixed point of its multiplier with it; OPSE and Ghosh et al.'s agent (`peers`) the smallest
multiplier whose policy meets the constraint, where their code bisects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax


class End(NamedTuple):
  """One end of the bracket: the function's value and the backup it came with."""

  value: jax.Array  # []
  aux: Any  # the backup (policy, values) of this point


class Bracket(NamedTuple):
  steps: jax.Array  # [] int32, the evaluations inside the loop
  lo: jax.Array  # [] with g(lo) > 0
  hi: jax.Array  # [] with g(hi) <= 0
  end_lo: End
  end_hi: End


def illinois(
  g: Callable[[jax.Array], End],
  lo: jax.Array,
  hi: jax.Array,
  end_lo: End,
  end_hi: End,
  is_open: Callable[[jax.Array, jax.Array], jax.Array],
  max_steps: int,
) -> Bracket:
  """Narrows `[lo, hi]` with `g(lo) > 0 >= g(hi)` (`end_lo`, `end_hi`: `g` there) while
  `is_open(lo, hi)` and fewer than `max_steps` evaluations were made; `g(x) -> End`."""

  def open_(c):
    return (c[0] < max_steps) & is_open(c[1], c[2])

  def narrow(c):
    i, lo, hi, f_lo, f_hi, side, end_lo, end_hi = c
    falsi = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
    inside = (falsi > lo) & (falsi < hi)
    mid = jnp.where(inside, falsi, 0.5 * (lo + hi))
    end_mid = g(mid)
    above = end_mid.value > 0
    # Illinois: the end that stays for a second time has its value halved.
    f_hi = jnp.where(above, jnp.where(side > 0, 0.5 * f_hi, f_hi), end_mid.value)
    f_lo = jnp.where(above, end_mid.value, jnp.where(side < 0, 0.5 * f_lo, f_lo))
    side = jnp.where(above, 1, -1).astype(jnp.int32)
    pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(above, x, y), a, b)
    lo, hi = jnp.where(above, mid, lo), jnp.where(above, hi, mid)
    return i + 1, lo, hi, f_lo, f_hi, side, pick(end_mid, end_lo), pick(end_hi, end_mid)

  zero = jnp.zeros((), jnp.int32)
  start = (zero, lo, hi, end_lo.value, end_hi.value, zero, end_lo, end_hi)
  steps, lo, hi, _, _, _, end_lo, end_hi = lax.while_loop(open_, narrow, start)
  return Bracket(steps, lo, hi, end_lo, end_hi)


# `search_from`'s narrowing keeps its points this share of the tolerance away from the
# bracket's ends (Brent's rule).
NUDGE = 0.45


class Search(NamedTuple):
  steps: jax.Array  # [] int32, the evaluations of `g`
  lo: jax.Array  # [] the largest point seen with g > 0 (`lower` if none)
  hi: jax.Array  # [] the smallest point seen with g <= 0 (`upper` if none)
  end_lo: End  # g at `lo` (valid where `has_lo`)
  end_hi: End  # g at `hi` (valid where `has_hi`)
  has_lo: jax.Array  # [] bool, a point with g > 0 was seen
  has_hi: jax.Array  # [] bool, a point with g <= 0 was seen


def search_from(
  g: Callable[[jax.Array], End],
  start: jax.Array,
  lower: jax.Array,
  upper: jax.Array,
  step: jax.Array,
  tolerance: jax.Array,
  max_steps: int,
  *,
  growth: float = 4.0,
) -> Search:
  """The sign change of a nonincreasing-in-sign `g` on `[lower, upper]` (`g > 0` below it,
  `g <= 0` above), from a guess: `g(start)`, then steps away from it that grow by `growth`
  (first `step`, clipped to `[lower, upper]`) until the sign changes, then the Illinois
  method on that bracket, its points kept `NUDGE tolerance` from the ends, until it is
  `tolerance` wide. It stops early where `g(lower) <= 0`
  or `g(upper) > 0` (no sign change inside: `has_lo` or `has_hi` false). A guess within
  `step` of the root costs 2 evaluations and the narrowing; one far off, a few more per
  factor `growth` of distance. `g(x) -> End`."""
  like = g(start)  # the end's structure; the first evaluation

  def done(c):
    _, lo, hi, _, _, has_lo, has_hi = c[:7]
    narrow = has_lo & has_hi & (hi - lo <= tolerance)
    return narrow | (has_hi & (hi <= lower)) | (has_lo & (lo >= upper))

  def point(c):
    _, lo, hi, f_lo, f_hi, has_lo, has_hi, _, delta = c[:9]
    falsi = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
    inside = (falsi > lo) & (falsi < hi)
    illinois = jnp.where(inside, falsi, 0.5 * (lo + hi))
    # Brent's rule: no closer than `margin` to an end, so a root that close to the end last
    # moved is bracketed by the next evaluation instead of crept up on from one side.
    margin = NUDGE * tolerance
    roomy = hi - lo > 2.0 * margin
    illinois = jnp.where(roomy, jnp.clip(illinois, lo + margin, hi - margin), 0.5 * (lo + hi))
    down = jnp.maximum(hi - delta, lower)
    up = jnp.minimum(lo + delta, upper)
    return jnp.where(has_lo & has_hi, illinois, jnp.where(has_hi, down, up))

  def absorb(c, x, end):
    """The state after `g(x) = end`: `x` becomes the end on its side."""
    i, lo, hi, f_lo, f_hi, has_lo, has_hi, side, delta, end_lo, end_hi = c
    above = end.value > 0
    bracketed = has_lo & has_hi
    # Illinois: within a bracket, the end that stays a second time has its value halved.
    f_hi = jnp.where(above, jnp.where(bracketed & (side > 0), 0.5 * f_hi, f_hi), end.value)
    f_lo = jnp.where(above, end.value, jnp.where(bracketed & (side < 0), 0.5 * f_lo, f_lo))
    side = jnp.where(bracketed, jnp.where(above, 1, -1), 0).astype(jnp.int32)
    pick = lambda a, b: jax.tree.map(lambda u, v: jnp.where(above, u, v), a, b)
    return (
      i + 1,
      jnp.where(above, x, lo),
      jnp.where(above, hi, x),
      f_lo,
      f_hi,
      has_lo | above,
      has_hi | ~above,
      side,
      delta * growth,
      pick(end, end_lo),
      pick(end_hi, end),
    )

  def body(c):
    x = point(c)
    return absorb(c, x, g(x))

  zero = jnp.zeros((), jnp.int32)
  no = jnp.zeros((), bool)
  first = (zero, lower, upper, like.value, like.value, no, no, zero, step / growth, like, like)
  c = absorb(first, start, like)
  c = lax.while_loop(lambda c: (c[0] < max_steps) & ~done(c), body, c)
  i, lo, hi, _, _, has_lo, has_hi, _, _, end_lo, end_hi = c
  return Search(i, lo, hi, end_lo, end_hi, has_lo, has_hi)
