"""OptPrimalDual-CMDP and OptCMDP against independent references on tiny problems."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref
import scipy.optimize

import optaug_jax as oj


def _tiny(seed=0):
  return oj.random_cmdp(
    jax.random.PRNGKey(seed), num_states=3, num_actions=2, horizon=3, num_constraints=1
  )


def _ope_loop(reward, policy, lower, upper):
  """Optimistic policy evaluation with one HiGHS LP per (h, s, a)."""
  h_, s_, a_ = reward.shape
  v = np.zeros(s_)
  for h in reversed(range(h_)):
    qv = np.zeros((s_, a_))
    for s in range(s_):
      for a in range(a_):
        res = scipy.optimize.linprog(
          v,
          A_eq=np.ones((1, s_)),
          b_eq=[1.0],
          bounds=list(zip(lower[h, s, a], upper[h, s, a])),
          method="highs",
        )
        qv[s, a] = reward[h, s, a] + res.fun
    v = (policy[h] * qv).sum(-1)
  return v


def test_optimistic_policy_evaluation_matches_lp_loop_and_exact_values():
  m = _tiny(1)
  rng = np.random.default_rng(0)
  lower, upper = ref.random_box(rng, np.asarray(m.transitions), 0.3)
  pi = rng.dirichlet(np.ones(2), size=(3, 3))
  values, _ = oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)).evaluate(
    m.cost, jnp.asarray(pi)
  )
  np.testing.assert_allclose(values[0], _ope_loop(np.asarray(m.cost), pi, lower, upper), atol=1e-10)
  point, _ = oj.TransitionSet(m.transitions, m.transitions).evaluate(m.cost, jnp.asarray(pi))
  v, _ = oj.policy_values(m, jnp.asarray(pi))
  assert float(point[0, 0]) == pytest.approx(float(v), abs=1e-10)


def test_optprimaldual_mirror_and_dual_steps():
  m = _tiny(2)
  agent = oj.agents.optprimaldual(
    num_episodes=20, bonus_scale=0.3, policy_step=0.7, multiplier_step=0.4
  )
  state, _ = oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=5)
  policy, new_state, info = agent.plan(state)
  model = oj.optimistic_model(state.counts, num_episodes=20, delta=0.1, bonus_scale=0.3)
  lower, upper = np.asarray(model.lower), np.asarray(model.upper)
  pi = np.asarray(state.policy)
  lagr = np.asarray(model.cost) + float(state.multipliers[0]) * np.asarray(
    model.constraint_costs[0]
  )
  # Q-values of the Lagrangian under optimistic evaluation, by the LP loop.
  h_, s_, a_ = lagr.shape
  v = np.zeros(s_)
  qs = np.zeros_like(lagr)
  for h in reversed(range(h_)):
    for s in range(s_):
      for a in range(a_):
        res = scipy.optimize.linprog(
          v,
          A_eq=np.ones((1, s_)),
          b_eq=[1.0],
          bounds=list(zip(lower[h, s, a], upper[h, s, a])),
          method="highs",
        )
        qs[h, s, a] = lagr[h, s, a] + res.fun
    v = (pi[h] * qs[h]).sum(-1)
  expected = pi * np.exp(-0.7 * qs)
  expected /= expected.sum(-1, keepdims=True)
  np.testing.assert_allclose(policy, expected, rtol=1e-8)
  d_value = _ope_loop(np.asarray(model.constraint_costs[0]), pi, lower, upper)[0]
  lam = max(0.0, float(state.multipliers[0]) + 0.4 * (d_value - float(m.thresholds[0])))
  assert float(new_state.multipliers[0]) == pytest.approx(lam, abs=1e-10)


def test_optcmdp_solves_the_extended_lp():
  m = oj.random_cmdp(
    jax.random.PRNGKey(3), num_states=3, num_actions=2, horizon=3, num_constraints=2
  )
  agent = oj.agents.optcmdp(num_episodes=30, bonus_scale=0.2)
  state, _ = oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=10)
  policy, _, info = jax.jit(agent.plan)(state)
  model = oj.optimistic_model(state.counts, num_episodes=30, delta=0.1, bonus_scale=0.2)
  # Independent dense LP over Z with the constraint rows added.
  a_eq, b_eq, a_ub, b_ub = ref.extended_polytope(
    np.asarray(model.lower), np.asarray(model.upper), 0
  )
  expand = lambda x: np.repeat(np.asarray(x).reshape(-1), 3)
  a_con = np.stack([expand(d) for d in model.constraint_costs])
  res = scipy.optimize.linprog(
    expand(model.cost),
    A_ub=np.vstack([a_ub.toarray(), a_con]),
    b_ub=np.concatenate([b_ub, np.asarray(m.thresholds)]),
    A_eq=a_eq,
    b_eq=b_eq,
    bounds=(0, None),
    method="highs",
  )
  assert res.status == 0
  assert float(info.optimistic_cost_value) == pytest.approx(res.fun, abs=1e-8)
  assert np.all(np.asarray(info.optimistic_constraint_values) <= np.asarray(m.thresholds) + 1e-8)
  np.testing.assert_allclose(policy.sum(-1), 1.0)


def test_solve_extended_lp_unconstrained_is_extended_value_iteration():
  rng = np.random.default_rng(5)
  p = rng.dirichlet(np.ones(4), size=(3, 4, 2))
  lower, upper = ref.random_box(rng, p, 0.3)
  cost = rng.uniform(size=(3, 4, 2))
  q, feasible = oj.lp.solve_extended_lp(cost, np.zeros((1, 3, 4, 2)), lower, upper, 0, [3.0])
  sol = oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)).value_iteration(
    jnp.asarray(cost), 0
  )
  assert feasible
  assert np.sum(cost * q) == pytest.approx(float(sol.value), abs=1e-9)


@pytest.mark.slow  # 14 s; slow suite (default suite under 10 minutes)
def test_baselines_vmap_over_seeds():
  m = _tiny(4)
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  for agent in [oj.agents.optprimaldual(num_episodes=8), oj.agents.optcmdp(num_episodes=8)]:
    _, log = jax.jit(jax.vmap(lambda k: oj.run(agent, k, m, num_episodes=8)))(keys)
    chex.assert_shape(log.cost_value, (3, 8))
    _, l1 = oj.run(agent, keys[1], m, num_episodes=8)
    chex.assert_trees_all_close(l1, jax.tree.map(lambda x: x[1], log), atol=1e-9)
