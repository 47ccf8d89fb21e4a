"""The peers' agents on linear CMDPs, from their definitions: OPSE (Kitamura et al., NeurIPS
2025) and the softmax primal-dual agent of Ghosh et al. (2024) as Kitamura et al.'s code
runs it. Both work in the reward convention (`r = 1 - c`, `u = 1 - d`, the constraint
`V_u >= b = H - alpha`) and clip as that code does (`planning.composite_softmax(loose=True)`).

- **OPSE** (their Algorithm 2, as their code runs it): three clipped Q-functions of one
  softmax policy, the optimistic entropy-regularised reward (`+ C_r beta`, range `(1 +
  tau ln A)(H - h)`), the pessimism compensation (`B_d beta + clip(C_d beta + P_hat V,
  0, B_d (H - h))`) and the pessimistic utility (`- C_u beta`), `pi = softmax((Q^r +
  Q^dag + lambda Q^u) / tau)`; `lambda` by `bisections` halvings of `[0, C_lambda]`
  (a midpoint whose policy meets `V_u(s_1) >= b` under the pessimistic estimate is an
  upper end); the policy at the upper end is played if it meets the constraint, else the
  baseline (a "safe deployment", `extras["safe_deployment"]`). Their paper's Algorithm 2
  first tests `lambda = C_lambda` and `lambda = 0`; the bisection reaches the same
  decisions to `C_lambda / 2^bisections`.
- **Ghosh et al.** (as Kitamura et al. implement it, a simplification): two optimistic
  Q-functions (`+ C beta` for both, range `H - h`, no entropy in the values), `pi =
  softmax((Q^r + lambda Q^u) / tau)`, the same bisection, the upper end always played.
  The published algorithm searches `lambda` on a grid of size `K^H` (Kitamura et al.,
  Section 1); this bisection stands in for it.

The first episode plays the baseline (`pretrain_episodes = 1`, their start). Their code's
entropy term is `tau sum_a pi entr(pi) = -tau sum_a pi^2 ln pi`; here it is the entropy
of their paper, `-tau sum_a pi ln pi`.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ..agents import registry
from ..agents.base import Agent
from . import planning
from .agents import _agent, _check, problem_args


def _extras(safe, lam, passes):
  return {
    "safe_deployment": jnp.asarray(safe, bool),
    "lambda": lam,
    "backward_passes": jnp.asarray(passes, jnp.int32),
  }


def _no_extras(dtype):
  return _extras(False, jnp.zeros((), dtype), 0)


def _bisection(backup, weights_of, utility_index, need, upper, steps, dtype):
  """The peers' bisection on `[0, upper]`: `(lambda at the upper end, its policy, values)`."""

  def body(_, bracket):
    lo, hi = bracket
    mid = 0.5 * (lo + hi)
    _, values = backup(weights_of(mid))
    safe = values[utility_index] >= need
    return jnp.where(safe, lo, mid), jnp.where(safe, mid, hi)

  zero = jnp.zeros((), dtype)
  _, hi = lax.fori_loop(0, steps, body, (zero, jnp.asarray(upper, dtype)))
  policy, values = backup(weights_of(hi))
  return hi, policy, values


def _reward_view(config):
  """`(r, u [I, H, S, A], horizon)` of the agent's costs (`r = 1 - c`, `u = 1 - d`)."""
  reward = 1.0 - jnp.asarray(config.cost)
  utility = 1.0 - jnp.asarray(config.constraint_costs)
  return reward, utility, config.cost.shape[0]


def _one_constraint(config, name):
  if config.constraint_costs.shape[0] != 1:
    raise ValueError(f"{name}: one constraint only (got {config.constraint_costs.shape[0]})")


