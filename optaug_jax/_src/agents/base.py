"""The agent contract: a NamedTuple of pure functions (optax's GradientTransformation style).

Every agent is built by a factory (`optaug(...)`, `optdual(...)`, ...) that checks its
arguments on the host (`checking.arguments`) and returns `Agent(init, plan, update)`. Schedules
(step sizes) are floats or callables of one meaning everywhere: the 0-based count of dual
steps taken so far (see `as_schedule`).
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from .. import estimates, numerics
from .. import setting as setting_lib
from ..checking import arguments
from ..env import Trajectory


class AgentState(NamedTuple):
  """Everything an agent carries between episodes. Sizes are read from shapes."""

  counts: estimates.Counts  # visit counts and sums of observed costs
  multipliers: jax.Array  # [I] lambda_k
  episode: jax.Array  # [] int32, 0-based index of the next episode to plan (at most
  #                    `MAX_EPISODES`: `run` refuses longer runs, `update_state` saturates)
  thresholds: jax.Array  # [I] alpha (known to the agent)
  initial_state: jax.Array  # [] int, s_1 (known to the agent)
  # [] int32, digest of the options of the agent that made the state (`agents.options`; 0:
  # unknown): a resume under an agent built with other options is refused.
  options: jax.typing.ArrayLike = np.int32(0)


class ComposedAgentState:
  """Base of an agent state that holds an `AgentState` in its field `agent` next to the
  agent's own fields: every `AgentState` field reads through (`state.counts` is
  `state.agent.counts`), so `run`, the metrics and `update_state` treat it like an
  `AgentState`, and `_replace` writes them through too (`state._replace(episode=e)`
  replaces `state.agent.episode`). Use it as the first base of a NamedTuple subclass:
  `class MyState(ComposedAgentState, _MyFields)`."""

  __slots__ = ()
  agent: AgentState

  def _replace(self, /, **changes):
    through = {k: changes.pop(k) for k in list(changes) if k in AgentState._fields}
    if through:
      changes["agent"] = changes.get("agent", self.agent)._replace(**through)
    return super()._replace(**changes)  # type: ignore[misc]  # the NamedTuple's

  @property
  def counts(self) -> estimates.Counts:
    return self.agent.counts

  @property
  def multipliers(self) -> jax.Array:
    return self.agent.multipliers

  @property
  def episode(self) -> jax.Array:
    return self.agent.episode

  @property
  def thresholds(self) -> jax.Array:
    return self.agent.thresholds

  @property
  def initial_state(self) -> jax.Array:
    return self.agent.initial_state

  @property
  def options(self) -> jax.typing.ArrayLike:
    return self.agent.options


def replace_agent_state(state, **changes):
  """Deprecated: `state._replace(**changes)`, which writes an `AgentState` field through a
  composed state too (`ComposedAgentState._replace`); one door per operation."""
  warnings.warn(
    "replace_agent_state is deprecated: use state._replace(...), which writes the"
    " AgentState fields through a composed state too",
    DeprecationWarning,
    stacklevel=2,
  )
  return state._replace(**changes)


class PlanInfo(NamedTuple):
  """What `plan` reports about the policy it returns.

  During pre-training the "optimistic" values are those of the safe policy under the
  optimistic costs and the point estimate p-bar (no p~ is optimised then). Only the two
  optimistic values are required: an agent without an inner solve or a pre-training phase
  leaves `inner_gap` (0), `pretraining` (False), `certified` (True) and
  `off_support_transitions` (-1, not reported) at their defaults.
  """

  optimistic_cost_value: jax.Array  # [] V^{pi_k}(c~_k, p~_k) = c~ . q_k
  optimistic_constraint_values: jax.Array  # [I] V^{pi_k}(d~_k, p~_k) = D~ q_k
  inner_gap: jax.typing.ArrayLike = 0.0  # [] certificate of the inner solve (0: none, or
  #   solved exactly); logged in the dtype of the optimistic values
  pretraining: jax.typing.ArrayLike = np.bool_(False)  # [] bool, pi_k is the safe baseline
  extras: dict[str, Any] = {}  # agent-specific diagnostics (scalars), logged by `run`
  certified: jax.typing.ArrayLike = np.bool_(True)  # [] bool, the inner solve proved its accuracy
  #   (`InnerSolution.certified`); True for agents without an inner solve
  off_support_transitions: jax.typing.ArrayLike = np.int32(-1)  # [] int32, distinct (h, s, a, s')
  #   observed so far outside the declared support (`OptimisticModel.off_support_transitions`);
  #   -1: not reported


class InitFn(Protocol):
  """`init(thresholds, initial_state, *, num_states, num_actions, horizon) -> state`.

  Builds the state from what an agent may know: sizes, thresholds, the initial state;
  never the true transitions or costs.
  """

  def __call__(
    self,
    thresholds: jax.Array,
    initial_state: jax.typing.ArrayLike,
    *,
    num_states: int,
    num_actions: int,
    horizon: int,
  ) -> Any: ...


class PlanFn(Protocol):
  """`plan(state) -> (policy [H, S, A], state, PlanInfo)`: the episode's policy."""

  def __call__(self, state: Any) -> tuple[jax.Array, Any, PlanInfo]: ...


