"""Running an agent in a CMDP: one pure episode step, `lax.scan` over episodes."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from optaug_jax import planning
from optaug_jax.agents.base import Agent, AgentState
from optaug_jax.cmdp import CMDP, assert_cmdp_shapes
from optaug_jax.env import sample_episode
from optaug_jax.metrics import EpisodeLog


def init_agent(agent: Agent, cmdp: CMDP) -> AgentState:
  """The agent's initial state, from what it may know of `cmdp` (sizes, alpha, s_1)."""
  return agent.init(cmdp.thresholds, cmdp.initial_state, num_states=cmdp.num_states,
                    num_actions=cmdp.num_actions, horizon=cmdp.horizon)


def episode_step(agent: Agent, cmdp: CMDP, state: AgentState, key: jax.Array
                 ) -> tuple[AgentState, EpisodeLog]:
  """One episode (DESIGN.md's data flow): plan, play, update, evaluate exactly.

  The agent sees only the trajectory; the exact evaluation of `pi_k` in the true CMDP is
  for the log.
  """
  policy, state, info = agent.plan(state)
  trajectory = sample_episode(key, cmdp, policy)
  state = agent.update(state, trajectory)
  cost_value, constraint_values = planning.policy_values(cmdp, policy)
  log = EpisodeLog(
      cost_value=cost_value,
      constraint_values=constraint_values,
      optimistic_cost_value=info.optimistic_cost_value,
      optimistic_constraint_values=info.optimistic_constraint_values,
      multipliers=state.multipliers,
      fw_gap=info.fw_gap,
      pretraining=info.pretraining,
      sampled_cost=jnp.sum(trajectory.costs),
      sampled_constraint_costs=jnp.sum(trajectory.constraint_costs, axis=-1),
  )
  return state, log


@functools.partial(jax.jit, static_argnames=("agent", "num_episodes"))
def run(agent: Agent, key: jax.Array, cmdp: CMDP, *, num_episodes: int,
        state: AgentState | None = None) -> tuple[AgentState, EpisodeLog]:
  """Runs `agent` for `num_episodes` episodes in `cmdp` (jitted `lax.scan`).

  Episode `k` (0-based, counted from the start of learning) uses the key
  `random.fold_in(key, k)`, so a run continued from its returned `state` gives the same
  numbers as one uninterrupted run.

  Args:
    agent: an `Agent` (static: hashable by identity).
    key: PRNG key.
    cmdp: an unbatched `CMDP` (vmap for batches).
    num_episodes: episodes to run now (static).
    state: optional state to continue from; `None` starts afresh.

  Returns:
    `(final state, EpisodeLog)` with every log field stacked over the episodes.
  """
  assert_cmdp_shapes(cmdp)
  if state is None:
    state = init_agent(agent, cmdp)
  episodes = state.episode + jnp.arange(num_episodes, dtype=jnp.int32)
  keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, episodes)
  return lax.scan(functools.partial(episode_step, agent, cmdp), state, keys)
