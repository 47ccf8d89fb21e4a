"""The Fenchel dual of the inner problem, on which the exact solver works.

Write eq. (step1) as `f(q) = c.q + g(Dq)` with `g(y) = ||[lambda + eta (y - alpha)]_+||^2 /
(2 eta)`. Then `min_Z f = max_{mu >= 0} psi(mu)` with

    psi(mu) = Phi(mu) - mu.alpha - (||mu - lambda||^2 - ||lambda||^2) / (2 eta),
    Phi(mu) = min_{q in Z} (c + D^T mu).q          (one extended DP),

strongly concave (modulus `1/eta`), and its maximiser is `mu* = lambda_{k+1}`: each OptAug
episode is one proximal-point step on the optimistic dual function. `psi(mu) <= f*` for
every `mu >= 0` (weak duality), so the best `psi` queried certifies any primal point.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def dual_value(mu, phi, thresholds, multipliers, eta) -> jax.Array:
  """`psi(mu)` given `Phi(mu) = phi` (the extended DP's value at the costs `c + D^T mu`)."""
  return phi - jnp.dot(mu, thresholds) - jnp.dot(mu, mu - 2.0 * multipliers) / (2.0 * eta)


def default_num_iters(dtype, num_constraints: int) -> int:
  """Search steps (I = 1) or cutting planes (I >= 2) that reach the dtype's accuracy."""
  if num_constraints == 1:
    return 58 if jnp.finfo(dtype).bits >= 64 else 30
  return 80 if jnp.finfo(dtype).bits >= 64 else 50