def plan_with(agent: Agent, state, check: bool):
  """`agent.plan(state)`, with `check=True` where it is asked for and the plan takes it
  (an explicit argument: a plan without it is called as always)."""
  if check and "check" in inspect.signature(agent.plan).parameters:
    return agent.plan(state, check=True)  # type: ignore[call-arg]
  return agent.plan(state)


class UpdateFn(Protocol):
  """`update(state, trajectory) -> state`: adds the episode just played."""

  def __call__(self, state: Any, trajectory: Trajectory) -> Any: ...


@dataclasses.dataclass(frozen=True, eq=False)
class Assumptions:
  """What an agent assumes about the CMDP it will be run in, for the runner to check.

  The agent never reads the true CMDP; `run`, `run_sharded` and `episode_step` do, and
  check these against it on the host before any episode (and inside the compiled run with
  `check=True`). Compared and hashed by identity, like the agent's functions, so an `Agent`
  stays a static argument of `jit`.

  Attributes:
    safe_policy: `[H, S, A]` the baseline the agent relies on being strictly feasible
      (`None`: the agent has none).
    slack: the baseline's slack `gamma` the agent was given (`None`: not given); it must
      not exceed the baseline's true slack `min_i (alpha_i - V^pi(d_i, p))`.
    setting: the `Setting` the agent was built with (`None`: the default, the paper's,
      which declares no next-state support).
    num_episodes: the `K` the agent was built for (its confidence radii use it); the
      runner warns when a run goes past it (`None`: not stated).
    options: every argument of the factory that built the agent, as text (`None`: not
      known, e.g. traced); set by `@register_agent` factories (`agents.options`).
    options_digest: their digest, which `init` writes into `AgentState.options` (0:
      unknown); a state resumed under an agent with another digest is refused.
    counts_transitions: whether the agent keeps tabular transition counts, in the layout
      its `setting` declares (False: the linear agents, which learn through features; the
      runner's warning about a dense layout on a sparse CMDP does not concern them).
  """

  safe_policy: Any = None
  slack: Any = None
  setting: Any = None
  num_episodes: int | None = None
  options: Mapping[str, str] | None = None
  options_digest: int = 0
  counts_transitions: bool = True


class Agent(NamedTuple):
  """A CMDP learner as pure functions.

  init(thresholds, initial_state, *, num_states, num_actions, horizon) -> AgentState
      from what an agent may know; never the true transitions or costs.
  plan(state) -> (policy [H, S, A], state, PlanInfo)
      optimistic model, policy update and dual step of the current episode. A plan that
      also takes a keyword `check` gets `check=True` from `run(check=True)` and
      `episode_step(check=True)`: its in-program checks of what only it sees (`plan_with`).
  update(state, trajectory) -> state
      counts and sums of the episode just played; advances the episode index.
  assumptions: what the runner checks against the true CMDP (`Assumptions`: the
      baseline, its slack, the setting); `None`: nothing to check.
  """

  init: InitFn
  plan: PlanFn
  update: UpdateFn
  assumptions: Assumptions | None = None


Schedule = jax.typing.ArrayLike | Callable[[jax.Array], jax.Array]


def init_agent(agent: Agent, cmdp) -> Any:
  """`agent.init` from what an agent may know of `cmdp` (sizes, alpha, s_1): the state a
  run starts from."""
  return agent.init(
    cmdp.thresholds,
    cmdp.initial_state,
    num_states=cmdp.num_states,
    num_actions=cmdp.num_actions,
    horizon=cmdp.horizon,
  )


