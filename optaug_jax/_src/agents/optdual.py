"""OptDual-CMDP (Efroni et al. 2020; paper's Appendix "Review of OptDual-CMDP")."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, TypeAlias

import jax
import jax.numpy as jnp
import optax

from .. import box, multiplier_updates, numerics
from .. import setting as setting_lib
from ..checking import arguments, kernels
from ..errors import ArgumentError
from . import base, registry

DualOptimizer: TypeAlias = (
  optax.GradientTransformation | Callable[[base.Schedule], optax.GradientTransformation]
)


class _DualOptimizerFields(NamedTuple):
  agent: base.AgentState
  dual_state: Any  # the optax state of the multiplier update


class DualOptimizerState(base.ComposedAgentState, _DualOptimizerFields):
  """An `AgentState` and the state of the dual optimizer (`optdual(dual_optimizer=...)`);
  the `AgentState` fields read through (`state.multipliers` is `state.agent.multipliers`)."""

  __slots__ = ()


def paper_step_size(
  *,
  horizon: int,
  num_constraints: int,
  num_episodes: int,
  slack: jax.typing.ArrayLike | None = None,
  rho: jax.typing.ArrayLike | None = None,
) -> jax.Array:
  """OptDual-CMDP's constant dual step (Efroni et al. 2020, Theorem 4), `optdual(eta=None)`:

      eta = sqrt(rho^2 / (H^2 I K)),   rho = H / gamma (unless given),

  with `gamma` the baseline's slack. An agent of one's own that wants OptDual's step calls
  this with the same numbers (`horizon`, `num_constraints`, `num_episodes` and the slack or
  `rho`)."""
  if rho is None:
    if slack is None:
      raise ArgumentError("slack", "the paper's step needs rho or the baseline's slack; pass one")
    arguments.check_positive("slack", slack)
    rho = horizon / slack
  arguments.check_positive("rho", rho)
  return jnp.sqrt(rho**2 / (horizon**2 * num_constraints * num_episodes))


@registry.register_agent(
  "optdual",
  problem_args=lambda b: {"slack": b.slack},
  summary="OptDual-CMDP: optimistic best response to the Lagrangian, dual ascent",
)
def optdual(
  num_episodes: int,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  eta: base.Schedule | None = None,
  *,
  setting: setting_lib.Setting | None = None,
  slack: jax.typing.ArrayLike | None = None,
  rho: jax.typing.ArrayLike | None = None,
  fill: str = box.DEFAULT_FILL,
  dual_optimizer: DualOptimizer | None = None,
) -> base.Agent:
  """OptDual-CMDP: optimistic best response to the Lagrangian, projected dual ascent.

  Episode k solves the extended MDP with cost `c~_k + lambda_k^T d~_k` exactly (one
  extended DP) and sets `lambda_{k+1} = [lambda_k + eta (D~ q_k - alpha)]_+`, `lambda_1 = 0`.

  With `dual_optimizer`, the multiplier step is an optax transformation of the gradient
  `-(D~ q_k - alpha)`, projected on `lambda >= 0` (see `multiplier_updates`):
  `dual_optimizer=optax.sgd(eta)` is the update above, `optax.optimistic_gradient_descent`
  optimistic dual descent (ReLOAD), `pid_lagrangian` and `nupi` the Lagrangian controllers.
  Pass either a transformation, or a callable `eta -> transformation` (e.g.
  `optax.optimistic_gradient_descent` itself) that receives this agent's step: `eta`, or
  the paper's constant when `eta is None`.

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
    dual_optimizer: `None` (projected dual ascent with `eta`), an optax
      `GradientTransformation`, or a callable `eta -> GradientTransformation`.

  Returns:
    `Agent(init, plan, update)`; with a `dual_optimizer` its state is a
    `DualOptimizerState`.
  """
  arguments.check_int("num_episodes", num_episodes, low=1, high=numerics.MAX_EPISODES)
  optimistic_model = base.model_fn(
    num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale, setting=setting
  )
  arguments.check_choice("fill", fill, box.FILL_METHODS)
  step = _DualStep(num_episodes, eta, slack, rho, dual_optimizer)
  step.check()
  return base.Agent(
    init=_init_fn(setting, step),
    plan=_plan_fn(optimistic_model, lambda model: model.transition_set(fill), step),
    update=base.update_fn(setting),
    assumptions=base.Assumptions(num_episodes=num_episodes, setting=setting),
  )


class _DualStep(NamedTuple):
  """OptDual's multiplier step as `optdual` takes it: the step size (`eta`, or the paper's
  from `rho` or `slack`) and the dual optimizer, if any."""

  num_episodes: int
  eta: Any
  slack: Any
  rho: Any
  dual_optimizer: Any

  def check(self) -> None:
    eta, dual_optimizer = self.eta, self.dual_optimizer
    fixed = isinstance(dual_optimizer, optax.GradientTransformation)
    if dual_optimizer is not None and not fixed and not callable(dual_optimizer):
      raise ArgumentError(
        "dual_optimizer",
        "expected an optax GradientTransformation or a callable"
        f" eta -> GradientTransformation, got {dual_optimizer!r}",
      )
    if fixed and eta is not None:
      raise ArgumentError(
        "eta",
        "the given dual_optimizer carries its own step size; pass eta"
        " only with a callable dual_optimizer (eta -> transformation)",
      )
    if not fixed and eta is None and self.slack is None and self.rho is None:
      raise ArgumentError("eta", "the paper's step needs rho or the baseline's slack; pass one")
    arguments.check_positive("slack", self.slack)
    arguments.check_positive("rho", self.rho)
    arguments.check_positive("eta", eta)

  def step_size(self, horizon, num_constraints, count):
    if self.eta is None:
      return paper_step_size(
        horizon=horizon,
        num_constraints=num_constraints,
        num_episodes=self.num_episodes,
        slack=self.slack,
        rho=self.rho,
      )
    return base.as_schedule(self.eta)(count)

  def optimizer(self, horizon, num_constraints):
    if isinstance(self.dual_optimizer, optax.GradientTransformation):
      return self.dual_optimizer
    eta = self.eta
    lr = (
      self.step_size(horizon, num_constraints, 0) if eta is None or not callable(eta) else eta
    )  # a schedule of the update count (= the episode index here)
    assert callable(self.dual_optimizer)  # a transformation or a callable (checked)
    return self.dual_optimizer(lr)


def _plan_fn(optimistic_model, box_of, step: _DualStep):
  """OptDual's `plan`: one extended DP at the Lagrangian costs in the optimistic model's box
  (`box_of(model)`), then the multiplier step."""

  def plan(state, *, check: bool = False):  # check: `run(check=True)`, the traced eta too
    dtype = state.multipliers.dtype
    num_constraints, horizon = state.counts.constraint_cost_sums.shape[:2]
    model = optimistic_model(state.counts)
    reward = model.cost + numerics.einsum("i,ihsa->hsa", state.multipliers, model.constraint_costs)
    lmo = box_of(model).lmo(reward, state.initial_state)
    q = lmo.occupancy
    if step.dual_optimizer is None:
      eta_k = jnp.asarray(step.step_size(horizon, num_constraints, state.episode), dtype)
      new_state = state._replace(
        multipliers=multiplier_updates.dual_step(
          q,
          model.constraint_costs,
          state.thresholds,
          state.multipliers,
          eta_k,
          check=check,
        ),
      )
    else:
      if step.eta is not None:  # the step the optimizer was given, at this episode
        eta_k = jnp.asarray(step.step_size(horizon, num_constraints, state.episode), dtype)
        kernels.finite("eta", eta_k, "optdual", check=check, low=0.0, low_open=True)
      violation = numerics.einsum("ihsa,hsa->i", model.constraint_costs, q) - state.thresholds
      multipliers, dual_state = multiplier_updates.projected_dual_update(
        step.optimizer(horizon, num_constraints), state.dual_state, state.multipliers, violation
      )
      new_state = state._replace(multipliers=multipliers)._replace(dual_state=dual_state)
    info = base.plan_info(model, q, inner_gap=jnp.zeros((), dtype), pretraining=jnp.zeros((), bool))
    policy = jax.nn.one_hot(lmo.actions, q.shape[-1], dtype=dtype)
    return policy, new_state, info

  return plan


def _init_fn(setting, step: _DualStep):
  """OptDual's `init`: an `AgentState`, in a `DualOptimizerState` with a dual optimizer."""
  init_counting_state = base.init_fn(setting)

  def init(thresholds, initial_state, *, num_states, num_actions, horizon):
    state = init_counting_state(
      thresholds, initial_state, num_states=num_states, num_actions=num_actions, horizon=horizon
    )
    if step.dual_optimizer is None:
      return state
    transform = step.optimizer(horizon, state.multipliers.shape[0])
    return DualOptimizerState(agent=state, dual_state=transform.init(state.multipliers))

  return init


def _variant(name: str, dual_optimizer: Callable, summary: str) -> None:
  """Registers OptDual with a fixed dual optimizer (a callable of OptDual's step `eta`)."""
  registry.register_agent(name, problem_args=lambda b: {"slack": b.slack}, summary=summary)(
    functools.partial(optdual, dual_optimizer=dual_optimizer)
  )


_variant(
  "optdual_optimistic",
  optax.optimistic_gradient_descent,
  "OptDual with optimistic dual descent (ReLOAD's multiplier update), step eta",
)
_variant(
  "pid_lagrangian",
  lambda eta: multiplier_updates.pid_lagrangian(kp=eta, ki=eta, kd=0.0),
  "OptDual with the PID Lagrangian of Stooke et al. 2020 (kp = ki = eta, kd = 0; eta a number)",
)
_variant(
  "nupi_lagrangian",
  lambda eta: multiplier_updates.nupi(eta, kp=1.0, ki=1.0, nu=0.5),
  "OptDual with the nu-PI multiplier update of Sohrabi et al. 2024 (lr eta, kp = ki = 1, nu = 0.5)",
)
