"""OptCMDP (Efroni, Mannor, Pirotta 2020): an exact extended LP every episode."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .. import batching, lp, numerics, planning
from .. import setting as setting_lib
from ..checking import arguments
from ..transition_set import TransitionSet
from . import base, registry


def _host_solve(cost, constraint_costs, lower, upper, initial_state, thresholds):
  """`(q, lp_feasible, lp_failed)` on the host; never raises for a solver status.

  A HiGHS failure (of the episode LP or of its safest-occupancy fallback) returns zeros
  with `lp_failed` set: `plan` then plays the safest occupancy by extended value iteration.
  """
  dtype = np.asarray(cost).dtype
  try:
    q, feasible = lp.solve_extended_lp(
      cost, constraint_costs, lower, upper, initial_state, thresholds
    )
  except Exception as e:  # noqa: BLE001 - an exception here would end the whole run
    warnings.warn(
      f"optcmdp: the episode LP failed ({type(e).__name__}: {e}); playing the"
      " safest occupancy (extended value iteration)",
      RuntimeWarning,
      stacklevel=2,
    )
    return np.zeros(np.shape(cost), dtype), np.asarray(False), np.asarray(True)
  return q.astype(dtype), np.asarray(feasible), np.asarray(False)


@registry.register_agent(
  "optcmdp", summary="OptCMDP: the extended LP by HiGHS every episode (slow, host)"
)
def optcmdp(
  num_episodes: int,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  *,
  setting: setting_lib.Setting | None = None,
) -> base.Agent:
  """OptCMDP: `min_{q} c~ . q  s.t.  D~ q <= alpha` over the extended polytope, exactly.

  The LP-based reference without cancellation of errors. The LP is solved by HiGHS on the
  host through `jax.pure_callback` from inside the jitted step; under `vmap` the calls run
  one after another (`vmap_method="sequential"`), so this agent is much slower than the
  DP-based ones. The box rows empty only by rounding (e.g. the float32 point rows of
  `bonus_scale=0`) are made feasible first (`lp.repair_box`). If the optimistic problem is
  infeasible it plays the safest occupancy `argmin_{q in Z} sum_i d~_i . q` (a second LP);
  if HiGHS fails (the run never stops for it: a `RuntimeWarning` is issued) it plays that
  same safest occupancy computed by extended value iteration.

  Args:
    num_episodes: `K`.
    delta: confidence parameter; `None` (default): the setting's (0.1 in the paper's).
    bonus_scale: multiplier of every confidence radius.
    setting: what the agent knows and its confidence convention (`Setting`, see
      `named_setting`); `None` (default): the paper's.

  Returns:
    `Agent(init, plan, update)`; multipliers stay 0 (no dual variables). `PlanInfo.extras`
    (logged per episode by `run` as `log.extras[name]`): `"lp_feasible"` (bool, the
    optimistic LP was solved and feasible; False when the safest occupancy was played)
    and `"lp_failed"` (bool, HiGHS failed and the safest occupancy came from extended value
    iteration).
  """
  arguments.check_int("num_episodes", num_episodes, low=1, high=numerics.MAX_EPISODES)
  optimistic_model = base.model_fn(
    num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale, setting=setting
  )
  setting_lib.resolve(setting).check_dense("optcmdp")

  return base.Agent(
    init=base.init_fn(setting),
    plan=_plan_fn(optimistic_model),
    update=base.update_fn(setting),
    assumptions=base.Assumptions(num_episodes=num_episodes, setting=setting),
  )


def _plan_fn(optimistic_model):
  """The plan: the optimistic LP on the host, or the safest occupancy by DP where HiGHS
  failed."""

  def plan(state: base.AgentState):
    model = optimistic_model(state.counts)
    shapes = (
      jax.ShapeDtypeStruct(model.cost.shape, model.cost.dtype),
      jax.ShapeDtypeStruct((), jnp.bool_),
      jax.ShapeDtypeStruct((), jnp.bool_),
    )
    q_lp, feasible, failed = jax.pure_callback(
      _host_solve,
      shapes,
      model.cost,
      model.constraint_costs,
      model.lower,
      model.upper,
      state.initial_state,
      state.thresholds,
      vmap_method="sequential",
    )

    def from_lp(_):
      return q_lp, planning.policy_from_occupancy(q_lp)

    def safest(_):  # the fallback LP's problem, by DP (HiGHS failed)
      sol = model.transition_set().value_iteration(
        jnp.sum(model.constraint_costs, axis=0), state.initial_state
      )
      kernel = TransitionSet.point(sol.transitions, model.next_states)
      return kernel.occupancy(sol.policy, state.initial_state), sol.policy

    q, policy = batching.batch_cond(~failed, from_lp, safest, None)
    info = base.plan_info(
      model,
      q,
      inner_gap=jnp.zeros((), q.dtype),
      pretraining=jnp.zeros((), bool),
      extras={"lp_feasible": feasible, "lp_failed": failed},
    )
    return policy, state, info

  return plan
