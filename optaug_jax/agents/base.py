"""The agent interface: a NamedTuple of pure functions (optax's GradientTransformation style)."""

from __future__ import annotations

from typing import Callable, NamedTuple, Union

import jax
import jax.numpy as jnp

from optaug_jax import estimates
from optaug_jax.env import Trajectory


class AgentState(NamedTuple):
  """Everything an agent carries between episodes. Sizes are read from shapes."""

  counts: estimates.Counts  # visit counts and sums of observed costs
  multipliers: jax.Array  # [I] lambda_k
  episode: jax.Array  # [] int, 0-based index of the next episode to plan
  thresholds: jax.Array  # [I] alpha (known to the agent)
  initial_state: jax.Array  # [] int, s_1 (known to the agent)


class PlanInfo(NamedTuple):
  """What `plan` reports about the policy it returns.

  During pre-training the "optimistic" values are those of the safe policy under the
  optimistic costs and the point estimate p-bar (no p~ is optimised then).
  """

  optimistic_cost_value: jax.Array  # [] V^{pi_k}(c~_k, p~_k) = c~ . q_k
  optimistic_constraint_values: jax.Array  # [I] V^{pi_k}(d~_k, p~_k) = D~ q_k
  fw_gap: jax.Array  # [] Frank-Wolfe gap of the inner solve (0 when solved exactly)
  pretraining: jax.Array  # [] bool, pi_k is the safe baseline


class Agent(NamedTuple):
  """A CMDP learner as pure functions.

  init(thresholds, initial_state, *, num_states, num_actions, horizon) -> AgentState
      from what an agent may know; never the true transitions or costs.
  plan(state) -> (policy [H, S, A], state, PlanInfo)
      optimistic model, policy update and dual step of the current episode.
  update(state, trajectory) -> state
      counts and sums of the episode just played; advances the episode index.
  """

  init: Callable[..., AgentState]
  plan: Callable[[AgentState], tuple[jax.Array, AgentState, PlanInfo]]
  update: Callable[[AgentState, Trajectory], AgentState]


Schedule = Union[float, jax.Array, Callable[[jax.Array], jax.Array]]


def init_state(thresholds, initial_state, *, num_states: int, num_actions: int,
               horizon: int) -> AgentState:
  """Zero counts, zero multipliers, episode 0."""
  thresholds = jnp.asarray(thresholds)
  if not jnp.issubdtype(thresholds.dtype, jnp.floating):
    thresholds = thresholds.astype(jnp.zeros(()).dtype)
  num_constraints = thresholds.shape[-1]
  counts = estimates.init_counts(
      num_states=num_states, num_actions=num_actions, horizon=horizon,
      num_constraints=num_constraints, dtype=thresholds.dtype)
  return AgentState(
      counts=counts,
      multipliers=jnp.zeros((num_constraints,), thresholds.dtype),
      episode=jnp.zeros((), jnp.int32),
      thresholds=thresholds,
      initial_state=jnp.asarray(initial_state, jnp.int32),
  )


def plan_info(model: estimates.OptimisticModel, q: jax.Array, *, fw_gap, pretraining
              ) -> PlanInfo:
  """Optimistic values of the planned occupancy `q` under `c~`, `d~` (and its `p~`)."""
  return PlanInfo(
      optimistic_cost_value=jnp.sum(model.cost * q),
      optimistic_constraint_values=jnp.einsum("ihsa,hsa->i", model.constraint_costs, q),
      fw_gap=fw_gap,
      pretraining=pretraining,
  )


def update_state(state: AgentState, trajectory: Trajectory) -> AgentState:
  """Adds the episode to the counts and advances the episode index."""
  return state._replace(counts=estimates.update_counts(state.counts, trajectory),
                        episode=state.episode + 1)


def as_schedule(eta: Schedule) -> Callable[[jax.Array], jax.Array]:
  """A float (constant) or a callable `count -> eta` (optax.Schedule style)."""
  if callable(eta):
    return eta
  return lambda count: jnp.asarray(eta)


def check_positive(name: str, value) -> None:
  """Host-side check of a numeric hyperparameter, skipped for traced values."""
  if isinstance(value, jax.core.Tracer) or callable(value) or value is None:
    return
  import numpy as np
  arr = np.asarray(value)
  if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
    raise ValueError(f"{name}: must be positive and finite, got {value!r}")