@registry.register_agent("opse", problem_args=problem_args)
def opse(
  model,
  safe_policy,
  *,
  cost_bonus: float = 1.0,
  constraint_bonus: float = 1.0,
  compensation_bonus: float = 1.0,
  compensation_scale: float = 1.0,
  multiplier_bound: float = 300.0,
  temperature: float = 0.1,
  bisections: int = 20,
  rho: float = 1.0,
  pretrain_episodes: int = 1,
) -> Agent:
  """OPSE-LCMDP (Kitamura et al. 2025; module docstring). Defaults: their random CMDP's
  constants (`C_r = C_u = C_d = B_d = 1`, `C_lambda = 300`, `tau = 0.1`, 20 bisections).

  Args:
    model: an `oj.linear.LinearCMDP` with one constraint.
    safe_policy: the baseline `pi_sf` `[H, S, A]`.
    cost_bonus, constraint_bonus: `C_r`, `C_u`.
    compensation_bonus, compensation_scale: `C_dagger` (inside the clip) and `B_dagger`.
    multiplier_bound: `C_lambda`.
    temperature: `tau > 0`.
    bisections: halvings of `[0, C_lambda]`.
    rho: the ridge.
    pretrain_episodes: baseline episodes first (their code: 1).

  Returns:
    `Agent(init, plan, update)`: `extras["safe_deployment"]` (the baseline played after
    learning began), `extras["lambda"]`, `extras["backward_passes"]`.
  """
  bonuses = (cost_bonus, constraint_bonus)
  config = _check(model, safe_policy, pretrain_episodes, 1.0, temperature, rho, bonuses)
  _one_constraint(config, "opse")
  if not (compensation_bonus >= 0 and compensation_scale >= 0 and multiplier_bound > 0):
    raise ValueError(
      "opse: compensation_bonus and compensation_scale must be >= 0 and multiplier_bound > 0"
    )
  reward, utility, horizon = _reward_view(config)
  dtype = reward.dtype
  num_actions = reward.shape[-1]
  components = planning.Components(
    costs=jnp.stack([reward, jnp.zeros_like(reward), utility[0]]),
    bonus_in=jnp.asarray([cost_bonus, compensation_bonus, -constraint_bonus], dtype),
    bonus_out=jnp.asarray([0.0, compensation_scale, 0.0], dtype),
    low=jnp.zeros((3,), dtype),
    high=jnp.asarray(
      [1.0 + temperature * float(jnp.log(num_actions)), compensation_scale, 1.0], dtype
    ),
    entropy=jnp.asarray([1.0, 0.0, 0.0], dtype),
  )

  def learning(state, backup):
    need = horizon - state.thresholds[0]  # b

    def weights_of(lam):
      return jnp.stack([jnp.ones((), dtype), jnp.ones((), dtype), lam])

    lam, policy, values = _bisection(
      backup, weights_of, 2, need, multiplier_bound, bisections, dtype
    )
    unsafe = values[2] < need
    policy = jnp.where(unsafe, jnp.asarray(config.safe_policy), policy)
    cost_value, constraint_value = horizon - values[0], horizon - values[2]
    extras = _extras(unsafe, lam, bisections + 1)
    return policy, lam[None], cost_value, constraint_value[None], extras, jnp.bool_(True)

  return _agent(config, learning, components, _no_extras, sense=-1, loose=True)


@registry.register_agent("ghosh_softmax", problem_args=problem_args)
def ghosh_softmax(
  model,
  safe_policy,
  *,
  cost_bonus: float = 1.0,
  constraint_bonus: float = 1.0,
  multiplier_bound: float = 300.0,
  temperature: float = 0.1,
  bisections: int = 20,
  rho: float = 1.0,
  pretrain_episodes: int = 1,
) -> Agent:
  """The softmax primal-dual agent of Ghosh et al. (2024) as Kitamura et al.'s code runs
  it: a bisection on the multiplier in place of the published algorithm's `K^H` grid
  (module docstring). Args: those of `opse` that apply (`C_r`, `C_u`, `C_lambda`, `tau`).

  Returns:
    `Agent(init, plan, update)`; `extras["safe_deployment"]` is always False (no fallback).
  """
  bonuses = (cost_bonus, constraint_bonus)
  config = _check(model, safe_policy, pretrain_episodes, 1.0, temperature, rho, bonuses)
  _one_constraint(config, "ghosh_softmax")
  if not multiplier_bound > 0:
    raise ValueError(f"ghosh_softmax: multiplier_bound must be > 0, got {multiplier_bound!r}")
  reward, utility, horizon = _reward_view(config)
  dtype = reward.dtype
  components = planning.Components(
    costs=jnp.stack([reward, utility[0]]),
    bonus_in=jnp.asarray([cost_bonus, constraint_bonus], dtype),
    bonus_out=jnp.zeros((2,), dtype),
    low=jnp.zeros((2,), dtype),
    high=jnp.ones((2,), dtype),
    entropy=jnp.zeros((2,), dtype),
  )

  def learning(state, backup):
    need = horizon - state.thresholds[0]

    def weights_of(lam):
      return jnp.stack([jnp.ones((), dtype), lam])

    lam, policy, values = _bisection(
      backup, weights_of, 1, need, multiplier_bound, bisections, dtype
    )
    cost_value, constraint_value = horizon - values[0], horizon - values[1]
    extras = _extras(False, lam, bisections + 1)
    return policy, lam[None], cost_value, constraint_value[None], extras, jnp.bool_(True)

  return _agent(config, learning, components, _no_extras, sense=-1, loose=True)
