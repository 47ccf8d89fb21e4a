"""The composite softmax backup of the linear agents (cost convention: minimise).

One backward pass over `h` computes, for each component `k` (the objective `k = 0`, then
each constraint), the clipped optimistic Q-function of the one policy they share,

    Q^k_h(s, a) = g^k_h(s, a) + clip((P_hat_h V^k_{h+1})(s, a) - C_k beta_h(s, a),
                                     l_k (H - h - 1), H - h - 1),

(`l_0 = -tau ln A` for the entropy-regularised objective, `l_k = 0` for the constraints;
`h` 0-based, so `H - h - 1` steps follow step `h`), and the policy

    pi_h(. | s) = softmax(-(sum_k w_k Q^k_h(s, .)) / tau),

with `V^0_h = sum_a pi (Q^0_h + tau ln pi)` and `V^k_h = sum_a pi Q^k_h` for `k >= 1`. With
`w = (1, mu)` it is the soft best response to the optimistic Lagrangian at `mu` (OptDual
and OptAug on linear CMDPs); the clipping keeps each value in the range of the true one
(Kitamura et al. 2025 clip each component the same way; in their reward convention the
bonus is added).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from . import ridge as ridge_lib


class Backup(NamedTuple):
  policy: jax.Array  # [H, S, A]
  values: jax.Array  # [K, S] V^k_1 of every state (k = 0: the objective, entropy included)


def composite_softmax(
  est: ridge_lib.Estimate,
  features: jax.Array,
  costs: jax.Array,
  bonus_scales: jax.Array,
  weights: jax.Array,
  temperature,
) -> Backup:
  """The backward pass of the module docstring. `costs [K, H, S, A]` (`g^k`), `bonus_scales
  [K]` (`C_k`), `weights [K]` (`w_k`), `temperature` (`tau > 0`); `features [H, S, A, d]`."""
  num, horizon, num_states, num_actions = costs.shape
  dtype = costs.dtype
  tau = jnp.asarray(temperature, dtype)
  lows = jnp.zeros((num,), dtype).at[0].set(-tau * jnp.log(jnp.asarray(num_actions, dtype)))

  def step(values, h):  # values [K, S]: V^k_{h+1}
    after = (horizon - h - 1).astype(dtype)
    future = jax.vmap(lambda v: ridge_lib.expected_next(est, features, h, v))(values)
    future = future - bonus_scales[:, None, None] * est.bonus[h][None]
    future = jnp.clip(future, lows[:, None, None] * after, after)
    q = costs[:, h] + future  # [K, S, A]
    logits = -jnp.einsum("k,ksa->sa", weights, q) / tau
    log_pi = jax.nn.log_softmax(logits, axis=-1)
    pi = jnp.exp(log_pi)
    new = jnp.einsum("sa,ksa->ks", pi, q)
    new = new.at[0].add(tau * jnp.sum(pi * log_pi, axis=-1))
    return new, pi

  values, policy = lax.scan(
    step, jnp.zeros((num, num_states), dtype), jnp.arange(horizon - 1, -1, -1)
  )
  return Backup(policy[::-1], values)
