"""Strong and weak regrets against a NumPy loop."""

import jax.numpy as jnp
import numpy as np

import optaug_jax as oj


def _log(cost, cons):
  z = jnp.zeros_like(cost)
  return oj.EpisodeLog(
    cost_value=cost,
    constraint_values=cons,
    optimistic_cost_value=z,
    optimistic_constraint_values=cons,
    multipliers=cons,
    inner_gap=z,
    pretraining=z.astype(bool),
    sampled_cost=z,
    sampled_constraint_costs=cons,
  )


def test_regrets_match_loop_with_leading_axes():
  rng = np.random.default_rng(0)
  seeds, k, i = 3, 20, 2
  cost = rng.normal(1.0, 0.5, size=(seeds, k))
  cons = rng.normal(2.0, 0.5, size=(seeds, k, i))
  v_star, alpha = 1.0, np.array([2.0, 1.9])
  r = oj.regrets(_log(jnp.asarray(cost), jnp.asarray(cons)), v_star, alpha)
  for s in range(seeds):
    sc = wc = ac = 0.0
    scon, wcon = np.zeros(i), np.zeros(i)
    for t in range(k):
      sc += max(cost[s, t] - v_star, 0)
      wc += cost[s, t] - v_star
      ac += abs(cost[s, t] - v_star)
      scon += np.maximum(cons[s, t] - alpha, 0)
      wcon += cons[s, t] - alpha
      np.testing.assert_allclose(r.strong_cost[s, t], sc, rtol=1e-12)
      np.testing.assert_allclose(r.weak_cost[s, t], wc, rtol=1e-12, atol=1e-12)
      np.testing.assert_allclose(r.absolute_cost[s, t], ac, rtol=1e-12)
      np.testing.assert_allclose(r.strong_constraint[s, t], scon.max(), rtol=1e-12)
      np.testing.assert_allclose(r.weak_constraint[s, t], wcon.max(), rtol=1e-12, atol=1e-12)


def test_regrets_align_extra_axes_from_the_left():
  """[M CMDPs, N seeds, K] with per-CMDP optima [M] and thresholds [M, I], also for M == N."""
  rng = np.random.default_rng(1)
  cost = jnp.asarray(rng.uniform(size=(3, 3, 4)))
  cons = jnp.asarray(rng.uniform(size=(3, 3, 4, 2)))
  v = jnp.asarray([0.1, 0.5, 0.9])
  alpha = jnp.asarray(rng.uniform(size=(3, 2)))
  r = oj.regrets(_log(cost, cons), v, alpha)
  for m in range(3):
    rm = oj.regrets(_log(cost[m], cons[m]), v[m], alpha[m])
    np.testing.assert_allclose(r.weak_cost[m], rm.weak_cost, rtol=1e-12)
    np.testing.assert_allclose(r.weak_constraint[m], rm.weak_constraint, rtol=1e-12)
  with np.testing.assert_raises(ValueError):
    oj.regrets(_log(cost, cons), jnp.zeros(4), alpha)


def test_regrets_per_cmdp_optima_broadcast():
  cost = jnp.ones((2, 5))
  cons = jnp.ones((2, 5, 1))
  r = oj.regrets(_log(cost, cons), jnp.array([0.5, 2.0]), jnp.array([[0.0], [2.0]]))
  np.testing.assert_allclose(r.strong_cost[:, -1], [2.5, 0.0])
  np.testing.assert_allclose(r.weak_cost[:, -1], [2.5, -5.0])
  np.testing.assert_allclose(r.strong_constraint[:, -1], [5.0, 0.0])
  np.testing.assert_allclose(r.weak_constraint[:, -1], [5.0, -5.0])


def test_absolute_objective_regret_by_hand():
  """Bura et al. (2022)'s sum_k |V^pi_k - V*|: cost below V* counts too (hand-computed)."""
  cost = jnp.asarray([7.0, 6.0, 6.75, 8.0])
  cons = jnp.zeros((4, 1))
  r = oj.regrets(_log(cost, cons), 6.75, jnp.asarray([5.0]))
  np.testing.assert_allclose(r.absolute_cost, [0.25, 1.0, 1.0, 2.25], rtol=1e-12)
  np.testing.assert_allclose(r.strong_cost, [0.25, 0.25, 0.25, 1.5], rtol=1e-12)
  np.testing.assert_allclose(r.weak_cost, [0.25, -0.5, -0.5, 0.75], rtol=1e-12)
