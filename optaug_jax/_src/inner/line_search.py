"""The exact line search on the augmented Lagrangian (used by Frank-Wolfe, the I = 1 dual
search's last step, and the pairwise polish of the cutting-plane weights).

Along `q + t d`, `t in [0, 1]`, the objective of eq. (step1) is, up to a constant,

    phi(t) = t g_dir + (eta / 2) ||[a + t b]_+||^2,   a = lambda / eta + (D q - alpha),
                                                       b = D d,  g_dir = c . d,

a convex piecewise quadratic whose pieces change where some `a_i + t b_i` crosses 0 (at
most I breakpoints). On each piece the active set is fixed and the minimiser is
closed-form; the global minimiser is the best clipped piece-minimiser. The scale-free form
(no factor eta inside `a`, `b`) keeps every intermediate of the order of the constraint
values, whatever eta.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def exact_line_search(g_dir: jax.Array, a: jax.Array, b: jax.Array, eta) -> jax.Array:
  """`argmin_{t in [0, 1]} t g_dir + (eta / 2) ||[a + t b]_+||^2`, exactly (`a`, `b`: `[I]`)."""
  dtype = a.dtype
  safe_b = jnp.where(b == 0, 1.0, b)
  crossings = jnp.where(b == 0, 0.0, jnp.clip(-a / safe_b, 0.0, 1.0))
  knots = jnp.sort(jnp.concatenate([jnp.zeros((1,), dtype), crossings, jnp.ones((1,), dtype)]))
  left, right = knots[:-1], knots[1:]  # [I + 1] pieces
  mid = 0.5 * (left + right)
  active = (a[None, :] + mid[:, None] * b[None, :]) > 0  # [I + 1, I]
  curvature = jnp.sum(jnp.where(active, b * b, 0.0), axis=1)
  slope0 = g_dir / eta + jnp.sum(jnp.where(active, a * b, 0.0), axis=1)
  safe_curv = jnp.where(curvature > 0, curvature, 1.0)
  t_free = jnp.where(curvature > 0, -slope0 / safe_curv, jnp.where(slope0 > 0, -jnp.inf, jnp.inf))
  t = jnp.clip(t_free, left, right)
  # Compare the pieces by their change from t = 0, not by absolute values: a short step
  # (a small weight moved, a small `b`) changes the objective far below the rounding of
  # `||a||^2`, and absolute values would then tie and freeze the step at t = 0.
  moved = a + t[:, None] * b
  now, before = jnp.maximum(moved, 0.0), jnp.maximum(a, 0.0)
  change = jnp.where((moved > 0) & (a > 0), t[:, None] * b, now - before)
  values = t * g_dir + 0.5 * eta * jnp.sum(change * (now + before), axis=1)
  return t[jnp.argmin(values)]
