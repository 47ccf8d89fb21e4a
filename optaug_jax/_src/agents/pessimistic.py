"""Safe-exploration baselines with pessimistic constraints: DOPE and OptPess-LP.

Both are compared in Bura et al. (2022, "DOPE: Doubly Optimistic and Pessimistic
Exploration for Safe Reinforcement Learning"): they aim at no constraint violation at all
(with probability 1 - delta), by playing a known strictly feasible baseline `pi_b` (whose
constraint value `C_b = alpha - slack` is known) until a pessimistic problem is feasible.
Each episode problem is an LP solved by HiGHS on the host through `jax.pure_callback` (as
`optcmdp`): under `vmap` the LPs of the seeds run one after another, so these agents take
tens of milliseconds per seed-episode once the baseline phase is over (docs/design.md).
Baseline episodes solve no LP (the host returns at once for a seed that plays the
baseline, also under `vmap`).

Differences from the authors' public code (archanabura/DOPE-DoublyOptimisticPessimistic
Exploration, `Codes/MediaControl/*-queue.py` and `Codes/FactoredCMDP/*_factored.py`, read,
not run; docs/results/README.md, "DOPE and OptCMDP against the authors' code"):
- the radii, log factors and what is known come from the agent's `setting` (pass
  `setting="bura2022"` to `make_agent` for theirs: known costs and support, counts pooled
  over h, `log(6 S^2 H K / delta)`, delta 0.01); with learned costs, DOPE adds the
  Hoeffding radius to its objective (optimism) and constraint (pessimism) costs;
- DOPE's `beta-bar` sums the radii over the known support; their code sums over all S
  next states, impossible ones included (`min(14 L / (3 n), 1)` each, never 0), which
  makes its constraint far more pessimistic: `dope(bonus_next_states="all")` is theirs
  (measured in `experiments/dope_code_comparison.py`). Their factored script also leaves
  the radius uncapped (no `min(., 1)`); here it is always capped at 1;
- OptPess-LP's cost radius is `sqrt(L^p / (n v 1))` with the setting's `L^p`; their script
  uses `log(32 S^2 H K / delta)` (a 5% larger radius at L = 20) and leaves never-visited
  pairs at radius 0, where this one gives them `sqrt(L^p)`. Their baseline test reads the
  pessimistic costs of the previous LP call (zeros before the first one); here they are
  this episode's. Their media script unpacks the LP's four return values as
  `(policy, value, cost, status)`, so its status test compares an array with 'Optimal'
  (an error under NumPy 2; older NumPy returned a scalar True for such a comparison,
  with a FutureWarning, so the script always fell back to the baseline);
- HiGHS replaces PuLP/CBC (whose `fracGap` of 0.01 for DOPE and OptCMDP, 0.001 for
  OptPess-LP, makes their LPs approximate).
"""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .. import batching, estimates, lp, numerics, planning, policies
from .. import cmdp as cmdp_lib
from .. import setting as setting_lib
from ..checking import arguments
from ..transition_set import TransitionSet
from . import base, registry


def _failed(name: str, error: Exception, dtype, shape):
  warnings.warn(
    f"{name}: the episode LP failed ({type(error).__name__}: {error}); playing the safe baseline",
    RuntimeWarning,
    stacklevel=2,
  )
  return np.zeros(shape, dtype), np.asarray(False), np.asarray(True)


def _dope_lp(skip, cost, constraint_costs, lower, upper, initial_state, thresholds):
  dtype = np.asarray(cost).dtype
  if skip:
    return np.zeros(np.shape(cost), dtype), np.asarray(False), np.asarray(False)
  try:
    q, feasible = lp.solve_extended_lp(
      cost, constraint_costs, lower, upper, initial_state, thresholds, fallback=False
    )
  except Exception as e:  # noqa: BLE001 - an exception here would end the whole run
    return _failed("dope", e, dtype, np.shape(cost))
  return q.astype(dtype), np.asarray(feasible), np.asarray(False)


def _pess_lp(skip, transitions, cost, constraint_costs, thresholds, initial_state):
  dtype = np.asarray(cost).dtype
  if skip:
    return np.zeros(np.shape(cost), dtype), np.asarray(False), np.asarray(False)
  try:
    q, feasible = lp.solve_occupancy_lp(
      transitions, cost, constraint_costs, thresholds, initial_state
    )
  except Exception as e:  # noqa: BLE001 - an exception here would end the whole run
    return _failed("optpess_lp", e, dtype, np.shape(cost))
  return q.astype(dtype), np.asarray(feasible), np.asarray(False)


