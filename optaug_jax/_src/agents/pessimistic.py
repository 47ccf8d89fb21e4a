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
    bonus_next_states: which next states `beta-bar` sums over when the setting knows the
      support: `"support"` (default) the possible ones only (the box is 0 elsewhere, so
      their radii carry no information); `"all"`, every one of the S next states, as the
      authors' media_streaming script does: an impossible next state, never observed,
      adds `min(bonus_scale 14 L^p / (3 (n v 1)), 1)` (1 for a never-visited pair). (Their
      factored script also drops the cap at 1.) Without a known support both are the
      same.
    cmdp: the true CMDP, read once on the host to check `safe_policy` and `slack`
      (`check_safe_policy`: a baseline that is not strictly feasible, or a slack above
      its true one, raises `ValueError`); the agent never uses its model. `make_agent`
      passes the benchmark's; `None`: no check (the agent trusts the baseline).

  Returns:
    `Agent(init, plan, update)`; `PlanInfo` reports the pessimistic constraint values and,
    in `extras` (logged per episode by `run` as `log.extras[name]`), `"lp_feasible"` (bool:
    the episode LP was solved and feasible; False in the baseline phase, when the LP was
    infeasible and when HiGHS failed) and `"lp_failed"` (bool: HiGHS failed; the run goes
    on with `pi_b` and a `RuntimeWarning`). `pretraining` is set whenever `pi_b` is played.
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
    dtype = state.multipliers.dtype
    horizon, num_states, num_actions = state.counts.visits.shape
    pi_b = jnp.asarray(safe_policy, dtype)
    k0 = pretrain_episodes
    if k0 is None:
      k0 = min(
        num_episodes,
        dope_pretrain_episodes(
          num_states=num_states, num_actions=num_actions, horizon=horizon, slack=float(slack)
        ),
      )
    est = empirical(state.counts)
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
    lower, upper = estimates.transition_box(est)
    baseline_q = TransitionSet.point(est.transitions, est.next_states).occupancy(
      pi_b, state.initial_state
    )

    def baseline(_):
      return baseline_q, jnp.zeros((), bool), jnp.zeros((), bool)

    def solve(_):
      q, feasible, failed = _host_lp(
        _dope_lp,
        pretraining,
        cost,
        cost,
        constraint_costs,
        lower,
        upper,
        state.initial_state,
        state.thresholds,
      )
      return jnp.where(feasible, q, baseline_q), feasible, failed

    pretraining = state.episode < k0
    q, feasible, failed = batching.batch_cond(pretraining, baseline, solve, None)
    policy = jnp.where(feasible, planning.policy_from_occupancy(q), pi_b)
    info = base.PlanInfo(
      optimistic_cost_value=jnp.sum(cost * q),
      optimistic_constraint_values=jnp.einsum("ihsa,hsa->i", constraint_costs, q),
      inner_gap=jnp.zeros((), dtype),
      pretraining=pretraining | ~feasible,
      off_support_transitions=est.off_support_transitions,
      extras={"lp_feasible": feasible, "lp_failed": failed},
    )
    return policy, state, info

  return base.Agent(
    init=base.init_fn(setting),
    plan=plan,
    update=base.update_fn(setting),
    assumptions=base.Assumptions(
      num_episodes=num_episodes, safe_policy=safe_policy, slack=slack, setting=setting
    ),
  )


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
      (`check_safe_policy`: a baseline that is not strictly feasible, or a slack above
      its true one, raises `ValueError`); the agent never uses its model. `make_agent`
      passes the benchmark's; `None`: no check (the agent trusts the baseline).

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
    baseline_q = TransitionSet.point(est.transitions, est.next_states).occupancy(
      pi_b, state.initial_state
    )
    baseline_values = jnp.einsum("ihsa,hsa->i", constraint_costs, baseline_q)
    use_baseline = jnp.any(baseline_values >= state.thresholds - slack / 2.0)

    def baseline(_):
      return baseline_q, jnp.zeros((), bool), jnp.zeros((), bool)

    def solve(_):
      q, feasible, failed = _host_lp(
        _pess_lp,
        use_baseline,
        cost,
        est.transitions,
        cost,
        constraint_costs,
        state.thresholds,
        state.initial_state,
      )
      return jnp.where(feasible, q, baseline_q), feasible, failed

    q, feasible, failed = batching.batch_cond(use_baseline, baseline, solve, None)
    policy = jnp.where(feasible, planning.policy_from_occupancy(q), pi_b)
    info = base.PlanInfo(
      optimistic_cost_value=jnp.sum(cost * q),
      optimistic_constraint_values=jnp.einsum("ihsa,hsa->i", constraint_costs, q),
      inner_gap=jnp.zeros((), dtype),
      pretraining=~feasible,
      off_support_transitions=est.off_support_transitions,
      extras={"lp_feasible": feasible, "lp_failed": failed},
    )
    return policy, state, info

  return base.Agent(
    init=base.init_fn(setting),
    plan=plan,
    update=base.update_fn(setting),
    assumptions=base.Assumptions(
      num_episodes=num_episodes, safe_policy=safe_policy, slack=slack, setting=setting
    ),
  )
