"""OptCMDP (Efroni, Mannor, Pirotta 2020): an exact extended LP every episode."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import lp, planning, validation
from .. import setting as setting_lib
from . import base, registry


def _host_solve(cost, constraint_costs, lower, upper, initial_state, thresholds):
  q, _ = lp.solve_extended_lp(cost, constraint_costs, lower, upper, initial_state,
                                     thresholds)
  return q.astype(np.asarray(cost).dtype)


@registry.register_agent(
    "optcmdp", summary="OptCMDP: the extended LP by HiGHS every episode (slow, host)")
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
  DP-based ones. If the optimistic problem is infeasible it plays the safest occupancy.

  Args:
    num_episodes: `K`.
    delta: confidence parameter; `None` (default): the setting's (0.1 in the paper's).
    bonus_scale: multiplier of every confidence radius.
    setting: what the agent knows and its confidence convention (`Setting`, see
      `named_setting`); `None` (default): the paper's.

  Returns:
    `Agent(init, plan, update)`; multipliers stay 0 (no dual variables).
  """
  validation.check_int("num_episodes", num_episodes, low=1)
  optimistic_model = base.model_fn(num_episodes=num_episodes, delta=delta,
                                   bonus_scale=bonus_scale, setting=setting)

  def plan(state: base.AgentState):
    model = optimistic_model(state.counts)
    shape = jax.ShapeDtypeStruct(model.cost.shape, model.cost.dtype)
    q = jax.pure_callback(_host_solve, shape, model.cost, model.constraint_costs, model.lower,
                          model.upper, state.initial_state, state.thresholds,
                          vmap_method="sequential")
    info = base.plan_info(model, q, fw_gap=jnp.zeros((), q.dtype),
                          pretraining=jnp.zeros((), bool))
    return planning.policy_from_occupancy(q), state, info

  return base.Agent(init=base.init_state, plan=plan, update=base.update_state)
