"""Per-step ridge regression on the features, the elliptical bonus and `P_hat V` (the
estimates of LSVI-UCB, Jin et al. 2020, as OPSE and Ghosh et al. use them).

With the episodes' samples `(phi_i, s'_i)` at step `h` (`phi_i = phi(s_h, a_h)`,
`s'_i = s_{h+1}`) and the ridge `rho`:

    Lambda_h = rho I + sum_i phi_i phi_i^T,
    (P_hat_h V)(s, a) = phi(s, a)^T Lambda_h^{-1} sum_i phi_i V(s'_i),
    beta_h(s, a) = ||phi(s, a)||_{Lambda_h^{-1}}.

**What is kept, and why.** `Lambda_h` is rebuilt from integer visit counts, `Lambda_h = rho
I + sum_{s,a} n_h(s, a) phi(s, a) phi(s, a)^T`: exact counts, so float32 loses nothing
over 10^6 episodes (a running float32 sum of `phi phi^T` drifts by about `n eps`
relative, and a Sherman-Morrison inverse compounds its own rounding every update).
`sum_i phi_i V(s'_i) = targets_h^T V` with `targets_h[s'] = sum_{i: s'_i = s'} phi_i`
(`[S, d]` per step), accumulated with Kahan's compensated sum (its error stays at a few
rounding units of the total, not `n` of them). Both are checked against a float64 NumPy
refit in tests/test_linear.py.

**Cost.** A plan factors each `Lambda_h` once (`O(H (S A d^2 + d^3))`, the gram from the
counts, the bonus `||L_h^{-1} phi||` through each factor's inverse, and `Lambda_h^{-1}
targets_h^T`, `O(H d^2 S)`), then each `P_hat V` is `O(S d + S A d)` per step: two matrix-
vector products. The `[H, S, A, S]` estimate of the enumerated form (`O(H S^2 A d)` to
build, `O(S^2 A)` per backup) is never formed. `S` enters linearly through `targets` and the
features' table; a form over the observed `s'_i` only would still evaluate `V` at every
state in a backward pass, so it would save nothing here.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import numerics


class Ridge(NamedTuple):
  """The sufficient statistics of the per-step ridge regressions."""

  visits: jax.Array  # [H, S, A] int32, n_h(s, a)
  targets: jax.Array  # [H, S, d] sum of phi_i over the samples with s'_i = s'
  compensation: jax.Array  # [H, S, d] Kahan's running compensation of `targets`

  @classmethod
  def zeros(cls, horizon: int, num_states: int, num_actions: int, num_features: int, dtype):
    return cls(
      visits=jnp.zeros((horizon, num_states, num_actions), jnp.int32),
      targets=jnp.zeros((horizon, num_states, num_features), dtype),
      compensation=jnp.zeros((horizon, num_states, num_features), dtype),
    )


def update(ridge: Ridge, features: jax.Array, states: jax.Array, actions: jax.Array) -> Ridge:
  """`ridge` with one episode: `states [H + 1]`, `actions [H]`, `features [H, S, A, d]`."""
  horizon = actions.shape[0]
  steps = jnp.arange(horizon)
  s, a, nxt = states[:-1], actions, states[1:]
  visits = ridge.visits.at[steps, s, a].add(1)
  phi = features[steps, s, a]  # [H, d]
  # Kahan's compensated sum, one entry per step (distinct h: no two writes meet).
  y = phi - ridge.compensation[steps, nxt]
  old = ridge.targets[steps, nxt]
  total = old + y
  compensation = ridge.compensation.at[steps, nxt].set((total - old) - y)
  targets = ridge.targets.at[steps, nxt].set(total)
  return Ridge(visits, targets, compensation)


class Estimate(NamedTuple):
  """What a plan reads: each step's Cholesky factor of `Lambda_h` and the bonus."""

  factor: jax.Array  # [H, d, d] lower Cholesky factor of Lambda_h
  bonus: jax.Array  # [H, S, A] beta_h(s, a) = ||phi(s, a)||_{Lambda_h^{-1}}
  targets: jax.Array  # [H, S, d]
  weights: jax.Array  # [H, d, S] Lambda_h^{-1} targets_h^T: P_hat_h V = phi (weights_h V)


def gram(ridge: Ridge, features: jax.Array, rho) -> jax.Array:
  """`Lambda_h = rho I + sum_{s,a} n_h(s, a) phi phi^T`, `[H, d, d]`."""
  dtype = features.dtype
  n = ridge.visits.astype(dtype)
  out = numerics.einsum("hsad,hsa,hsae->hde", features, n, features)
  return out + rho * jnp.eye(features.shape[-1], dtype=dtype)


def estimate(ridge: Ridge, features: jax.Array, rho) -> Estimate:
  """Factors each `Lambda_h` and computes the bonus (`features [H, S, A, d]`)."""
  factor = jnp.linalg.cholesky(gram(ridge, features, rho))
  d = features.shape[-1]
  # beta = ||L^{-1} phi||: the d x d inverse of each factor, then one matrix product over
  # the features (a triangular solve with S A right-hand sides runs at a third of its speed
  # on CPUs).
  eye = jnp.eye(d, dtype=features.dtype)
  inverse = jax.vmap(lambda chol: jax.scipy.linalg.solve_triangular(chol, eye, lower=True))(factor)
  z = numerics.einsum("hsad,hed->hsae", features, inverse)
  weights = jax.vmap(lambda chol, t: jax.scipy.linalg.cho_solve((chol, True), t.T))(
    factor, ridge.targets
  )
  return Estimate(factor, jnp.sqrt(jnp.sum(z * z, axis=-1)), ridge.targets, weights)


def expected_next(est: Estimate, features: jax.Array, h, values: jax.Array) -> jax.Array:
  """`(P_hat_h V)(s, a)` for all `(s, a)`, `[S, A]` (`values [S]`: `V_{h+1}`, `features`
  `[H, S, A, d]`); `O(S d + S A d)`: two matrix-vector products, `Lambda_h^{-1} targets_h^T`
  being factored once per plan (`estimate`)."""
  return numerics.matmul(features[h], numerics.matmul(est.weights[h], values))