def _host_lp(fn, skip, out_like, *args):
  """`fn(skip, *args) -> (q, lp_feasible, lp_failed)` on the host, one seed after another
  under `vmap`; never raises for a solver status (a failure sets `lp_failed`).

  `skip` (the baseline branch's predicate) is passed to the host, which returns at once
  when it is set: under `vmap`, a batch split between baseline and LP seeds runs both
  branches (`batching.batch_cond`; a batch all on the baseline makes no callback at all), and
  HiGHS would otherwise solve (and discard) an LP for every baseline seed.
  """
  shapes = (
    jax.ShapeDtypeStruct(out_like.shape, out_like.dtype),
    jax.ShapeDtypeStruct((), jnp.bool_),
    jax.ShapeDtypeStruct((), jnp.bool_),
  )
  return jax.pure_callback(fn, shapes, skip, *args, vmap_method="sequential")


def _check_baseline(cmdp, safe_policy, slack) -> None:
  """`check_safe_policy` on the host when the CMDP is given and the arguments concrete."""
  if cmdp is None or any(
    arguments.traced(x) for x in jax.tree_util.tree_leaves((cmdp, safe_policy))
  ):
    return
  checked_slack = None if arguments.traced(slack) else slack
  policies.check_safe_policy(cmdp, safe_policy, checked_slack)


def dope_pretrain_episodes(*, num_states: int, num_actions: int, horizon: int, slack: float) -> int:
  """DOPE's baseline phase `K_0 = S^2 A H^3 / (alpha - C_b)^2` (the authors' scripts)."""
  return int(math.ceil(num_states**2 * num_actions * horizon**3 / slack**2))


def _check_common(num_episodes, safe_policy, slack, pretrain_episodes, cmdp):
  arguments.check_int("num_episodes", num_episodes, low=1, high=numerics.MAX_EPISODES)
  arguments.check_policy("safe_policy", safe_policy)
  arguments.check_positive("slack", slack, allow_none=False)
  if pretrain_episodes is not None:
    arguments.check_int("pretrain_episodes", pretrain_episodes, low=0)
  _check_baseline(cmdp, safe_policy, slack)


def _problem_args(benchmark) -> dict:
  """The baseline, its slack, and the CMDP to check them against (`check_safe_policy`)."""
  return {"safe_policy": benchmark.safe_policy, "slack": benchmark.slack, "cmdp": benchmark.cmdp}


@registry.register_agent(
  "dope",
  problem_args=_problem_args,
  summary="DOPE (Bura et al. 2022): optimistic objective, pessimistic constraints, LP",
)
def dope(
  num_episodes: int,
  safe_policy: jax.Array,
  slack: float,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  pretrain_episodes: int | None = None,
  *,
  setting: setting_lib.Setting | None = None,
  bonus_next_states: str = "support",
  cmdp: cmdp_lib.CMDP | None = None,
) -> base.Agent:
  """DOPE: doubly optimistic (objective) and pessimistic (constraints) extended LP.

  Episodes `1..K_0` play the baseline `pi_b`. Then, with `beta-bar(h, s, a) = sum_s'
  beta^p(h, s, a, s')` the L1 transition radius, episode k solves over the transition box
  (the extended LP of `optcmdp`)

      min_q  sum q (c-bar - beta^c - H^2 / (alpha - C_b) beta-bar)
      s.t.   sum q (d-bar_i + beta^d + H beta-bar) <= alpha_i   for every i,

  and plays the policy of `q`; if the LP is infeasible, or HiGHS fails, it plays `pi_b`.
  (The authors' code, with `C_b = alpha - slack`; known costs make `beta^c = beta^d = 0`.)
  Box rows empty only by rounding (e.g. the float32 point rows of `bonus_scale=0`) are made
  feasible first (`lp.repair_box`).

  Args:
    num_episodes: `K`.
    safe_policy: `[H, S, A]` the baseline `pi_b`.
    slack: `alpha - C_b`, the baseline's slack (the smallest over constraints).
    delta: confidence parameter; `None`: the setting's.
    bonus_scale: multiplier of every radius (1.0 = the published radii).
    pretrain_episodes: `K_0`; `None`: `dope_pretrain_episodes` (`S^2 A H^3 / slack^2`,
      at most `K`).
    setting: what the agent knows (`Setting`); `None`: the paper's.
    bonus_next_states: where the setting knows the support, `beta-bar` sums over the
      possible next states (`"support"`, default) or over all S (`"all"`, as the authors'
      media_streaming script: an impossible next state adds `min(bonus_scale 14 L^p /
      (3 (n v 1)), 1)`, 1 for a never-visited pair).
    cmdp: the true CMDP, read once on the host to check `safe_policy` and `slack`
      (`check_safe_policy`); `make_agent` passes the benchmark's; `None`: no check.

  Returns:
    `Agent(init, plan, update)`; `PlanInfo` reports the pessimistic constraint values;
    `extras["lp_feasible"]` (the episode LP solved and feasible) and `"lp_failed"`
    (HiGHS failed: `pi_b` is played, with a `RuntimeWarning`); `pretraining` is set
    whenever `pi_b` is played.
  """
  _check_common(num_episodes, safe_policy, slack, pretrain_episodes, cmdp)
  arguments.check_choice("bonus_next_states", bonus_next_states, ("support", "all"))
  resolved = setting_lib.resolve(setting)
  radius_delta = resolved.resolved_delta if delta is None else delta
  setting_lib.resolve(setting).check_dense("dope")
  empirical = base.model_fn(
    num_episodes=num_episodes,
    delta=delta,
    bonus_scale=bonus_scale,
    setting=setting,
    model=estimates.empirical_model,
  )

  def plan(state: base.AgentState):
    pi_b = jnp.asarray(safe_policy, state.multipliers.dtype)
    k0 = _dope_k0(pretrain_episodes, num_episodes, state.counts.visits.shape, slack)
    est = empirical(state.counts)
    radii = (bonus_scale, radius_delta, num_episodes)
    cost, constraint_costs = _dope_costs(est, state, resolved, bonus_next_states, slack, radii)
    lower, upper = estimates.transition_box(est)
    lp_args = (cost, constraint_costs, lower, upper, state.initial_state, state.thresholds)
    played = _lp_or_baseline(est, state, pi_b, lambda q0: state.episode < k0, _dope_lp, lp_args)
    return _lp_plan(played, cost, constraint_costs, est, state)

  return base.Agent(
    init=base.init_fn(setting),
    plan=plan,
    update=base.update_fn(setting),
    assumptions=base.Assumptions(
      num_episodes=num_episodes, safe_policy=safe_policy, slack=slack, setting=setting
    ),
  )


