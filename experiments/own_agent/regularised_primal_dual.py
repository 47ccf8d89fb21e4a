"""A regularised optimistic primal-dual agent: an agent written as a user would write one of
their own, from the public API only (`optaug_jax`, `oj.agents`).

Used as `--agents experiments/own_agent/regularised_primal_dual.py:regularised_primal_dual`
by the experiment scripts (headline.py, cancellation.py, outlook.py, separation.py):

  python experiments/headline.py --agents \\
    optaug,optdual,experiments/own_agent/regularised_primal_dual.py:regularised_primal_dual

It is of OptDual's kind (`agent_kind = "dual"`): the scripts give it `--dual-eta` as `eta`,
and the shared options it accepts (setting, delta, bonus_scale, num_episodes, the
baseline's slack); its label in tables, figures and files is its function's name.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import optaug_jax as oj


def regularised_primal_dual(
  num_episodes: int,
  delta=None,
  bonus_scale=1.0,
  eta=None,
  *,
  setting=None,
  slack=None,
  temperature: float = 0.1,
  regulariser: float = 0.1,
) -> oj.Agent:
  """Regularised optimistic primal-dual: a softmax best response to the optimistic
  Lagrangian, and a dual step with a quadratic regulariser on the multipliers.

  Episode k, with the optimistic model of the counts (costs `c~_k`, `d~_k` and the
  confidence box `B_k` of `oj.agents.model_fn`):

      Q_h(s, a) = c~_k + lambda_k^T d~_k + min_{p in B_k} p . V_{h+1},
      V_h(s) = -tau log sum_a exp(-Q_h(s, a) / tau),   pi_k(a | s) ∝ exp(-Q_h(s, a) / tau)

  (the soft Bellman backup at temperature `tau`, `TransitionSet.soft_value_iteration`), then

      lambda_{k+1} = [ (1 - eta_k tau_reg) lambda_k + eta_k (V~_d(pi_k) - alpha) ]_+,
      lambda_1 = 0,

  where `V~_d(pi_k)` is each constraint's optimistic value of `pi_k` over `B_k`
  (`TransitionSet.evaluate`, per constraint) and `tau_reg` the regulariser: the
  multiplier step is a gradient step on `lambda^T (V~_d - alpha) - tau_reg |lambda|^2 / 2`,
  which keeps `lambda` below `max(V~_d - alpha) / tau_reg`.

  Args:
    num_episodes: `K`.
    delta: confidence parameter; `None`: the setting's.
    bonus_scale: multiplier of every confidence radius.
    eta: the dual step: a float or a schedule `count -> eta`; `None`: OptDual's constant
      (`oj.agents.paper_step_size`, from the baseline's `slack`).
    setting: what the agent knows (`oj.Setting`); `None`: the paper's.
    slack: the baseline's slack (for `eta=None`).
    temperature: `tau > 0` of the soft backups.
    regulariser: `tau_reg >= 0` (0: OptDual's plain dual ascent on a softmax policy).

  Returns:
    `oj.Agent(init, plan, update)`.
  """
  if eta is None and slack is None:
    raise ValueError("eta: OptDual's constant step needs the baseline's slack; pass one")
  if not temperature > 0:
    raise ValueError(f"temperature: expected a positive number, got {temperature!r}")
  if not regulariser >= 0:
    raise ValueError(f"regulariser: expected a number >= 0, got {regulariser!r}")
  optimistic_model = oj.agents.model_fn(
    num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale, setting=setting
  )

  def step_size(horizon, num_constraints, count):
    if eta is None:
      return oj.agents.paper_step_size(
        horizon=horizon, num_constraints=num_constraints, num_episodes=num_episodes, slack=slack
      )
    return oj.agents.as_schedule(eta)(count)

  def plan(state):
    dtype = state.multipliers.dtype
    model = optimistic_model(state.counts)
    num_constraints, horizon = model.constraint_costs.shape[:2]
    box = model.transition_set()
    reward = model.cost + jnp.einsum("i,ihsa->hsa", state.multipliers, model.constraint_costs)
    policy = box.soft_value_iteration(reward, temperature).policy

    def value(cost):  # the optimistic value of the policy at s_1
      return box.evaluate(cost, policy)[0][0, state.initial_state]

    cost_value = value(model.cost)
    constraint_values = jax.vmap(value)(model.constraint_costs)
    eta_k = jnp.asarray(step_size(horizon, num_constraints, state.episode), dtype)
    multipliers = jnp.maximum(
      (1 - eta_k * regulariser) * state.multipliers
      + eta_k * (constraint_values - state.thresholds),
      0.0,
    )
    info = oj.agents.PlanInfo(
      optimistic_cost_value=cost_value, optimistic_constraint_values=constraint_values
    )
    return policy.astype(dtype), state._replace(multipliers=multipliers), info

  def init(thresholds, initial_state, *, num_states, num_actions, horizon):
    return oj.agents.init_state(
      thresholds,
      initial_state,
      num_states=num_states,
      num_actions=num_actions,
      horizon=horizon,
      setting=setting,
    )

  def update(state, trajectory):
    return oj.agents.update_state(state, trajectory, setting)

  return oj.Agent(
    init=init,
    plan=plan,
    update=update,
    assumptions=oj.agents.Assumptions(num_episodes=num_episodes, setting=setting),
  )


regularised_primal_dual.agent_kind = "dual"  # type: ignore[attr-defined]  # --dual-eta as eta
