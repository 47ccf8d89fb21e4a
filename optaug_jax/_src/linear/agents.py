"""OptAug-CMDP and OptDual-CMDP on linear CMDPs, in the agent contract (`oj.run`,
`oj.run_sharded`, `vmap` over seeds).

Both plan with the composite softmax backup (`planning.composite_softmax`) on ridge
estimates (`ridge`): optimistic clipped Q-functions for the objective and each
constraint (bonus `C beta` subtracted: costs are minimised), a softmax policy at
temperature `tau` over their combination `Q^c + mu . Q^d`.

- **OptDual** plays the soft best response at `mu = lambda_k`, then steps
  `lambda_{k+1} = [lambda_k + eta (V_hat_d(pi_k) - alpha)]_+` (`V_hat_d`: the policy's
  optimistic constraint values at `s_1`).
- **OptAug** solves the augmented-Lagrangian primal step over the softmax policies,
  `min_pi V_hat(c; pi) + |[lambda_k + eta (V_hat_d(pi) - alpha)]_+|^2 / (2 eta)`, through its
  stationarity condition: a fixed point in the multiplier,
  `mu = [lambda_k + eta (V_hat_d(pi_mu) - alpha)]_+`, `pi_mu` the soft best response at
  `mu`; then `lambda_{k+1} = mu` (the dual step, `[lambda_k + eta (V_hat_d(pi_k) -
  alpha)]_+`, at the fixed point). For one constraint `g(mu) = [lambda + eta (V_hat_d(pi_mu)
  - alpha)]_+ - mu` is continuous with `g(0) >= 0` and `g(lambda + eta H) <= 0` (the
  clipped values lie in `[0, H]`): a bracketing root finder (Illinois: regula falsi whose
  stale end is halved; about half the backward passes of a bisection, 11 against 23 per
  plan on the streaming CMDP) closes a bracket of the root to float precision; the
  residual `|g|` at the returned end is logged (`extras["residual"]`) and the bracket's
  width is its certificate (`PlanInfo.certified`: the bracket at a few rounding units).
  Several constraints: a multidimensional fixed point with no bracket; refused with a
  `ValueError`.

What the tabular OptAug's exactness does not carry over: its inner problem is convex in
the occupancy of the extended MDP and certified by weak duality. Here the clipped
backups are not linear in any occupancy and `P_hat` is signed, so the fixed point is
exact as a root of `g`, not as the optimum of a convex program; each backward pass is
exact (closed-form softmax).

Both start with `pretrain_episodes` episodes of the baseline `safe_policy` (the
multiplier stays at 0 there), as the tabular OptAug does.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..agents import registry
from ..agents.base import Agent, Assumptions, PlanInfo
from ..checking import arguments
from ..errors import ArgumentError
from . import planning, roots
from . import ridge as ridge_lib
from .model import LinearCMDP, from_tabular, validate_linear_cmdp

# OptAug's root finder: it stops when the bracket is this many rounding units of its upper
# end wide (its certificate), or after this many steps.
BRACKET_ULPS = 4
MAX_BISECTIONS = 200


def problem_args(benchmark) -> dict:
  """What a registered linear agent takes from a `Benchmark` (`oj.agents.make_agent`): the
  linear CMDP of its features (one-hot features, `from_tabular`, for a tabular benchmark)
  and its baseline."""
  cmdp = benchmark.cmdp
  if getattr(benchmark, "features", None) is None:
    model = from_tabular(cmdp)
  else:
    model = LinearCMDP(cmdp, jnp.asarray(benchmark.features, jnp.asarray(cmdp.cost).dtype))
  return {"model": model, "safe_policy": benchmark.safe_policy}


class LinearAgentState(NamedTuple):
  """What a linear agent carries between episodes (sizes read from shapes)."""

  ridge: ridge_lib.Ridge
  multipliers: jax.Array  # [I] lambda_k
  episode: jax.Array  # [] int32, the next episode's 0-based index
  thresholds: jax.Array  # [I] alpha
  initial_state: jax.Array  # [] int, s_1
  options: jax.typing.ArrayLike = np.int32(0)


class _Config(NamedTuple):
  features: Any  # [H, S, A, d] host array
  cost: Any  # [H, S, A]
  constraint_costs: Any  # [I, H, S, A]
  safe_policy: Any  # [H, S, A]
  pretrain_episodes: int
  eta: float
  temperature: float
  rho: float
  cost_bonus: float
  constraint_bonus: float


def _check(model, safe_policy, pretrain_episodes, eta, temperature, rho, bonuses) -> _Config:
  if not isinstance(model, LinearCMDP):
    raise ArgumentError("model", f"expected an oj.linear.LinearCMDP, got {type(model).__name__}")
  validate_linear_cmdp(model)
  arguments.check_int("pretrain_episodes", pretrain_episodes, low=0)
  for name, value in (("eta", eta), ("temperature", temperature)):
    arguments.check_real(name, value)
    if not float(value) > 0:
      raise ArgumentError(name, f"expected a positive number, got {value!r}")
  arguments.check_real("rho", rho)
  if not float(rho) > 0:
    raise ArgumentError("rho", f"expected a positive ridge, got {rho!r}")
  for name, value in zip(("cost_bonus", "constraint_bonus"), bonuses):
    arguments.check_real(name, value, low=0.0)
  cmdp = model.cmdp
  pi = np.asarray(safe_policy, np.float64)
  if pi.shape != np.shape(cmdp.cost):
    raise ArgumentError(
      "safe_policy", f"expected shape {np.shape(cmdp.cost)} [H, S, A], got {pi.shape}"
    )
  if not (np.all(pi >= 0) and np.allclose(pi.sum(-1), 1.0, atol=1e-5)):
    raise ArgumentError("safe_policy", "each row must be a distribution over the actions")
  dtype = np.asarray(cmdp.cost).dtype
  return _Config(
    features=np.asarray(model.step_features(), dtype),
    cost=np.asarray(cmdp.cost, dtype),
    constraint_costs=np.asarray(cmdp.constraint_costs, dtype),
    safe_policy=pi.astype(dtype),
    pretrain_episodes=int(pretrain_episodes),
    eta=float(eta),
    temperature=float(temperature),
    rho=float(rho),
    cost_bonus=float(bonuses[0]),
    constraint_bonus=float(bonuses[1]),
  )


def _agent(config: _Config, plan_learning, components, extras_like, *, sense=1, loose=False):
  """The agent of one algorithm: pre-training with the baseline, then `plan_learning(state,
  backup) -> (policy, multipliers, cost value, constraint values, extras, certified)`
  with `backup` the composite softmax of `components` (`planning`); `extras_like(dtype)`:
  the extras of a pre-training episode."""
  horizon, num_states, num_actions, d = np.shape(config.features)

  def init(thresholds, initial_state, **sizes):
    del sizes  # the features' (a mismatch is refused on the host: validate_linear_cmdp)
    thresholds = jnp.asarray(thresholds)
    dtype = config.cost.dtype
    return LinearAgentState(
      ridge=ridge_lib.Ridge.zeros(horizon, num_states, num_actions, d, dtype),
      multipliers=jnp.zeros(thresholds.shape, dtype),
      episode=jnp.zeros((), jnp.int32),
      thresholds=thresholds.astype(dtype),
      initial_state=jnp.asarray(initial_state, jnp.int32),
    )

  def backups(state):
    """`weights -> (policy, V^k(s_1) [K])`: the composite softmax backup of `components`
    on the estimates, factored once per plan."""
    features = jnp.asarray(config.features)
    est = ridge_lib.estimate(state.ridge, features, config.rho)

    def backup(weights):
      out = planning.composite_softmax(
        est, features, components, weights, config.temperature, sense=sense, loose=loose
      )
      return out.policy, out.values[:, state.initial_state]

    return backup

  def plan(state):
    dtype = config.cost.dtype

    def pretrain(state):
      num = state.thresholds.shape[0]
      info = PlanInfo(jnp.zeros((), dtype), jnp.zeros((num,), dtype), pretraining=jnp.bool_(True))
      extras = extras_like(dtype)
      return jnp.asarray(config.safe_policy), state, info._replace(extras=extras)

    def learn(state):
      out = plan_learning(state, backups(state))
      policy, multipliers, cost_value, constraint_values, extras, certified = out
      info = PlanInfo(
        optimistic_cost_value=cost_value,
        optimistic_constraint_values=constraint_values,
        certified=certified,
        extras=extras,
      )
      return policy, state._replace(multipliers=multipliers), info

    # Both, then a select. Under `vmap`, `lax.cond` broadcasts every operand of its branches
    # to the batch, the features and costs among them, and each backward pass then reads a
    # copy per seed; `batching.batch_cond` avoids that but its conditional still doubles the
    # time of OPSE's search loop inside it (64 seeds, CPU). Unbatched, the learning plan of
    # a pre-training episode is computed and discarded.
    pre = state.episode < config.pretrain_episodes
    return jax.tree.map(lambda a, b: jnp.where(pre, a, b), pretrain(state), learn(state))

  def update(state, trajectory):
    features = jnp.asarray(config.features)
    ridge = ridge_lib.update(state.ridge, features, trajectory.states, trajectory.actions)
    return state._replace(ridge=ridge, episode=state.episode + 1)

  return Agent(
    init=init,
    plan=plan,
    update=update,
    assumptions=Assumptions(safe_policy=jnp.asarray(config.safe_policy), counts_transitions=False),
  )


def _lagrangian(config: _Config) -> planning.Components:
  return planning.lagrangian_components(
    jnp.asarray(config.cost),
    jnp.asarray(config.constraint_costs),
    config.cost_bonus,
    config.constraint_bonus,
    config.temperature,
  )


def _no_extras(dtype):
  zero = jnp.zeros((), dtype)
  return _extras(zero, zero, 0)


def _extras(residual, bracket, passes):
  """The linear agents' `PlanInfo.extras`: OptAug's fixed-point residual `|g(mu)|`, its
  root finder's final bracket, and the backward passes of the plan."""
  return {
    "residual": residual,
    "bracket": bracket,
    "backward_passes": jnp.asarray(passes, jnp.int32),
  }