def _lp_or_baseline(est, state, pi_b, use_baseline, lp, lp_args):
  """`(q, use_baseline, lp_feasible, lp_failed)`: the baseline's occupancy in the empirical
  model where `use_baseline(its occupancy)`, else the host LP `lp(*lp_args)`'s (the
  baseline's where it is infeasible or HiGHS fails); `q`'s policy, `pi_b` where not
  feasible."""
  baseline_q = TransitionSet.point(est.transitions, est.next_states).occupancy(
    pi_b, state.initial_state
  )
  skip = use_baseline(baseline_q)

  def baseline(_):
    return baseline_q, jnp.zeros((), bool), jnp.zeros((), bool)

  def solve(_):
    q, feasible, failed = _host_lp(lp, skip, baseline_q, *lp_args)
    return jnp.where(feasible, q, baseline_q), feasible, failed

  q, feasible, failed = batching.batch_cond(skip, baseline, solve, None)
  policy = jnp.where(feasible, planning.policy_from_occupancy(q), pi_b)
  return policy, q, skip, feasible, failed


def _lp_plan(played, cost, constraint_costs, est, state):
  """`plan`'s `(policy, state, PlanInfo)` of an LP agent's episode (`_lp_or_baseline`)."""
  policy, q, skip, feasible, failed = played
  info = base.PlanInfo(
    optimistic_cost_value=jnp.sum(cost * q),
    optimistic_constraint_values=numerics.einsum("ihsa,hsa->i", constraint_costs, q),
    inner_gap=jnp.zeros((), state.multipliers.dtype),
    pretraining=skip | ~feasible,
    off_support_transitions=est.off_support_transitions,
    extras={"lp_feasible": feasible, "lp_failed": failed},
  )
  return policy, state, info


def _dope_k0(pretrain_episodes, num_episodes: int, shape, slack) -> int:
  """DOPE's baseline phase: `pretrain_episodes`, or `dope_pretrain_episodes` (at most K)."""
  if pretrain_episodes is not None:
    return pretrain_episodes
  horizon, num_states, num_actions = shape
  k0 = dope_pretrain_episodes(
    num_states=num_states, num_actions=num_actions, horizon=horizon, slack=float(slack)
  )
  return min(num_episodes, k0)


