"""The composite softmax backup of the linear agents: several clipped Q-functions of one
softmax policy, in one backward pass.

For each component `k` (`k = 0` carries the entropy term) and step `h` (0-based),

    Q^k_h(s, a) = g^k_h(s, a) + b^k_out beta_h(s, a)
                  + clip((P_hat_h V^k_{h+1})(s, a) + b^k_in beta_h(s, a),
                         l_k T_h, u_k T_h),

with `T_h = H - h - 1` (the steps after `h`: the range of the true future value) or, with
`loose=True`, `H - h` (how Kitamura et al.'s code clips, one step looser), and the policy
of the combination, `sense = +1` minimising (costs) and `-1` maximising (rewards),

    pi_h(. | s) = softmax(-sense (sum_k w_k Q^k_h(s, .)) / tau),
    V^k_h = sum_a pi (Q^k_h + e_k sense tau ln pi),

`e_k` 1 for the component that carries the entropy (the objective), else 0.

- OptAug and OptDual (costs, `sense = +1`): `(c, d_i)`, `b_in = (-C_c, -C_d)` (optimism
  lowers costs), `l = (-tau ln A, 0)`, `u = 1`, `w = (1, mu)`: the soft best response to the
  optimistic Lagrangian at `mu`.
- OPSE (Kitamura et al. 2025; rewards, `sense = -1`): the reward `r` optimistic
  (`b_in = C_r`, `u = 1 + tau ln A`), the pessimism compensation "dagger" (`g = 0`,
  `b_out = B_d`, `b_in = C_d`, `u = B_d`) and the utility `u` pessimistic (`b_in = -C_u`),
  `w = (1, 1, lambda)`. Their code weighs the entropy as `sum_a pi (Q + tau entr(pi))`, i.e.
  `-tau sum_a pi^2 ln pi`; here it is the entropy of their paper, `-tau sum_a pi ln pi`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .. import numerics
from . import ridge as ridge_lib


class Components(NamedTuple):
  """The components of a composite backup (module docstring), `K` of them."""

  costs: jax.Array  # [K, H, S, A] g^k (costs or rewards)
  bonus_in: jax.Array  # [K] b^k_in, the bonus inside the clip (signed)
  bonus_out: jax.Array  # [K] b^k_out, the bonus outside it
  low: jax.Array  # [K] l_k
  high: jax.Array  # [K] u_k
  entropy: jax.Array  # [K] 1 where V^k carries the entropy term (k = 0 of OPSE, OptAug), else 0


class Backup(NamedTuple):
  policy: jax.Array  # [H, S, A]
  values: jax.Array  # [K, S] V^k_1 of every state (with its entropy term where e_k = 1)


def lagrangian_components(cost, constraint_costs, cost_bonus, constraint_bonus, temperature):
  """OptAug's and OptDual's components: the objective and each constraint, optimistic."""
  costs = jnp.concatenate([cost[None], constraint_costs])
  num, dtype = costs.shape[0], costs.dtype
  num_actions = costs.shape[-1]
  bonus_in = jnp.full((num,), -constraint_bonus, dtype).at[0].set(-cost_bonus)
  low = jnp.zeros((num,), dtype).at[0].set(-temperature * jnp.log(jnp.asarray(num_actions, dtype)))
  entropy = jnp.zeros((num,), dtype).at[0].set(1.0)
  zeros, ones = jnp.zeros((num,), dtype), jnp.ones((num,), dtype)
  return Components(costs, bonus_in, zeros, low, ones, entropy)


def _softmax(logits):
  """`(pi, log pi)` over the leading axis of `logits [A, S]`: actions-major, the reductions
  over the major axis (`jax.nn.log_softmax` over a short minor axis, `[S, A]`, runs at a
  third of the speed on CPUs, where it was most of a backward pass's time); one
  exponential per entry."""
  shifted = logits - lax.stop_gradient(jnp.max(logits, axis=0, keepdims=True))
  unnormalised = jnp.exp(shifted)
  total = jnp.sum(unnormalised, axis=0, keepdims=True)
  return unnormalised / total, shifted - jnp.log(total)


def composite_softmax(
  est: ridge_lib.Estimate,
  features: jax.Array,
  components: Components,
  weights: jax.Array,
  temperature,
  *,
  sense: int = 1,
  loose: bool = False,
) -> Backup:
  """The backward pass of the module docstring (`features [H, S, A, d]`, `weights [K]`,
  `temperature > 0`, `sense` +1 to minimise and -1 to maximise, `loose`: clip at `H - h`
  as Kitamura et al.'s code does instead of `H - h - 1`)."""
  num, horizon, num_states, num_actions = components.costs.shape
  dtype = components.costs.dtype
  tau = jnp.asarray(temperature, dtype)
  bonus_in = components.bonus_in[:, None, None]
  bonus_out = components.bonus_out[:, None, None]

  def step(values, h):  # values [K, S]: V^k_{h+1}
    after = (horizon - h - (0 if loose else 1)).astype(dtype)
    future = jax.vmap(lambda v: ridge_lib.expected_next(est, features, h, v))(values)
    future = future + bonus_in * est.bonus[h][None]
    future = jnp.clip(
      future, components.low[:, None, None] * after, components.high[:, None, None] * after
    )
    q = components.costs[:, h] + bonus_out * est.bonus[h][None] + future  # [K, S, A]
    pi, log_pi = _softmax(-sense * numerics.einsum("k,ksa->as", weights, q) / tau)
    new = numerics.einsum("as,ksa->ks", pi, q)
    new = new + components.entropy[:, None] * (sense * tau * jnp.sum(pi * log_pi, axis=0))
    return new, pi.T

  values, policy = lax.scan(
    step, jnp.zeros((num, num_states), dtype), jnp.arange(horizon - 1, -1, -1)
  )
  return Backup(policy[::-1], values)