def init_state(
  thresholds,
  initial_state,
  *,
  num_states: int,
  num_actions: int,
  horizon: int,
  setting: setting_lib.Setting | None = None,
) -> AgentState:
  """Zero counts, zero multipliers, episode 0 (the `init` of every counting agent).

  The counts take the layout of `setting` (default: the paper's): slots of its sparse
  support, transition counts pooled over h when it is stationary.
  """
  setting = setting_lib.resolve(setting)
  thresholds = jnp.asarray(thresholds)
  if not jnp.issubdtype(thresholds.dtype, jnp.floating):
    thresholds = thresholds.astype(jnp.zeros(()).dtype)
  num_constraints = thresholds.shape[-1]
  setting.check_fits(num_states, num_actions)
  next_states = setting.next_states()
  counts = estimates.init_counts(
    num_states=num_states,
    num_actions=num_actions,
    horizon=horizon,
    num_constraints=num_constraints,
    dtype=thresholds.dtype,
    num_next_states=None if next_states is None else next_states.shape[-1],
    pooled=bool(setting.stationary),
  )
  return AgentState(
    counts=counts,
    multipliers=jnp.zeros((num_constraints,), thresholds.dtype),
    episode=jnp.zeros((), jnp.int32),
    thresholds=thresholds,
    initial_state=jnp.asarray(initial_state, jnp.int32),
  )


def plan_info(
  model: estimates.OptimisticModel,
  q: jax.Array,
  *,
  inner_gap,
  pretraining,
  extras: dict[str, Any] | None = None,
  certified=True,
) -> PlanInfo:
  """Optimistic values of the planned occupancy `q` under `c~`, `d~` (and its `p~`), and the
  model's count of observations outside the declared support."""
  return PlanInfo(
    optimistic_cost_value=jnp.sum(model.cost * q),
    optimistic_constraint_values=numerics.einsum("ihsa,hsa->i", model.constraint_costs, q),
    inner_gap=inner_gap,
    pretraining=pretraining,
    extras={} if extras is None else extras,
    certified=jnp.asarray(certified, bool),
    off_support_transitions=jnp.asarray(model.off_support_transitions, jnp.int32),
  )


def update_state(
  state: AgentState, trajectory: Trajectory, setting: setting_lib.Setting | None = None
) -> AgentState:
  """Adds the episode to the counts and advances the episode index (of an `AgentState`, or
  of the one a composed state holds).

  The index saturates at `MAX_EPISODES` instead of wrapping to negative (which would send
  OptAug back to pre-training); `run` refuses runs that would get there. The counts are in
  the layout of `setting` (the one `init_state` was given; `None`: the default setting).
  """
  next_states = setting_lib.resolve(setting).next_states()
  episode = jnp.asarray(state.episode)
  episode = episode + (episode < numerics.MAX_EPISODES).astype(episode.dtype)
  return state._replace(
    counts=estimates.update_counts(state.counts, trajectory, next_states), episode=episode
  )


def init_fn(setting: setting_lib.Setting | None) -> InitFn:
  """`init_state` with the counts' layout of `setting` (every counting agent's `init`)."""
  setting = setting_lib.resolve(setting)

  def init(thresholds, initial_state, *, num_states: int, num_actions: int, horizon: int):
    return init_state(
      thresholds,
      initial_state,
      num_states=num_states,
      num_actions=num_actions,
      horizon=horizon,
      setting=setting,
    )

  return init


def update_fn(setting: setting_lib.Setting | None) -> UpdateFn:
  """`update_state` counting in the layout of `setting` (every counting agent's `update`)."""
  setting = setting_lib.resolve(setting)
  return lambda state, trajectory: update_state(state, trajectory, setting)


def model_fn(
  *,
  num_episodes: int,
  delta,
  bonus_scale,
  setting,
  model: Callable[..., Any] = estimates.optimistic_model,
) -> Callable[[estimates.Counts], Any]:
  """Checks the confidence arguments on the host; returns `counts -> model(counts, ...)`.

  `model` is `estimates.optimistic_model` (default) or `estimates.empirical_model` (the
  point estimates and radii, for agents that build pessimistic costs too).

  `delta=None` takes the setting's (`Setting.resolved_delta`: 0.1 for the paper's, 0.01 for
  Bura et al.'s); `setting=None` is the paper's. Every counting agent builds its model
  with this, so all of them accept the same `delta`, `bonus_scale` and `setting`.
  """
  setting = setting_lib.resolve(setting)
  delta = setting.resolved_delta if delta is None else delta
  arguments.check_confidence(delta, bonus_scale)

  def build(counts: estimates.Counts):
    return model(
      counts, num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale, setting=setting
    )

  return build


def as_schedule(eta: Schedule) -> Callable[[jax.Array], jax.Array]:
  """A step-size schedule: a float (constant) or a callable `count -> eta`.

  One meaning for every agent (optax.Schedule style): `count` is the 0-based number of dual
  steps the agent has taken before this one. For OptDual that is the episode index; for
  OptAug, the number of optimistic episodes since pre-training ended.
  """
  if callable(eta):
    return eta
  return lambda count: jnp.asarray(eta)
