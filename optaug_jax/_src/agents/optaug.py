"""OptAug-CMDP (paper, Algorithm "OptAug-CMDP")."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import batching, box, numerics
from .. import inner as inner_lib
from .. import setting as setting_lib
from ..checking import arguments
from ..errors import ArgumentError
from ..inner.exact import exact
from ..multiplier_updates import dual_step
from ..transition_set import TransitionSet
from . import base, registry

# `optaug(pretrain_episodes=None)`: min(this, K // 10).
DEFAULT_PRETRAIN_EPISODES = 300


class _OptAugFields(NamedTuple):
  agent: base.AgentState
  warm: inner_lib.WarmStart  # what the last inner solve left to the next (cold in
  #                            pre-training and before the first solve)


class OptAugState(base.ComposedAgentState, _OptAugFields):
  """An `AgentState` and the inner solve's warm start (`optaug(warm_start=True)`, the
  default); the `AgentState` fields read through (`state.multipliers` is
  `state.agent.multipliers`). A resumed run continues from it bit for bit."""

  __slots__ = ()


def paper_eta_schedule(horizon: int, slack, nu) -> Callable[[jax.Array], jax.Array]:
  """The paper's step sizes `eta_{K'+k} = ((2 + 3k) sigma)^2.5`, `sigma = H / (nu gamma)`.

  Remark "main-param" of the paper. The returned schedule takes the 0-based count of
  optimistic episodes (`count = 0` is episode `K' + 1`, i.e. `k = count + 1`).
  """
  sigma = horizon / (nu * slack)
  return lambda count: ((2.0 + 3.0 * (count + 1.0)) * sigma) ** 2.5


def pretrain_episodes_bound(
  *,
  num_states: int,
  num_actions: int,
  horizon: int,
  slack: float,
  nu: float = 0.5,
  max_transitions: int | None = None,
  log_factor: float = 1.0,
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
  arguments.check_real("nu", nu, low=0.0, high=1.0, low_open=True, high_open=True)
  arguments.check_positive("slack", slack, allow_none=False)
  n = num_states if max_transitions is None else max_transitions
  s, a, h = num_states, num_actions, horizon
  first = 2.0 * s**2 * a * h**3 / ((1.0 - nu) * slack)
  second = 4.0 * n * s * a * h**4 / ((1.0 - nu) ** 2 * slack**2)
  return int(math.ceil(log_factor * max(first, second)))


@registry.register_agent(
  "optaug",
  problem_args=lambda b: {"safe_policy": b.safe_policy, "slack": b.slack},
  summary="OptAug-CMDP: safe pre-training, then optimistic augmented-Lagrangian steps",
)
def optaug(
  num_episodes: int,
  safe_policy: jax.Array | None,
  pretrain_episodes: int | None = None,
  slack: jax.typing.ArrayLike | None = None,
  nu: jax.typing.ArrayLike = 0.5,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  eta: base.Schedule | None = None,
  *,
  setting: setting_lib.Setting | None = None,
  inner: inner_lib.InnerSolver = exact(),
  fill: str = box.DEFAULT_FILL,
  unreached: str = "greedy",
  warm_start: bool = True,
) -> base.Agent:
  """OptAug-CMDP: pre-training with a safe policy, then optimistic augmented-Lagrangian steps.

  Episodes `1..K'` play `safe_policy` (Phase 1). Episode `k > K'` reads like the paper's
  Algorithm "OptAug-CMDP":

      model = optimistic_model(counts)                              # eq. (opt-c)
      q_k = solve_inner(model, lambda_k, eta_k, solver=inner)       # eq. (primal-step)
      lambda_{k+1} = dual_step(q_k, model, lambda_k, eta_k)         # eq. (dual-step)

  with `lambda_{K'+1} = 0`, and plays `pi_k` retrieved from `q_k` (eq. (retrieve-pi)).
  Numeric arguments may be traced (build the agent inside a vmapped function to sweep
  them); `num_episodes`, `pretrain_episodes`, `inner`, `fill`, `unreached` and
  `warm_start` are static. The guide "Your own algorithm" and docs/design.md
  ("OptAug-CMDP's plan") say more.

  Args:
    num_episodes: `K` (enters the confidence radii).
    safe_policy: `[H, S, A]` strictly feasible baseline `pi-bar`; `None`: no baseline
      (open question 3), with `pretrain_episodes=0` and a constant `eta`.
    pretrain_episodes: `K'`; `None` (default): `min(300, K // 10)` (the paper's
      `pretrain_episodes_bound` is 10^7 and more even on small problems).
    slack: `gamma`, the baseline's slack (or a lower bound); needed for the default eta.
    nu: `nu in (0, 1)` of the paper's schedule.
    delta: confidence parameter; `None` (default): the setting's (0.1 in the paper's).
    bonus_scale: multiplier of every confidence radius (1.0 = the paper).
    eta: `None`: the paper's `((2 + 3k) sigma)^2.5`, `sigma = H / (nu gamma)`; a float
      (constant); or a callable of the 0-based count of dual steps (`as_schedule`).
    setting: what the agent knows (`Setting`, see `named_setting`); `None`: the paper's.
    inner: the inner solver (`oj.inner.exact()`, the default, or
      `oj.inner.frank_wolfe(...)`, the paper's InnerOpt-FW; see `solve_inner`).
    fill: the extended DP's greedy-fill formulation (`FILL_METHODS`).
    unreached: the policy where the solution's occupancy is 0 (`solve_inner`): `"greedy"`
      (default) or `"uniform"`.
    warm_start: carry each inner solve's `oj.inner.WarmStart` to the next episode's
      (`OptAugState`; default); it moves where a solve starts, never its optimum or
      certificate. For I >= 2 only `oj.inner.exact(warm_cuts=True)` uses it (the warm
      cuts certify other points of the optimal face: docs/results/statistics).

  Returns:
    `Agent(init, plan, update)`; `PlanInfo.extras["dp_calls"]` counts the inner solve's
    extended DPs (0 in pre-training; re-filled vertices are not DPs),
    `PlanInfo.certified` is `InnerSolution.certified` (True in pre-training).
  """
  solve = _Solve(inner=inner, fill=fill, unreached=unreached, warm_start=warm_start)
  pretrain_episodes = _checked_options(
    num_episodes, safe_policy, pretrain_episodes, (eta, slack, nu), solve
  )
  optimistic_model = base.model_fn(
    num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale, setting=setting
  )
  schedule = (eta, slack, nu)
  return base.Agent(
    init=_init_fn(setting, warm_start),
    plan=_plan_fn(optimistic_model, safe_policy, schedule, pretrain_episodes, solve),
    update=base.update_fn(setting),
    assumptions=base.Assumptions(
      num_episodes=num_episodes, safe_policy=safe_policy, slack=slack, setting=setting
    ),
  )


def _plan_fn(optimistic_model, safe_policy, schedule, pretrain_episodes: int, solve: _Solve):
  """OptAug's `plan`: the phase's step (`_pretrain_step` or `_optimistic_step`) of the
  optimistic model of the counts. `schedule`: `(eta, slack, nu)` as `optaug` takes them."""
  eta, slack, nu = schedule
  warm_start = solve.warm_start

  def plan(state: Any, *, check: bool = False):  # OptAugState, or an AgentState
    counts = state.counts
    dtype = state.multipliers.dtype
    pi_bar = _baseline(safe_policy, counts.visits.shape, dtype)
    eta_fn = _eta_schedule(eta, counts.visits.shape[0], slack, nu, dtype)
    model = optimistic_model(counts)
    cold = inner_lib.WarmStart.cold(
      counts.visits.shape[0],
      counts.visits.shape[1],
      dtype,
      num_constraints=state.multipliers.shape[0],
    )
    pretraining = state.episode < pretrain_episodes
    # Under vmap, a batch entirely in one phase runs that phase's branch alone: pre-training
    # episodes do not pay an inner solve (plain lax.cond would run both and select).
    step = batching.batch_cond(
      pretraining,
      lambda _: _pretrain_step(model, state, pi_bar, cold),
      lambda _: _optimistic_step(model, state, eta_fn, pretrain_episodes, solve, check),
      None,
    )
    info = base.plan_info(
      model,
      step.occupancy,
      inner_gap=step.gap,
      pretraining=pretraining,
      extras={"dp_calls": step.dp_calls},
      certified=step.certified,
    )
    state = state._replace(multipliers=step.multipliers)
    if warm_start:
      state = state._replace(warm=step.warm)
    return step.policy, state, info

  return plan


def _init_fn(setting, warm_start: bool):
  """OptAug's `init`: an `AgentState`, in an `OptAugState` with a cold hint when warm-started."""
  init_counting_state = base.init_fn(setting)

  def init(thresholds, initial_state, *, num_states, num_actions, horizon):
    state = init_counting_state(
      thresholds, initial_state, num_states=num_states, num_actions=num_actions, horizon=horizon
    )
    if not warm_start:
      return state
    dtype = state.multipliers.dtype
    warm = inner_lib.WarmStart.cold(
      horizon, num_states, dtype, num_constraints=state.multipliers.shape[0]
    )
    return OptAugState(agent=state, warm=warm)

  return init


class _Solve(NamedTuple):
  """The inner solve's static options, as `optaug` takes them."""

  inner: inner_lib.InnerSolver
  fill: str
  unreached: str
  warm_start: bool


class _Step(NamedTuple):
  """What one episode's plan decides, in either phase."""

  policy: jax.Array  # [H, S, A] pi_k
  multipliers: jax.Array  # [I] lambda_{k+1}
  occupancy: jax.Array  # [H, S, A] q_k
  gap: jax.Array  # [] the inner solve's certificate (0 in pre-training)
  dp_calls: jax.Array  # [] int32 its extended DPs
  certified: jax.Array  # [] bool
  warm: inner_lib.WarmStart  # the next solve's hint


def _checked_options(num_episodes, safe_policy, pretrain_episodes, schedule, solve: _Solve) -> int:
  """`optaug`'s options checked on the host; the pre-training length `K'` (its default).
  `schedule`: `(eta, slack, nu)`."""
  eta, slack, nu = schedule
  arguments.check_int("num_episodes", num_episodes, low=1, high=numerics.MAX_EPISODES)
  if pretrain_episodes is None:
    pretrain_episodes = min(DEFAULT_PRETRAIN_EPISODES, int(num_episodes) // 10)
  arguments.check_int("pretrain_episodes", pretrain_episodes, low=0, high=num_episodes)
  if safe_policy is None:
    if pretrain_episodes != 0 or eta is None:
      raise ArgumentError(
        "safe_policy",
        "None (no baseline) needs pretrain_episodes=0 and a constant eta"
        f" (got pretrain_episodes={pretrain_episodes}, eta={eta})",
      )
  else:
    arguments.check_policy("safe_policy", safe_policy)
  arguments.check_inner_solver("inner", solve.inner)
  arguments.check_choice("fill", solve.fill, box.FILL_METHODS)
  arguments.check_choice("unreached", solve.unreached, inner_lib.UNREACHED)
  arguments.check_real("nu", nu, low=0.0, high=1.0, low_open=True, high_open=True)
  if eta is None and slack is None:
    raise ArgumentError("slack", "required for the paper's eta schedule (eta=None)")
  arguments.check_positive("slack", slack)
  arguments.check_positive("eta", eta)
  return pretrain_episodes


def _baseline(safe_policy, shape, dtype) -> jax.Array:
  """`pi-bar` in the CMDP's shape (uniform where there is none: K' = 0, never played)."""
  if safe_policy is None:
    return jnp.full(shape, 1.0 / shape[-1], dtype)
  pi_bar = jnp.asarray(safe_policy, dtype)
  if pi_bar.shape != shape:
    raise ArgumentError(
      "safe_policy", f"expected shape {shape} [H, S, A] of the CMDP, got {pi_bar.shape}"
    )
  return pi_bar


def _eta_schedule(eta, horizon: int, slack, nu, dtype) -> Callable[[jax.Array], jax.Array]:
  """The step sizes: the paper's schedule (`eta=None`, with a warning in float32) or `eta`."""
  if eta is not None:
    return base.as_schedule(eta)
  if jnp.finfo(dtype).bits < 64:
    warnings.warn(
      "optaug: the paper's eta schedule ((2 + 3k) H / (nu gamma))^2.5 reaches 1e7 and"
      " more, beyond what float32 resolves in the augmented Lagrangian: enable x64"
      " (jax.config.update('jax_enable_x64', True), float64 thresholds), or pass a"
      " constant eta (e.g. eta=100.0).",
      UserWarning,
      stacklevel=3,
    )
  return paper_eta_schedule(horizon, slack, nu)


def _pretrain_step(model, state, pi_bar, cold) -> _Step:
  """Phase 1: play the baseline; the multipliers stay at 0 (`lambda_{K'+1} = 0`)."""
  kernel = TransitionSet.point(model.transitions, model.next_states)
  dtype = state.multipliers.dtype
  return _Step(
    policy=pi_bar,
    multipliers=jnp.zeros_like(state.multipliers),
    occupancy=kernel.occupancy(pi_bar, state.initial_state),
    gap=jnp.zeros((), dtype),
    dp_calls=jnp.zeros((), jnp.int32),
    certified=jnp.ones((), bool),
    warm=cold,
  )


def _optimistic_step(model, state, eta_fn, pretrain_episodes: int, solve: _Solve, check) -> _Step:
  """Phase 2: eq. (primal-step) on the optimistic model, then eq. (dual-step); `check`:
  the traced eta and multipliers checked in the program (`run(check=True)`)."""
  # Clamped: a batch split between the phases runs both branches (batch_cond).
  count = jnp.maximum(state.episode - pretrain_episodes, 0)
  eta_k = jnp.asarray(eta_fn(count), state.multipliers.dtype)
  problem = inner_lib.InnerProblem.of_model(
    model, state.thresholds, state.initial_state, model.transition_set(solve.fill)
  )
  sol = inner_lib.solve_inner(
    problem,
    state.multipliers,
    eta_k,
    solver=solve.inner,
    gradient=None,
    unreached=solve.unreached,
    with_transitions=False,
    check=check,
    warm=state.warm if solve.warm_start else None,
  )
  multipliers = dual_step(
    sol.occupancy, model.constraint_costs, state.thresholds, state.multipliers, eta_k, check=check
  )
  return _Step(
    policy=sol.policy,
    multipliers=multipliers,
    occupancy=sol.occupancy,
    gap=sol.gap,
    dp_calls=jnp.asarray(sol.dp_calls, jnp.int32),
    certified=jnp.asarray(sol.certified, bool),
    warm=sol.warm,
  )
