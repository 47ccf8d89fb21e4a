"""OptDual-CMDP (Efroni et al. 2020; paper's Appendix "Review of OptDual-CMDP")."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import inner, planning, validation
from .. import setting as setting_lib
from . import base, registry


@registry.register_agent(
    "optdual", problem_args=lambda b: {"slack": b.slack},
    summary="OptDual-CMDP: optimistic best response to the Lagrangian, dual ascent")
def optdual(
    num_episodes: int,
    delta: jax.typing.ArrayLike | None = None,
    bonus_scale: jax.typing.ArrayLike = 1.0,
    eta: base.Schedule | None = None,
    *,
    setting: setting_lib.Setting | None = None,
    slack: jax.typing.ArrayLike | None = None,
    rho: jax.typing.ArrayLike | None = None,
    fill: str = planning.DEFAULT_FILL,
) -> base.Agent:
  """OptDual-CMDP: optimistic best response to the Lagrangian, projected dual ascent.

  Episode k solves the extended MDP with cost `c~_k + lambda_k^T d~_k` exactly (one
  extended DP) and sets `lambda_{k+1} = [lambda_k + eta (D~ q_k - alpha)]_+`, `lambda_1 = 0`.

  Args:
    num_episodes: `K`.
    delta: confidence parameter; `None` (default): the setting's (0.1 in the paper's).
    bonus_scale: multiplier of every confidence radius (1.0 = the paper).
    setting: what the agent knows and its confidence convention (`Setting`, see
      `named_setting`); `None` (default): the paper's.
    eta: `None` for the paper's `sqrt(rho^2 / (H^2 I K))`; a float or a callable
      `count -> eta` of the 0-based count of dual steps so far, here the episode index
      (see `as_schedule`).
    slack: slack `gamma` of a strictly feasible policy; with `eta=None` and no `rho`, the
      agent uses the bound `rho <= H / gamma` (the cost gap is at most H).
    rho: the paper's `rho = (V^pibar(c) - V*(c)) / gamma`, if known.
    fill: the extended DP's greedy-fill formulation (`FILL_METHODS`).

  Returns:
    `Agent(init, plan, update)`.
  """
  validation.check_int("num_episodes", num_episodes, low=1)
  optimistic_model = base.model_fn(num_episodes=num_episodes, delta=delta,
                                   bonus_scale=bonus_scale, setting=setting)
  validation.check_choice("fill", fill, planning.FILL_METHODS)
  if eta is None and slack is None and rho is None:
    raise ValueError("eta: the paper's step needs rho or the baseline's slack; pass one")
  validation.check_positive("slack", slack)
  validation.check_positive("rho", rho)
  validation.check_positive("eta", eta)

  def plan(state: base.AgentState):
    dtype = state.multipliers.dtype
    num_constraints, horizon = state.counts.constraint_cost_sums.shape[:2]
    if eta is None:
      rho_k = rho if rho is not None else horizon / slack
      eta_k = jnp.sqrt(rho_k**2 / (horizon**2 * num_constraints * num_episodes))
    else:
      eta_k = base.as_schedule(eta)(state.episode)
    eta_k = jnp.asarray(eta_k, dtype)
    model = optimistic_model(state.counts)
    reward = model.cost + jnp.einsum("i,ihsa->hsa", state.multipliers, model.constraint_costs)
    lmo = planning.extended_lmo(reward, model.lower, model.upper, state.initial_state,
                                fill=fill)
    q = lmo.occupancy
    multipliers = inner.dual_step(
        q, model.constraint_costs, state.thresholds, state.multipliers, eta_k)
    info = base.plan_info(model, q, fw_gap=jnp.zeros((), dtype),
                          pretraining=jnp.zeros((), bool))
    policy = jax.nn.one_hot(lmo.actions, q.shape[-1], dtype=dtype)
    return policy, state._replace(multipliers=multipliers), info

  return base.Agent(init=base.init_state, plan=plan, update=base.update_state)