def _dope_costs(est, state, resolved, bonus_next_states: str, slack, radii):
  """DOPE's LP costs `c-bar - beta^c - H^2 / slack beta-bar` and `d-bar + beta^d + H
  beta-bar`; `radii`: `(bonus_scale, delta, K)` of the impossible next states' radii
  (`bonus_next_states="all"`)."""
  bonus_scale, radius_delta, num_episodes = radii
  dtype = state.multipliers.dtype
  horizon, num_states, num_actions = state.counts.visits.shape
  beta_bar = jnp.sum(est.transition_radius, axis=-1)
  if bonus_next_states == "all" and resolved.support is not None:
    log_p, _ = setting_lib.log_factors(
      resolved,
      num_states=num_states,
      num_actions=num_actions,
      horizon=horizon,
      num_constraints=state.thresholds.shape[0],
      num_episodes=num_episodes,
      delta=radius_delta,
    )
    unseen = jnp.minimum(bonus_scale * 14.0 * log_p / (3.0 * jnp.maximum(est.visits, 1.0)), 1.0)
    unseen = jnp.where(est.visits > 0, unseen, 1.0)
    impossible = num_states - jnp.sum(jnp.asarray(resolved.support), axis=-1)
    beta_bar = beta_bar + unseen * impossible.astype(dtype)
  cost = est.cost - est.cost_radius - horizon**2 / slack * beta_bar
  constraint_costs = est.constraint_costs + est.constraint_radius + horizon * beta_bar
  return cost, constraint_costs


@registry.register_agent(
  "optpess_lp",
  problem_args=_problem_args,
  summary="OptPess-LP (Liu et al. 2021): pessimistic LP on the empirical model",
)
def optpess_lp(
  num_episodes: int,
  safe_policy: jax.Array,
  slack: float,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  *,
  setting: setting_lib.Setting | None = None,
  cmdp: cmdp_lib.CMDP | None = None,
) -> base.Agent:
  """OptPess-LP (Liu et al. 2021, as run by Bura et al. 2022): an LP on the empirical model.

  With `beta(h, s, a) = bonus_scale sqrt(L^p / (n v 1))`, the costs
  `c^ = c-bar - (1 + S H + 4 H (1 + S H) / (alpha - C_b)) beta` and
  `d^_i = d-bar_i + (1 + S H) beta`, episode k plays `pi_b` if its value
  `V^{pi_b}(d^_i, p-bar) >= (alpha_i + C_b) / 2 = alpha_i - slack / 2` for some i; else it
  solves `min c^ . q  s.t.  d^_i . q <= alpha_i`, q an occupancy of `p-bar` (no box), and
  plays its policy, or `pi_b` if that LP is infeasible or HiGHS fails.

  Args:
    num_episodes: `K`.
    safe_policy: `[H, S, A]` the baseline `pi_b`.
    slack: `alpha - C_b`, the baseline's slack.
    delta: confidence parameter; `None`: the setting's.
    bonus_scale: multiplier of the radius.
    setting: what the agent knows (`Setting`); `None`: the paper's.
    cmdp: the true CMDP, read once on the host to check `safe_policy` and `slack`
      (`check_safe_policy`); `make_agent` passes the benchmark's; `None`: no check.

  Returns:
    `Agent(init, plan, update)`; `extras["lp_feasible"]` and `extras["lp_failed"]` as
    `dope`'s (`lp_feasible` is also False in the episodes the baseline test picks `pi_b`).
  """
  _check_common(num_episodes, safe_policy, slack, None, cmdp)
  setting_lib.resolve(setting).check_dense("optpess_lp")
  empirical = base.model_fn(
    num_episodes=num_episodes,
    delta=delta,
    bonus_scale=bonus_scale,
    setting=setting,
    model=estimates.empirical_model,
  )
  setting_ = setting_lib.resolve(setting)
  delta_ = setting_.resolved_delta if delta is None else delta

  def plan(state: base.AgentState):
    dtype = state.multipliers.dtype
    num_constraints, horizon, num_states, num_actions = state.counts.constraint_cost_sums.shape
    pi_b = jnp.asarray(safe_policy, dtype)
    est = empirical(state.counts)
    log_p, _ = setting_lib.log_factors(
      setting_,
      num_states=num_states,
      num_actions=num_actions,
      horizon=horizon,
      num_constraints=num_constraints,
      num_episodes=num_episodes,
      delta=delta_,
    )
    beta = bonus_scale * jnp.sqrt(log_p / jnp.maximum(est.visits, 1.0))
    sh = 1.0 + num_states * horizon
    cost = est.cost - (sh + 4.0 * horizon * sh / slack) * beta
    constraint_costs = est.constraint_costs + sh * beta
    lp_args = (est.transitions, cost, constraint_costs, state.thresholds, state.initial_state)

    def use_baseline(baseline_q):  # the baseline test: its pessimistic values near alpha
      values = numerics.einsum("ihsa,hsa->i", constraint_costs, baseline_q)
      return jnp.any(values >= state.thresholds - slack / 2.0)

    played = _lp_or_baseline(est, state, pi_b, use_baseline, _pess_lp, lp_args)
    return _lp_plan(played, cost, constraint_costs, est, state)

  return base.Agent(
    init=base.init_fn(setting),
    plan=plan,
    update=base.update_fn(setting),
    assumptions=base.Assumptions(
      num_episodes=num_episodes, safe_policy=safe_policy, slack=slack, setting=setting
    ),
  )
