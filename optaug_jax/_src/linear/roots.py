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


class _Carry(NamedTuple):
  steps: jax.Array  # [] int32, evaluations of `g`
  lo: jax.Array
  hi: jax.Array
  f_lo: jax.Array  # the value kept for `lo` (halved by the Illinois rule)
  f_hi: jax.Array
  has_lo: jax.Array  # [] bool, a point with g > 0 was seen
  has_hi: jax.Array  # [] bool, a point with g <= 0 was seen
  side: jax.Array  # [] int32, the end the last bracketed step moved (+1 lo, -1 hi, 0 none)
  delta: jax.Array  # [] the next step away from the one known end (before a bracket)
  end_lo: End
  end_hi: End


def _point(c: _Carry, lower, upper, margin):
  """The next point: inside a bracket the Illinois point (a midpoint where the
  interpolation leaves the open bracket), kept `margin` from the ends (Brent's rule: a root
  that close to the end last moved is bracketed by the next evaluation, not crept up on);
  with one end known, `delta` away from it towards the other side."""
  falsi = (c.lo * c.f_hi - c.hi * c.f_lo) / (c.f_hi - c.f_lo)
  inside = (falsi > c.lo) & (falsi < c.hi)
  x = jnp.where(inside, falsi, 0.5 * (c.lo + c.hi))
  if margin is not None:
    roomy = c.hi - c.lo > 2.0 * margin
    x = jnp.where(roomy, jnp.clip(x, c.lo + margin, c.hi - margin), 0.5 * (c.lo + c.hi))
  down = jnp.maximum(c.hi - c.delta, lower)
  up = jnp.minimum(c.lo + c.delta, upper)
  return jnp.where(c.has_lo & c.has_hi, x, jnp.where(c.has_hi, down, up))


def _absorb(c: _Carry, x, end: End, growth) -> _Carry:
  """The carry after `g(x) = end`: `x` becomes the end on its side; within a bracket, the
  end that stays a second time has its value halved (Illinois)."""
  above = end.value > 0
  bracketed = c.has_lo & c.has_hi
  f_hi = jnp.where(above, jnp.where(bracketed & (c.side > 0), 0.5 * c.f_hi, c.f_hi), end.value)
  f_lo = jnp.where(above, end.value, jnp.where(bracketed & (c.side < 0), 0.5 * c.f_lo, c.f_lo))
  side = jnp.where(bracketed, jnp.where(above, 1, -1), 0).astype(jnp.int32)
  pick = lambda a, b: jax.tree.map(lambda u, v: jnp.where(above, u, v), a, b)
  return _Carry(
    steps=c.steps + 1,
    lo=jnp.where(above, x, c.lo),
    hi=jnp.where(above, c.hi, x),
    f_lo=f_lo,
    f_hi=f_hi,
    has_lo=c.has_lo | above,
    has_hi=c.has_hi | ~above,
    side=side,
    delta=c.delta * growth,
    end_lo=pick(end, c.end_lo),
    end_hi=pick(c.end_hi, end),
  )


def _narrow(g, c: _Carry, keep_going, max_steps, lower, upper, margin, growth) -> _Carry:
  def body(c):
    x = _point(c, lower, upper, margin)
    return _absorb(c, x, g(x), growth)

  return lax.while_loop(lambda c: (c.steps < max_steps) & keep_going(c), body, c)


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
  yes, zero = jnp.ones((), bool), jnp.zeros((), jnp.int32)
  c = _Carry(zero, lo, hi, end_lo.value, end_hi.value, yes, yes, zero, jnp.zeros_like(lo),
             end_lo, end_hi)  # fmt: skip
  c = _narrow(g, c, lambda c: is_open(c.lo, c.hi), max_steps, lo, hi, None, 1.0)
  return Bracket(c.steps, c.lo, c.hi, c.end_lo, c.end_hi)


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
  `tolerance` wide. It stops early where `g(lower) <= 0` or `g(upper) > 0` (no sign change
  inside: `has_lo` or `has_hi` false). A guess within `step` of the root costs 2
  evaluations and the narrowing; one far off, a few more per factor `growth` of distance.
  `g(x) -> End`."""
  like = g(start)  # the first evaluation
  no, zero = jnp.zeros((), bool), jnp.zeros((), jnp.int32)
  c = _Carry(zero, lower, upper, like.value, like.value, no, no, zero, step / growth, like, like)
  c = _absorb(c, start, like, growth)

  def keep_going(c):
    narrow = c.has_lo & c.has_hi & (c.hi - c.lo <= tolerance)
    return ~(narrow | (c.has_hi & (c.hi <= lower)) | (c.has_lo & (c.lo >= upper)))

  c = _narrow(g, c, keep_going, max_steps, lower, upper, NUDGE * tolerance, growth)
  return Search(c.steps, c.lo, c.hi, c.end_lo, c.end_hi, c.has_lo, c.has_hi)
