"""OptAug-CMDP (paper, Algorithm "OptAug-CMDP")."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from optaug_jax import estimates, inner, planning
from optaug_jax.agents import base


def paper_eta_schedule(horizon: int, slack, nu) -> base.Schedule:
  """The paper's step sizes `eta_{K'+k} = ((2 + 3k) sigma)^2.5`, `sigma = H / (nu gamma)`.

  Remark "main-param" of the paper. The returned schedule takes the 0-based count of
  optimistic episodes (`count = 0` is episode `K' + 1`, i.e. `k = count + 1`).
  """
  sigma = horizon / (nu * slack)
  return lambda count: ((2.0 + 3.0 * (count + 1.0)) * sigma) ** 2.5


def pretrain_episodes_bound(
    *, num_states: int, num_actions: int, horizon: int, slack: float, nu: float = 0.5,
    max_transitions: int | None = None, log_factor: float = 1.0,
) -> int:
  """The pre-training length `K'` of the paper's Lemma "pre-training".

  With the constants of its proof,
  `K' = max(2 S^2 A H^3 / ((1 - nu) gamma), 4 N S A H^4 / ((1 - nu)^2 gamma^2))`,
  where `N` is the largest support size of a transition row. The lemma holds up to
  polylogarithmic factors the paper leaves unspecified (`O~`); `log_factor` multiplies the
  bound for users who want to include them (e.g. `L^p_delta`). It is a sufficient length
  from the analysis, typically far larger than what is needed in practice.

  Returns:
    `K'` rounded up to an integer.
  """
  if not 0.0 < nu < 1.0:
    raise ValueError(f"nu: must lie in (0, 1), got {nu}")
  if slack <= 0:
    raise ValueError(f"slack: must be positive, got {slack}")
  n = num_states if max_transitions is None else max_transitions
  s, a, h = num_states, num_actions, horizon
  first = 2.0 * s**2 * a * h**3 / ((1.0 - nu) * slack)
  second = 4.0 * n * s * a * h**4 / ((1.0 - nu) ** 2 * slack**2)
  return int(math.ceil(log_factor * max(first, second)))


def optaug(
    num_episodes: int,
    safe_policy: jax.Array,
    pretrain_episodes: int,
    slack: jax.typing.ArrayLike | None = None,
    nu: jax.typing.ArrayLike = 0.5,
    delta: jax.typing.ArrayLike = 0.1,
    bonus_scale: jax.typing.ArrayLike = 1.0,
    eta: base.Schedule | None = None,
    fw_iters: int = 100,
    step_rule: str = "linesearch",
    fw_tol: float | None = None,
) -> base.Agent:
  """OptAug-CMDP: pre-training with a safe policy, then optimistic augmented-Lagrangian steps.

  Episodes `1..K'` play `safe_policy` (Phase 1). Episode `k > K'` solves eq. (primal-step)
  on the optimistic model by Frank-Wolfe (`fw_iters` steps of `step_rule`) and takes the
  dual step eq. (dual-step) `lambda_{k+1} = [lambda_k + eta_k (D~ q_k - alpha)]_+`, with
  `lambda_{K'+1} = 0`.

  Numeric arguments (`slack`, `nu`, `delta`, `bonus_scale`, the eta schedule's numbers,
  `safe_policy`) may be traced: build the agent inside a vmapped function to sweep them.
  `num_episodes`, `pretrain_episodes`, `fw_iters`, `step_rule`, `fw_tol` are static.

  Args:
    num_episodes: `K` (enters the confidence radii).
    safe_policy: `[H, S, A]` strictly feasible baseline policy `pi-bar`.
    pretrain_episodes: `K'` (see `pretrain_episodes_bound` for the paper's value).
    slack: `gamma`, the baseline's slack (or a lower bound); needed for the default eta.
    nu: `nu in (0, 1)` of the paper's schedule.
    delta: confidence parameter.
    bonus_scale: multiplier of every confidence radius (1.0 = the paper).
    eta: `None` for the paper's schedule `((2 + 3k) sigma)^2.5`, `sigma = H / (nu gamma)`;
      a float (constant); or a callable `count -> eta` of the 0-based optimistic-episode
      count.
    fw_iters: Frank-Wolfe steps per episode.
    step_rule: `"linesearch"` or `"standard"` (`2 / (t + 2)`).
    fw_tol: optional early-stopping tolerance on the Frank-Wolfe gap.

  Returns:
    `Agent(init, plan, update)`.
  """
  if int(num_episodes) != num_episodes or num_episodes < 1:
    raise ValueError(f"num_episodes: must be a positive integer, got {num_episodes!r}")
  if int(pretrain_episodes) != pretrain_episodes or not 0 <= pretrain_episodes <= num_episodes:
    raise ValueError(
        f"pretrain_episodes: must be an integer in [0, num_episodes={num_episodes}],"
        f" got {pretrain_episodes!r}")
  if int(fw_iters) != fw_iters or fw_iters < 0:
    raise ValueError(f"fw_iters: must be a non-negative integer, got {fw_iters!r}")
  if step_rule not in inner._STEP_RULES:
    raise ValueError(f"step_rule: expected one of {inner._STEP_RULES}, got {step_rule!r}")
  for name, value in [("delta", delta), ("bonus_scale", bonus_scale), ("nu", nu)]:
    if name != "bonus_scale":
      base.check_positive(name, value)
  if not isinstance(delta, jax.core.Tracer) and not 0 < float(delta) < 1:
    raise ValueError(f"delta: must lie in (0, 1), got {delta!r}")
  if not isinstance(nu, jax.core.Tracer) and not 0 < float(nu) < 1:
    raise ValueError(f"nu: must lie in (0, 1), got {nu!r}")
  if not isinstance(bonus_scale, jax.core.Tracer) and float(bonus_scale) < 0:
    raise ValueError(f"bonus_scale: must be non-negative, got {bonus_scale!r}")
  if eta is None and slack is None:
    raise ValueError("slack: required for the paper's eta schedule (eta=None)")
  base.check_positive("slack", slack)
  base.check_positive("eta", eta)
  if not isinstance(safe_policy, jax.core.Tracer):
    pi = np.asarray(safe_policy)
    if pi.ndim != 3 or not np.all(np.isfinite(pi)) or pi.min() < 0 or np.abs(
        pi.sum(-1) - 1).max() > 1e-5:
      raise ValueError(
          "safe_policy: expected an [H, S, A] array of probability rows (>= 0, summing"
          f" to 1), got shape {pi.shape}")

  def init(thresholds, initial_state, *, num_states, num_actions, horizon):
    return base.init_state(thresholds, initial_state, num_states=num_states,
                           num_actions=num_actions, horizon=horizon)

  def plan(state: base.AgentState):
    counts = state.counts
    dtype = state.multipliers.dtype
    horizon = counts.visits.shape[0]
    pi_bar = jnp.asarray(safe_policy, dtype)
    eta_fn = (paper_eta_schedule(horizon, slack, nu) if eta is None
              else base.as_schedule(eta))
    model = estimates.optimistic_model(
        counts, num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale)

    def pretrain(_):
      q = planning.occupancy(model.transitions, pi_bar, state.initial_state)
      return pi_bar, jnp.zeros_like(state.multipliers), q, jnp.zeros((), dtype)

    def explore(_):
      # Clamped: under a batched predicate lax.cond runs both branches (result discarded).
      count = jnp.maximum(state.episode - pretrain_episodes, 0)
      eta_k = jnp.asarray(eta_fn(count), dtype)
      fw, _ = inner._frank_wolfe(
          model.cost, model.constraint_costs, model.lower, model.upper,
          state.initial_state, state.thresholds, state.multipliers, eta_k,
          num_iters=fw_iters, step_rule=step_rule, tol=fw_tol, with_transitions=False)
      multipliers = inner._shifted_multipliers(
          fw.q, model.constraint_costs, state.thresholds, state.multipliers, eta_k)
      return planning.policy_from_occupancy(fw.q), multipliers, fw.q, fw.gap

    pretraining = state.episode < pretrain_episodes
    policy, multipliers, q, gap = lax.cond(pretraining, pretrain, explore, None)
    info = base.plan_info(model, q, fw_gap=gap, pretraining=pretraining)
    return policy, state._replace(multipliers=multipliers), info

  return base.Agent(init=init, plan=plan, update=base.update_state)