@registry.register_agent("optdual_linear", problem_args=problem_args)
def optdual_linear(
  model,
  safe_policy,
  *,
  eta: float = 1.0,
  pretrain_episodes: int = 0,
  temperature: float = 0.1,
  rho: float = 1.0,
  cost_bonus: float = 1.0,
  constraint_bonus: float = 1.0,
) -> Agent:
  """OptDual-CMDP on a linear CMDP (module docstring): the soft best response to the
  optimistic Lagrangian at `lambda_k`, then the projected dual step of size `eta`.

  Args:
    model: an `oj.linear.LinearCMDP` (its features and costs are the agent's; its kernel
      is not read).
    safe_policy: the baseline `[H, S, A]` of the pre-training episodes.
    eta: the dual step size (`> 0`; 1, Kitamura et al.'s runs of the Lagrangian agents).
    pretrain_episodes: episodes of `safe_policy` first.
    temperature: `tau > 0` of the softmax.
    rho: the ridge (`> 0`).
    cost_bonus: `C_c >= 0`, the cost's bonus scale (0: no optimism).
    constraint_bonus: `C_d >= 0`, the constraints' bonus scale.

  Returns:
    `Agent(init, plan, update)`; its state is a `LinearAgentState`.
  """
  config = _check(
    model, safe_policy, pretrain_episodes, eta, temperature, rho, (cost_bonus, constraint_bonus)
  )

  def learning(state, backup):
    weights = jnp.concatenate([jnp.ones((1,), state.multipliers.dtype), state.multipliers])
    policy, values = backup(weights)
    step = state.multipliers + config.eta * (values[1:] - state.thresholds)
    zero = jnp.zeros((), values.dtype)
    extras = _extras(zero, zero, 1)
    return policy, jnp.maximum(step, 0.0), values[0], values[1:], extras, jnp.bool_(True)

  return _agent(config, learning, _lagrangian(config), _no_extras)


