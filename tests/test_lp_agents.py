"""The LP agents (OptCMDP, DOPE, OptPess-LP) never end a run on a solver status, stay
feasible where the model is (boxes empty only by rounding), work for H = 1, and refuse an
unsafe baseline. References: independent HiGHS LPs in float64 (`references`, or direct
formulations written here)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref
import scipy.optimize

import optaug_jax as oj
from optaug_jax._src import lp as lp_module

# --- references -----------------------------------------------------------------------


def _h1_value(cost, constraint_costs, thresholds, initial_state):
  """For H = 1 the (extended or plain) LP reduces to a policy at s_1 (all flow starts
  there; the box only shapes the next states, which carry no cost):
  min_{pi in simplex(A)} c(s_1) . pi  s.t.  d_i(s_1) . pi <= alpha_i. None if infeasible."""
  c = np.asarray(cost, np.float64)[0, initial_state]
  d = np.asarray(constraint_costs, np.float64)[:, 0, initial_state]
  res = scipy.optimize.linprog(
    c,
    A_ub=d,
    b_ub=np.asarray(thresholds, np.float64),
    A_eq=np.ones((1, c.size)),
    b_eq=[1.0],
    bounds=(0, None),
    method="highs",
  )
  return None if res.status == 2 else res.fun


def _empirical(counts):
  """(c-bar, d-bar, p-bar) in float64 from the counts; p-bar rows renormalised (exact
  n(s') / n), uniform where unvisited."""
  n = np.asarray(counts.visits, np.float64)
  m = np.maximum(n, 1.0)
  c_bar = np.asarray(counts.cost_sums, np.float64) / m
  d_bar = np.asarray(counts.constraint_cost_sums, np.float64) / m
  trans = np.asarray(counts.transitions, np.float64)
  p_bar = np.where(n[..., None] > 0, trans / m[..., None], 1.0 / trans.shape[-1])
  return c_bar, d_bar, p_bar / p_bar.sum(-1, keepdims=True)


def _h1_cmdp():
  """H = 1, S = 2, A = 3: action 0 cheap and unsafe, action 2 safe and dear; the
  constraint binds (V* = 0.4 mixes actions 0 and 1)."""
  p = np.full((1, 2, 3, 2), 0.5)
  c = np.array([[[0.0, 0.5, 1.0], [0.2, 0.2, 0.2]]])
  d = np.array([[[[1.0, 0.5, 0.0], [0.2, 0.2, 0.2]]]])
  cmdp = oj.CMDP(
    transitions=jnp.asarray(p),
    cost=jnp.asarray(c),
    constraint_costs=jnp.asarray(d),
    thresholds=jnp.asarray([0.6]),
    initial_state=jnp.asarray(0),
  )
  pi_b = np.zeros((1, 2, 3))
  pi_b[:, :, :] = [0.1, 0.2, 0.7]  # every action tried; d . pi_b = 0.2
  slack = oj.check_safe_policy(cmdp, pi_b)
  return oj.benchmarks.Benchmark(cmdp=cmdp, safe_policy=jnp.asarray(pi_b), slack=slack)


def _float32_cmdp(seed=0):
  return oj.random_cmdp(
    jax.random.PRNGKey(seed), num_states=3, num_actions=2, horizon=3, dtype=jnp.float32
  )


def _mixed_baseline(cmdp):
  """0.7 x the safest policy + 0.3 x uniform: strictly feasible here, tries every action."""
  pi, _ = oj.safest_policy(cmdp)
  pi = 0.7 * np.asarray(pi, np.float64) + 0.3 / cmdp.num_actions
  slack = oj.check_safe_policy(cmdp, pi.astype(np.float32))
  return oj.benchmarks.Benchmark(cmdp=cmdp, safe_policy=jnp.asarray(pi, jnp.float32), slack=slack)


def _failing_linprog(*args, **kwargs):
  """HiGHS giving up (status 4), as scipy reports it."""
  return scipy.optimize.OptimizeResult(
    status=4, success=False, x=None, fun=None, message="Numerical difficulties (test)"
  )


# --- the LP module ---------------------------------------------------------------------


def test_extended_polytope_for_one_step_matches_the_reference():
  rng = np.random.default_rng(0)
  p = rng.dirichlet(np.ones(3), size=(1, 3, 2))
  lower, upper = ref.random_box(rng, p, 0.3)
  a_eq, b_eq, a_box, b_box = oj.lp.extended_polytope(lower, upper, 1)
  r_eq, rb_eq, r_box, rb_box = ref.extended_polytope(lower, upper, 1)
  np.testing.assert_allclose(a_eq.toarray(), r_eq.toarray(), atol=1e-15)
  np.testing.assert_allclose(b_eq, rb_eq, atol=1e-15)
  # The reference interleaves the upper and lower row of each entry; oj stacks the sides.
  r_box = r_box.toarray()
  np.testing.assert_allclose(a_box.toarray(), np.vstack([r_box[0::2], r_box[1::2]]), atol=1e-15)
  np.testing.assert_allclose(b_box, rb_box, atol=1e-15)


def test_solve_extended_lp_for_one_step_matches_the_direct_lp():
  rng = np.random.default_rng(1)
  p = rng.dirichlet(np.ones(3), size=(1, 3, 4))
  lower, upper = ref.random_box(rng, p, 0.2)
  cost = rng.uniform(size=(1, 3, 4))
  d = rng.uniform(size=(2, 1, 3, 4))
  alpha = np.array([0.5, 0.6])
  q, feasible = oj.lp.solve_extended_lp(cost, d, lower, upper, 2, alpha)
  want = _h1_value(cost, d, alpha, 2)
  assert feasible and want is not None
  assert float(np.sum(cost * q)) == pytest.approx(want, abs=1e-9)
  assert np.all(np.einsum("ihsa,hsa->i", d, q) <= alpha + 1e-9)


def test_point_boxes_of_float32_estimates_are_feasible():
  """bonus_scale=0 makes every box row the point p-bar, whose float32 entries sum to
  1 +- 6e-8: the LP must equal the exact LP of the renormalised float64 model."""
  rng = np.random.default_rng(2)
  horizon, num_states, num_actions = 3, 4, 2
  p32 = rng.dirichlet(np.ones(num_states), size=(horizon, num_states, num_actions)).astype(
    np.float32
  )
  sums = p32.astype(np.float64).sum(-1)
  assert np.abs(sums - 1.0).max() > 1e-8  # the rounding is there
  cost = rng.uniform(size=(horizon, num_states, num_actions))
  d = rng.uniform(size=(1, horizon, num_states, num_actions))
  alpha = np.array([1.2])
  p64 = p32.astype(np.float64) / sums[..., None]
  want = ref.occupancy_lp_value(p64, cost, d, alpha, 0)
  assert want is not None
  q, feasible = oj.lp.solve_extended_lp(
    cost.astype(np.float32), d.astype(np.float32), p32, p32, 0, alpha.astype(np.float32)
  )
  assert feasible
  assert float(np.sum(cost * q)) == pytest.approx(want, abs=1e-6)
  # repair_box: rows within the tolerance hold a distribution; beyond it, left alone.
  lower, upper = lp_module.repair_box(p32, p32)
  assert np.abs(lower.sum(-1) - 1.0).max() < 1e-14
  assert np.abs(upper.sum(-1) - 1.0).max() < 1e-14
  np.testing.assert_allclose(lower, p64, atol=1e-15)
  empty_up = np.array([0.5, 0.4])  # sums to 0.9: genuinely empty
  lo, up = lp_module.repair_box(np.zeros(2, np.float32), empty_up.astype(np.float32))
  np.testing.assert_array_equal(up, empty_up.astype(np.float32))
  lo, up = lp_module.repair_box(
    np.array([0.6, 0.4000001], np.float32), np.array([0.7, 0.5], np.float32)
  )
  assert lo.sum() <= 1.0 + 1e-15 and np.all(lo <= up)


# --- bonus_scale = 0 in float32 ----------------------------------------------------------


def _point_box(counts):
  """The box of bonus_scale=0 in float64: the point p-bar (renormalised) where visited, the
  whole simplex [0, 1] where not (a never-visited pair keeps radius 1)."""
  visited = np.asarray(counts.visits) > 0
  _, _, p_bar = _empirical(counts)
  lower = np.where(visited[..., None], p_bar, 0.0)
  upper = np.where(visited[..., None], p_bar, 1.0)
  return lower, upper, visited


@pytest.mark.slow  # 15-25 s; another default test covers the kernel (default suite under 10 min)
def test_optcmdp_with_point_boxes_in_float32_matches_the_float64_lp():
  """With no radius, OptCMDP's LP is the extended LP of the empirical model: costs c-bar,
  d-bar (0 where unvisited) over the point boxes p-bar, renormalised in float64. The float32
  point rows (sums 1 +- 6e-8) used to make that LP infeasible: the run ended with "HiGHS
  failed on the extended polytope" when no flow could avoid them, and here (unvisited pairs
  keep whole-simplex boxes) silently played the safest occupancy."""
  cmdp = _float32_cmdp(0)
  agent = oj.agents.optcmdp(num_episodes=40, bonus_scale=0.0)
  state, log = oj.run(agent, jax.random.PRNGKey(1), cmdp, num_episodes=40)
  _, _, info = jax.jit(agent.plan)(state)
  c_bar, d_bar, _ = _empirical(state.counts)
  lower, upper, visited = _point_box(state.counts)
  assert visited[1:].mean() > 0.6  # mostly point rows
  want = ref.constrained_extended_lp_value(
    c_bar, d_bar, lower, upper, 0, np.asarray(cmdp.thresholds, np.float64)
  )
  assert want is not None
  assert float(info.optimistic_cost_value) == pytest.approx(want, abs=2e-6)
  assert bool(info.extras["lp_feasible"]) and not bool(info.extras["lp_failed"])
  assert not np.asarray(log.extras["lp_failed"]).any()
  assert np.asarray(log.extras["lp_feasible"]).all()


def test_dope_with_point_boxes_in_float32_solves_its_lps():
  """DOPE used to find every LP infeasible (its box rows empty by rounding) and play the
  baseline forever. Now each LP after K_0 is feasible and equals the float64 extended LP
  of the empirical model with no radius: objective c-bar - H^2 / slack beta-bar and
  constraint d-bar + H beta-bar, where beta-bar is 0 on visited pairs and S on the others
  (radius 1 per next state), over the point boxes."""
  bench = _mixed_baseline(_float32_cmdp(0))
  k0, horizon, num_states = 15, 3, 3
  agent = oj.agents.make_agent(
    "dope", bench, num_episodes=40, bonus_scale=0.0, pretrain_episodes=k0
  )
  state, log = oj.run(agent, jax.random.PRNGKey(1), bench.cmdp, num_episodes=30)
  feasible = np.asarray(log.extras["lp_feasible"])
  assert not feasible[:k0].any() and feasible[k0:].all()
  assert not np.asarray(log.extras["lp_failed"]).any()
  _, _, info = jax.jit(agent.plan)(state)
  c_bar, d_bar, _ = _empirical(state.counts)
  lower, upper, visited = _point_box(state.counts)
  beta_bar = np.where(visited, 0.0, float(num_states))
  cost = c_bar - horizon**2 / bench.slack * beta_bar
  cons = d_bar + horizon * beta_bar
  want = ref.constrained_extended_lp_value(
    cost, cons, lower, upper, 0, np.asarray(bench.cmdp.thresholds, np.float64)
  )
  assert want is not None and bool(info.extras["lp_feasible"])
  assert float(info.optimistic_cost_value) == pytest.approx(want, abs=2e-6)


# --- H = 1 -------------------------------------------------------------------------------


def test_optcmdp_for_one_step_matches_the_direct_lp():
  bench = _h1_cmdp()
  agent = oj.agents.optcmdp(num_episodes=40, bonus_scale=0.3)
  state, log = oj.run(agent, jax.random.PRNGKey(0), bench.cmdp, num_episodes=30)
  assert not np.asarray(log.extras["lp_failed"]).any()
  _, _, info = jax.jit(agent.plan)(state)
  model = oj.optimistic_model(state.counts, num_episodes=40, delta=0.1, bonus_scale=0.3)
  want = _h1_value(model.cost, model.constraint_costs, bench.cmdp.thresholds, 0)
  assert want is not None and bool(info.extras["lp_feasible"])
  assert float(info.optimistic_cost_value) == pytest.approx(want, abs=1e-8)


def test_dope_for_one_step_matches_the_direct_lp():
  """Bura et al.'s radii (references.bura2022_box, loops), their objective
  c - H^2 / slack beta-bar and constraint d + H beta-bar, the LP at s_1."""
  bench, bonus, k_total = _h1_cmdp(), 0.05, 80
  agent = oj.agents.make_agent(
    "dope", bench, num_episodes=k_total, setting="bura2022", bonus_scale=bonus, pretrain_episodes=30
  )
  state, log = oj.run(agent, jax.random.PRNGKey(0), bench.cmdp, num_episodes=60)
  assert np.asarray(log.extras["lp_feasible"])[30:].any()
  assert not np.asarray(log.extras["lp_failed"]).any()
  _, _, info = jax.jit(agent.plan)(state)
  trans = np.asarray(state.counts.transitions)[0]  # [S, A, S']
  states, actions = [], []
  for s, a, s1 in zip(*np.nonzero(trans)):
    for _ in range(int(trans[s, a, s1])):
      states.append([s, s1])
      actions.append([a])
  support = np.asarray(bench.cmdp.transitions[0]) > 0
  _, _, beta = ref.bura2022_box(
    states, actions, 2, 3, k_total, 0.01, support, horizon=1, bonus_scale=bonus
  )
  beta_bar = beta.sum(-1)[None]
  cost = np.asarray(bench.cmdp.cost) - 1.0 / bench.slack * beta_bar
  cons = np.asarray(bench.cmdp.constraint_costs) + beta_bar
  want = _h1_value(cost, cons, bench.cmdp.thresholds, 0)
  assert want is not None and bool(info.extras["lp_feasible"])
  assert float(info.optimistic_cost_value) == pytest.approx(want, abs=1e-8)


def test_optpess_lp_for_one_step_matches_the_direct_lp():
  """Liu et al.'s costs with beta = bonus sqrt(L^p / n), the baseline test, the LP at s_1;
  the new `lp_failed` flag is logged (False)."""
  bench, bonus, k_total = _h1_cmdp(), 0.01, 60
  agent = oj.agents.make_agent("optpess_lp", bench, num_episodes=k_total, bonus_scale=bonus)
  state, log = oj.run(agent, jax.random.PRNGKey(0), bench.cmdp, num_episodes=40)
  assert not np.asarray(log.extras["lp_failed"]).any()
  _, _, info = jax.jit(agent.plan)(state)
  h, s, a = 1, 2, 3
  n = np.asarray(state.counts.visits)
  beta = bonus * np.sqrt(math.log(6 * s * a * h * k_total / 0.1) / np.maximum(n, 1))
  c_bar, d_bar, p_bar = _empirical(state.counts)
  sh = 1 + s * h
  cost = c_bar - (sh + 4 * h * sh / bench.slack) * beta
  cons = d_bar + sh * beta
  q_b = ref.occupancy_loop(p_bar, np.asarray(bench.safe_policy), 0)
  alpha = float(bench.cmdp.thresholds[0])
  assert float(np.sum(cons[0] * q_b)) < alpha - bench.slack / 2  # the LP branch is taken
  want = _h1_value(cost, cons, bench.cmdp.thresholds, 0)
  assert want is not None and bool(info.extras["lp_feasible"])
  assert float(info.optimistic_cost_value) == pytest.approx(want, abs=1e-8)


# --- solver failures: the documented fallback, logged, and the run goes on --------------


@pytest.mark.parametrize("name", ["dope", "optpess_lp"])
def test_a_failed_lp_plays_the_baseline_and_is_logged(name, monkeypatch):
  bench = _mixed_baseline(_float32_cmdp(0))
  options = {"pretrain_episodes": 3} if name == "dope" else {}
  agent = oj.agents.make_agent(name, bench, num_episodes=10, bonus_scale=0.001, **options)
  monkeypatch.setattr(lp_module.scipy.optimize, "linprog", _failing_linprog)
  with pytest.warns(RuntimeWarning, match="LP failed"):
    _, log = oj.run(agent, jax.random.PRNGKey(0), bench.cmdp, num_episodes=10)
  failed = np.asarray(log.extras["lp_failed"])
  assert failed[3:].all() if name == "dope" else failed.any()
  assert not np.asarray(log.extras["lp_feasible"]).any()
  assert np.asarray(log.pretraining).all()
  value, _ = oj.policy_values(bench.cmdp, bench.safe_policy)
  np.testing.assert_allclose(log.cost_value, float(value), rtol=1e-6)


def test_a_failed_lp_makes_optcmdp_play_the_safest_occupancy_also_under_vmap(monkeypatch):
  cmdp = _float32_cmdp(1)
  agent = oj.agents.optcmdp(num_episodes=8, bonus_scale=0.5)
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  monkeypatch.setattr(lp_module.scipy.optimize, "linprog", _failing_linprog)
  with pytest.warns(RuntimeWarning, match="LP failed"):
    state, log = jax.jit(jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=4)))(keys)
    one = jax.tree.map(lambda x: x[0], state)
    policy, _, info = jax.jit(agent.plan)(one)
  assert np.asarray(log.extras["lp_failed"]).all() and bool(info.extras["lp_failed"])
  assert not np.asarray(log.extras["lp_feasible"]).any()
  model = oj.optimistic_model(one.counts, num_episodes=8, delta=0.1, bonus_scale=0.5)
  safest = oj.TransitionSet(model.lower, model.upper).value_iteration(
    jnp.sum(model.constraint_costs, 0), 0
  )
  np.testing.assert_allclose(policy, safest.policy)
  assert float(jnp.sum(info.optimistic_constraint_values)) == pytest.approx(
    float(safest.value), abs=1e-5
  )


# --- unsafe baselines ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dope", "optpess_lp"])
def test_an_unsafe_baseline_is_refused(name):
  bench = _h1_cmdp()
  unsafe = np.zeros((1, 2, 3))
  unsafe[..., 0] = 1.0  # d = 1 > alpha = 0.6
  bad = bench._replace(safe_policy=jnp.asarray(unsafe), slack=0.1)
  with pytest.raises(ValueError, match="safe_policy: not strictly feasible"):
    oj.agents.make_agent(name, bad, num_episodes=10)
  with pytest.raises(ValueError, match="safe_policy: not strictly feasible"):
    oj.agents.make_agent(name, bench, num_episodes=10, safe_policy=unsafe)
  with pytest.raises(ValueError, match="slack: .* exceeds"):
    oj.agents.make_agent(name, bench, num_episodes=10, slack=bench.slack + 0.1)
  factory = oj.agents.dope if name == "dope" else oj.agents.optpess_lp
  with pytest.raises(ValueError, match="safe_policy: not strictly feasible"):
    factory(num_episodes=10, safe_policy=unsafe, slack=0.1, cmdp=bench.cmdp)
  oj.agents.make_agent(name, bench, num_episodes=10)  # the safe one is accepted
