"""The conservative reference: always play the safe baseline policy (no learning)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import numerics
from .. import setting as setting_lib
from ..checking import arguments
from ..transition_set import TransitionSet
from . import base, registry


@registry.register_agent(
  "safe_baseline",
  problem_args=lambda b: {"safe_policy": b.safe_policy},
  summary="Safe baseline: plays the strictly feasible policy every episode (no learning)",
)
def safe_baseline(
  num_episodes: int,
  safe_policy: jax.Array,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  *,
  setting: setting_lib.Setting | None = None,
) -> base.Agent:
  """Plays `safe_policy` in every episode: no constraint violation, linear cost regret.

  What OptAug-CMDP does in its pre-training phase, forever. It still counts (so its logs
  report the optimistic values of the safe policy, as in pre-training).

  Args:
    num_episodes: `K` (enters the confidence radii of the logged optimistic values).
    safe_policy: `[H, S, A]` strictly feasible baseline policy.
    delta: confidence parameter; `None` (default): the setting's (0.1 in the paper's).
    bonus_scale: multiplier of every confidence radius.
    setting: what the agent knows and its confidence convention (`Setting`, see
      `named_setting`); `None` (default): the paper's.

  Returns:
    `Agent(init, plan, update)`.
  """
  arguments.check_int("num_episodes", num_episodes, low=1, high=numerics.MAX_EPISODES)
  optimistic_model = base.model_fn(
    num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale, setting=setting
  )
  arguments.check_policy("safe_policy", safe_policy)

  def plan(state: base.AgentState):
    policy = jnp.asarray(safe_policy, state.multipliers.dtype)
    model = optimistic_model(state.counts)
    q = TransitionSet.point(model.transitions, model.next_states).occupancy(
      policy, state.initial_state
    )
    info = base.plan_info(
      model, q, inner_gap=jnp.zeros((), policy.dtype), pretraining=jnp.ones((), bool)
    )
    return policy, state, info

  return base.Agent(
    init=base.init_fn(setting),
    plan=plan,
    update=base.update_fn(setting),
    assumptions=base.Assumptions(
      num_episodes=num_episodes, safe_policy=safe_policy, setting=setting
    ),
  )