@registry.register_agent("optaug_linear", problem_args=problem_args)
def optaug_linear(
  model,
  safe_policy,
  *,
  eta: float = 1.0,
  pretrain_episodes: int = 0,
  temperature: float = 0.1,
  rho: float = 1.0,
  cost_bonus: float = 1.0,
  constraint_bonus: float = 1.0,
) -> Agent:
  """OptAug-CMDP on a linear CMDP with one constraint (module docstring): the
  augmented-Lagrangian primal step over softmax policies as the fixed point `mu =
  [lambda_k + eta (V_hat_d(pi_mu) - alpha)]_+` by a bracketing root finder, then
  `lambda_{k+1} = mu`.

  Args: those of `optdual_linear` (`eta`: the augmented Lagrangian's constant step).

  Returns:
    `Agent(init, plan, update)`; `extras["residual"]` is `|g|` at the returned multiplier
    and `extras["bracket"]` the final bracket's width; `PlanInfo.certified` says the
    bracket reached a few rounding units. Raises `ValueError` for several constraints.
  """
  config = _check(
    model, safe_policy, pretrain_episodes, eta, temperature, rho, (cost_bonus, constraint_bonus)
  )
  if config.constraint_costs.shape[0] != 1:
    raise ArgumentError(
      "optaug_linear",
      f"one constraint only (got {config.constraint_costs.shape[0]}): with"
      " several, the primal step's fixed point has no bracket to bisect (use optdual_linear)",
    )
  dtype = config.cost.dtype
  eps = float(jnp.finfo(dtype).eps)

  def learning(state, backup):
    lam, alpha = state.multipliers[0], state.thresholds[0]
    one = jnp.ones((1,), dtype)

    def g(mu):
      policy, values = backup(jnp.concatenate([one, mu[None]]))
      return roots.End(
        jnp.maximum(lam + config.eta * (values[1] - alpha), 0.0) - mu, (policy, values)
      )

    horizon = config.cost.shape[0]
    end_0 = g(jnp.zeros((), dtype))
    g0 = end_0.value  # >= 0; 0: mu = 0 is the root

    def is_open(lo, hi):
      return (g0 > 0) & (hi - lo > BRACKET_ULPS * eps * (1.0 + hi))

    top = lam + config.eta * horizon
    found = roots.illinois(g, jnp.zeros((), dtype), top, end_0, g(top), is_open, MAX_BISECTIONS)
    count, lo, hi = found.steps, found.lo, found.hi
    (g_lo, out_lo), (g_hi, out_hi) = found.end_lo, found.end_hi
    take_lo = jnp.abs(g_lo) <= jnp.abs(g_hi)
    mu = jnp.where(take_lo, lo, hi)
    residual = jnp.where(take_lo, jnp.abs(g_lo), jnp.abs(g_hi))
    policy, values = jax.tree.map(lambda a, b: jnp.where(take_lo, a, b), out_lo, out_hi)
    width = jnp.where(g0 > 0, hi - lo, 0.0)
    certified = width <= BRACKET_ULPS * eps * (1.0 + hi)
    extras = _extras(residual, width, count + 2)
    return policy, mu[None], values[0], values[1:], extras, certified

  return _agent(config, learning, _lagrangian(config), _no_extras)
