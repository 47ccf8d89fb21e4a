"""The cutting-plane master of the exact solver (I >= 2): a small QP on the dual.

Given the extended-DP vertices collected so far (their objective costs `values_j = c.q_j`
and constraint values `images_j = D q_j`), the master maximises the model of `psi` they
define,

    max_{mu >= 0, t}  t - mu.(mu - 2 lambda) / (2 eta) - mu.alpha
    s.t.              t <= values_j + mu.images_j   for every collected vertex j,

whose maximiser is the next query point and whose cut multipliers `w` (on the simplex) are
the weights of the vertices in the primal point `q = sum_j w_j q_j`. It is solved in
scale-free variables by a primal-dual interior-point method (`master`), with the Newton
systems solved by an unrolled Cholesky (`spd_solve`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .. import numerics

# Largest system `spd_solve` writes out as scalar code (an unrolled Cholesky); larger
# ones go to `jnp.linalg.solve` (a batched LU under `vmap` on XLA:CPU was a fifth of the
# I = 2 dual step: docs/design.md, "Tuned constants").
UNROLLED_SOLVE_MAX = 8
# The interior point's stop: every row's complementarity and the residuals within this
# many rounding units (relative to the largest offset), or its step budget.
CONVERGED = 4


def spd_solve(a, b):
  """`a^{-1} b` for a small symmetric positive definite `a` `[n, n]` (Cholesky).

  For `n <= UNROLLED_SOLVE_MAX`, straight-line scalar code that XLA fuses into a few
  elementwise kernels (batched over any vmapped axes). A pivot that rounding made
  non-positive is raised to `eps` times its diagonal entry (plus the smallest normal):
  the answer stays finite, like LU's on a nearly singular system, instead of a NaN that
  would freeze the interior-point iterate. Larger systems use `jnp.linalg.solve`.
  """
  n = a.shape[0]
  if n > UNROLLED_SOLVE_MAX:
    return jnp.linalg.solve(a, b)
  zero = jnp.zeros((), a.dtype)
  low: list[list[jax.Array]] = [[zero] * n for _ in range(n)]
  info = jnp.finfo(a.dtype)
  for j in range(n):
    diag = a[j, j] - sum((low[j][k] ** 2 for k in range(j)), jnp.zeros((), a.dtype))
    low[j][j] = jnp.sqrt(jnp.maximum(diag, info.eps * jnp.abs(a[j, j]) + info.tiny))
    for i in range(j + 1, n):
      off = a[i, j] - sum((low[i][k] * low[j][k] for k in range(j)), jnp.zeros((), a.dtype))
      low[i][j] = off / low[j][j]
  y: list[jax.Array] = []
  for i in range(n):
    y.append((b[i] - sum((low[i][k] * y[k] for k in range(i)), jnp.zeros((), a.dtype))) / low[i][i])
  x: list[jax.Array] = [zero] * n
  for i in reversed(range(n)):
    x[i] = (y[i] - sum((low[k][i] * x[k] for k in range(i + 1, n)), jnp.zeros((), a.dtype))) / low[
      i
    ][i]
  return jnp.stack(x)


def master(
  values,
  images,
  mask,
  thresholds,
  multipliers,
  eta,
  *,
  num_steps: int = 40,
  early: bool = True,
  converge: bool = False,
):
  """The cutting-plane master: `max_{mu >= 0, t} t - mu.(mu - 2 lambda)/(2 eta) - mu.alpha`
  s.t. `t <= values_j + mu . images_j` for the collected vertices `j` (`mask`).

  Solved in scale-free variables: `mu = lambda + eta v` and `t = L_min + eta tau`, with
  `L_j = values_j + lambda . images_j` the vertices' Lagrangians at `lambda`. Dividing by
  `eta` gives `max_{v >= -lambda/eta, tau} tau - v.alpha - ||v||^2 / 2` s.t.
  `tau <= (L_j - L_min)/eta + v . images_j`: unit curvature, and at the optimum
  `v = [lambda/eta + Y w - alpha]_+ - lambda/eta` is of the order of the constraint
  values whatever `eta` (in `mu` the system's scale grows with `eta`, and a fixed number
  of interior-point steps then stopped far from the optimum: the cause of inexact solves
  at large `eta`).

  A small dense QP in the `I + 1` variables `x = (v, tau)`, solved by a primal-dual
  interior-point method (`num_steps` Mehrotra predictor-corrector steps, to 0.99 of the
  boundary). `converge=True`: stop once converged (`CONVERGED`; the cutting planes' loop
  masters, where the loop may stop early); `False`: every step. `early`: a
  `lax.while_loop`; `False`: a `lax.fori_loop` of `num_steps` (reverse-differentiable)
  whose converged iterate stays put (the same numbers). docs/design.md ("The inner
  problem and its solvers") says why each choice.
  Returns `mu` and the cut multipliers `w = z_cuts` (`w >= 0`, `sum w = 1` at the optimum:
  the weights of the vertices in the primal point).
  """
  dtype = values.dtype
  num_constraints = thresholds.shape[0]
  slots = values.shape[0]
  qp = _scale_free_qp(values, images, mask, thresholds, multipliers, eta)
  x = jnp.concatenate([jnp.zeros((num_constraints,), dtype), -jnp.ones((1,), dtype)])
  slack = jnp.maximum(qp.h - numerics.matmul(qp.g, x), 1.0)
  dual = jnp.ones_like(slack)
  # Stop once the iterate is optimal to rounding: the complementarity gap and the
  # residuals below `CONVERGED` (relative); `num_steps` at most. Under vmap the loop runs
  # until its slowest member converges (about 12-20 steps, where 40 were always paid).
  tol = CONVERGED * jnp.finfo(dtype).eps

  def unconverged(carry):
    i, state = carry
    return (i < num_steps) & (_unconverged(qp, state, tol) if converge else True)

  def advance(carry):
    i, state = carry
    return i + 1, _mehrotra_step(qp, state)

  carry = (jnp.zeros((), jnp.int32), (x, slack, dual))
  if early:
    _, (x, slack, dual) = lax.while_loop(unconverged, advance, carry)
  else:  # reverse-differentiable: the whole budget, a converged iterate kept as it is
    keep = lambda c: jax.tree.map(lambda u, v: jnp.where(unconverged(c), u, v), advance(c), c)
    _, (x, slack, dual) = lax.fori_loop(0, num_steps, lambda _, c: keep(c), carry)
  w = jnp.where(mask, dual[:slots], 0.0)
  mu = jnp.maximum(multipliers + eta * x[:-1], 0.0)
  return mu, w / jnp.sum(w)


class _QP(NamedTuple):
  """`min 1/2 x'Px + p'x` s.t. `Gx + s = h`, `s >= 0`, with `P = diag(curvature)`."""

  curvature: jax.Array  # [I + 1]
  linear: jax.Array  # [I + 1] p
  g: jax.Array  # [slots + I, I + 1] G
  h: jax.Array  # [slots + I]


def _scale_free_qp(values, images, mask, thresholds, multipliers, eta) -> _QP:
  """The master in the scale-free variables `x = (v, tau)` (`master`'s docstring)."""
  dtype = values.dtype
  num_constraints = thresholds.shape[0]
  n = num_constraints + 1
  slots = values.shape[0]
  lagrangians = values + numerics.matmul(images, multipliers)
  low = jnp.min(jnp.where(mask, lagrangians, jnp.inf))
  offsets = jnp.where(mask, (lagrangians - low) / eta, 1.0)
  floor = multipliers / eta  # v >= -lambda / eta, i.e. mu >= 0
  # Rows: cuts (tau - y_j . v <= offset_j; unused slots become 0 <= 1), then -v_i <= floor_i.
  cut_rows = jnp.concatenate([-images, jnp.ones((slots, 1), dtype)], axis=1)
  cut_rows = jnp.where(mask[:, None], cut_rows, 0.0)
  g = jnp.concatenate([cut_rows, -jnp.eye(num_constraints, n, dtype=dtype)], axis=0)
  h = jnp.concatenate([offsets, floor])
  curvature = jnp.concatenate([jnp.ones((num_constraints,), dtype), jnp.zeros((1,), dtype)])
  linear = jnp.concatenate([thresholds, -jnp.ones((1,), dtype)])
  return _QP(curvature, linear, g, h)


def _mehrotra_step(qp: _QP, carry):
  """One predictor-corrector step from `(x, slack, dual)`, to 0.99 of the boundary (the
  iterate is kept where the step is not finite and interior)."""
  curvature, linear, g, h = qp
  x, slack, dual = carry
  r_dual = curvature * x + linear + numerics.matmul(g.T, dual)
  r_primal = numerics.matmul(g, x) + slack - h
  gap = numerics.dot(slack, dual) / slack.shape[0]
  weight = dual / slack
  lhs = jnp.diag(curvature) + numerics.matmul((g * weight[:, None]).T, g)

  def direction(r_cent):
    rhs = -r_dual - numerics.matmul(g.T, (r_cent + dual * r_primal) / slack)
    dx = spd_solve(lhs, rhs)
    ds = -r_primal - numerics.matmul(g, dx)
    return dx, ds, (r_cent - dual * ds) / slack

  def longest(v, dv):
    return jnp.min(jnp.where(dv < 0, -v / jnp.where(dv < 0, dv, -1.0), jnp.inf))

  # Mehrotra's predictor-corrector: an affine-scaling step sets the centring
  # (sigma = (gap after it / gap)^3) and its second-order term corrects the step.
  _, ds_aff, dz_aff = direction(-slack * dual)
  step_aff = jnp.minimum(1.0, jnp.minimum(longest(slack, ds_aff), longest(dual, dz_aff)))
  gap_aff = numerics.dot(slack + step_aff * ds_aff, dual + step_aff * dz_aff) / slack.shape[0]
  sigma = jnp.clip(gap_aff / jnp.where(gap > 0, gap, 1.0), 0.0, 1.0) ** 3
  dx, ds, dz = direction(-slack * dual - ds_aff * dz_aff + sigma * gap)
  alpha = jnp.minimum(1.0, 0.99 * jnp.minimum(longest(slack, ds), longest(dual, dz)))
  new = (x + alpha * dx, slack + alpha * ds, dual + alpha * dz)
  ok = jnp.all(jnp.isfinite(new[0])) & jnp.all(new[1] > 0) & jnp.all(new[2] > 0)
  return jax.tree.map(lambda u, v: jnp.where(ok, u, v), new, (x, slack, dual))


def _unconverged(qp: _QP, carry, tol) -> jax.Array:
  """Whether `(x, slack, dual)` is not yet optimal to `tol` (relative to `h`)."""
  curvature, linear, g, h = qp
  x, slack, dual = carry
  r_dual = curvature * x + linear + numerics.matmul(g.T, dual)
  r_primal = numerics.matmul(g, x) + slack - h
  scale = 1.0 + jnp.max(jnp.abs(h))
  # Each row's complementarity, not their mean: the mean over the memory's slots (most of
  # them empty rows `0 <= 1`) let the loop's masters stop with weights too inexact for
  # the cutting planes' own stop, which then took its whole budget (a 10-state CMDP with
  # I = 2 at eta 100, warm cuts: 30 DPs per solve where 1 sufficed).
  gap = jnp.max(slack * dual)
  worst = jnp.maximum(gap, jnp.maximum(jnp.max(jnp.abs(r_dual)), jnp.max(jnp.abs(r_primal))))
  return worst > tol * scale
