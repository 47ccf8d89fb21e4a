"""OptPrimalDual-CMDP (Efroni, Mannor, Pirotta 2020, "Exploration-Exploitation in
Constrained MDPs", Algorithm OptPrimalDual-CMDP)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import numerics
from .. import setting as setting_lib
from ..checking import arguments
from . import base, registry


class _PrimalDualFields(NamedTuple):
  agent: base.AgentState
  policy: jax.Array  # [H, S, A] pi_k, the policy played next


class PrimalDualState(base.ComposedAgentState, _PrimalDualFields):
  """An `AgentState` and the current policy (the mirror-descent iterate); the `AgentState`
  fields read through (`state.multipliers` is `state.agent.multipliers`)."""

  __slots__ = ()


@registry.register_agent(
  "optprimaldual", summary="OptPrimalDual-CMDP: mirror-descent policy update, projected dual ascent"
)
def optprimaldual(
  num_episodes: int,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  policy_step: jax.typing.ArrayLike | None = None,
  multiplier_step: jax.typing.ArrayLike | None = None,
  *,
  setting: setting_lib.Setting | None = None,
) -> base.Agent:
  """Optimistic primal-dual: exponentiated-gradient policy update, projected dual ascent.

  Episode k plays `pi_k` and then, with the model updated by that episode (here: at the
  start of episode k+1, which sees the same data):
    Q^k   = optimistic evaluation of pi_k for the cost `c~ + lambda_k^T d~`
            (min over the transition box, `planning.optimistic_policy_evaluation`),
    pi_{k+1}(a|s) ∝ pi_k(a|s) exp(-t_pi Q^k_h(s, a))        (mirror descent, KL),
    lambda_{k+1} = [lambda_k + t_lambda (V~^{pi_k}(d~_i) - alpha)]_+,
  where `V~^{pi_k}(d~_i)` is the optimistic evaluation of constraint i alone. `pi_1` is
  uniform, `lambda_1 = 0`.

  Args:
    num_episodes: `K`.
    delta: confidence parameter; `None` (default): the setting's (0.1 in the paper's).
    bonus_scale: multiplier of every confidence radius.
    setting: what the agent knows and its confidence convention (`Setting`, see
      `named_setting`); `None` (default): the paper's.
    policy_step: `t_pi`; default `sqrt(2 log A / (H^2 K))` (Efroni et al.'s choice).
    multiplier_step: `t_lambda`; default `1 / sqrt(H^2 K)`.

  Returns:
    `Agent(init, plan, update)`; its state is a `PrimalDualState`.
  """
  arguments.check_int("num_episodes", num_episodes, low=1, high=numerics.MAX_EPISODES)
  optimistic_model = base.model_fn(
    num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale, setting=setting
  )
  arguments.check_positive("policy_step", policy_step)
  arguments.check_positive("multiplier_step", multiplier_step)

  steps = (num_episodes, policy_step, multiplier_step)
  return base.Agent(
    init=_init_fn(setting),
    plan=_plan_fn(optimistic_model, steps),
    update=base.update_fn(setting),
    assumptions=base.Assumptions(num_episodes=num_episodes, setting=setting),
  )


def _init_fn(setting):
  """The counting state and the uniform first policy `pi_1`."""
  init_counting_state = base.init_fn(setting)

  def init(thresholds, initial_state, *, num_states, num_actions, horizon):
    state = init_counting_state(
      thresholds, initial_state, num_states=num_states, num_actions=num_actions, horizon=horizon
    )
    uniform = jnp.full(
      (horizon, num_states, num_actions), 1.0 / num_actions, state.multipliers.dtype
    )
    return PrimalDualState(agent=state, policy=uniform)

  return init


def _plan_fn(optimistic_model, steps):
  """The plan: `steps` is `(K, t_pi, t_lambda)` as `optprimaldual` takes them."""
  num_episodes, policy_step, multiplier_step = steps

  def plan(state: PrimalDualState):
    dtype = state.multipliers.dtype
    horizon, _, num_actions = state.policy.shape
    t_pi = (
      jnp.sqrt(2.0 * jnp.log(num_actions) / (horizon**2 * num_episodes))
      if policy_step is None
      else policy_step
    )
    t_lam = (
      1.0 / jnp.sqrt(horizon**2 * num_episodes) if multiplier_step is None else multiplier_step
    )
    model = optimistic_model(state.counts)
    # Optimistic evaluation of the previous policy (data up to the last episode).
    lagrangian = model.cost + numerics.einsum(
      "i,ihsa->hsa", state.multipliers, model.constraint_costs
    )
    confidence = model.transition_set()
    _, q_values = confidence.evaluate(lagrangian, state.policy)
    evaluate = jax.vmap(confidence.evaluate, in_axes=(0, None))
    constraint_v, _ = evaluate(model.constraint_costs, state.policy)
    constraint_values = constraint_v[:, 0, state.initial_state]
    first = state.episode == 0
    logits = jnp.log(jnp.maximum(state.policy, jnp.finfo(dtype).tiny)) - t_pi * q_values
    policy = jnp.where(first, state.policy, jax.nn.softmax(logits, axis=-1))
    multipliers = jnp.where(
      first,
      state.multipliers,
      jnp.maximum(state.multipliers + t_lam * (constraint_values - state.thresholds), 0.0),
    )
    cost_v, _ = confidence.evaluate(model.cost, policy)
    new_constraint_v, _ = evaluate(model.constraint_costs, policy)
    info = base.PlanInfo(
      optimistic_cost_value=cost_v[0, state.initial_state],
      optimistic_constraint_values=new_constraint_v[:, 0, state.initial_state],
      inner_gap=jnp.zeros((), dtype),
      pretraining=jnp.zeros((), bool),
      off_support_transitions=model.off_support_transitions,
    )
    return (
      policy,
      state._replace(multipliers=multipliers)._replace(policy=policy),
      info,
    )

  return plan
