"""Multiplier updates as optax transformations: nu-PI, the PID Lagrangian, and OptDual's
`dual_optimizer` slot, checked against NumPy loops of the published recursions."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import optaug_jax as oj


def _errors(seed=0, n=40, dim=2):
  return np.random.default_rng(seed).normal(size=(n, dim))


def _apply(transform, errors, params0):
  """Runs `transform` on gradients `-errors`, projecting on >= 0; returns the params path."""
  params = jnp.asarray(params0)
  state = transform.init(params)
  path = []
  for e in errors:
    updates, state = transform.update(-jnp.asarray(e), state, params)
    params = jnp.maximum(optax.apply_updates(params, updates), 0.0)
    path.append(np.asarray(params))
  return np.array(path)


def test_nupi_matches_the_published_recursion():
  """xi_t = nu xi_{t-1} + (1 - nu) e_t (xi_{-1} = 0);
  lambda_{t+1} = [lambda_t + lr (ki e_t + kp (xi_t - xi_{t-1}))]_+ (e = the violation)."""
  lr, kp, ki, nu = 0.3, 0.7, 1.2, 0.4
  errors = _errors()
  lam, xi, want = np.array([0.5, 0.0]), np.zeros(2), []
  for e in errors:
    xi_new = nu * xi + (1 - nu) * e
    lam = np.maximum(lam + lr * (ki * e + kp * (xi_new - xi)), 0.0)
    xi = xi_new
    want.append(lam.copy())
  got = _apply(oj.agents.nupi(lr, kp=kp, ki=ki, nu=nu), errors, [0.5, 0.0])
  np.testing.assert_allclose(got, np.array(want), rtol=1e-12, atol=1e-14)


def test_nupi_special_cases_are_sgd_and_optimistic_descent():
  errors = _errors(1)
  np.testing.assert_allclose(
    _apply(oj.agents.nupi(0.2, kp=0.0), errors, [0.1, 0.3]),
    _apply(optax.sgd(0.2), errors, [0.1, 0.3]),
    rtol=1e-13,
  )

  # kp = ki = 1, nu = 0: the steps -lr (2 g_t - g_{t-1}) of optimistic gradient descent.
  # optax starts from g_{-1} = g_0 (an SGD first step), nu-PI from xi_{-1} = 0.
  def steps(transform):
    state, out = transform.init(jnp.zeros(2)), []
    for e in errors:
      u, state = transform.update(jnp.asarray(e), state, jnp.zeros(2))
      out.append(np.asarray(u))
    return np.array(out)

  nupi_steps = steps(oj.agents.nupi(0.2, kp=1.0, ki=1.0, nu=0.0))
  ogd_steps = steps(optax.optimistic_gradient_descent(0.2))
  np.testing.assert_allclose(nupi_steps[1:], ogd_steps[1:], rtol=1e-13)
  np.testing.assert_allclose(nupi_steps[0], 2 * ogd_steps[0], rtol=1e-13)


def test_pid_lagrangian_matches_stooke_algorithm_2():
  """I = [I + e]_+, lambda = [kp e + ki I + kd [e - e_prev]_+]_+ (e_prev starts at 0)."""
  kp, ki, kd = 0.4, 0.25, 0.9
  errors = _errors(2)
  integral, prev, want = np.zeros(2), np.zeros(2), []
  for e in errors:
    integral = np.maximum(integral + e, 0.0)
    want.append(np.maximum(kp * e + ki * integral + kd * np.maximum(e - prev, 0.0), 0.0))
    prev = e
  got = _apply(oj.agents.pid_lagrangian(kp=kp, ki=ki, kd=kd), errors, [0.0, 0.0])
  np.testing.assert_allclose(got, np.array(want), rtol=1e-12, atol=1e-14)
  # kp = kd = 0 from lambda = 0 is projected dual ascent with step ki.
  np.testing.assert_allclose(
    _apply(oj.agents.pid_lagrangian(kp=0.0, ki=ki), errors, [0.0, 0.0]),
    _apply(optax.sgd(ki), errors, [0.0, 0.0]),
    rtol=1e-12,
    atol=1e-15,
  )


@pytest.mark.slow  # 15-25 s; another default test covers the kernel (default suite under 10 min)
def test_optdual_with_optax_sgd_is_optdual():
  bench = oj.benchmarks.make_benchmark("factored", dtype=jnp.float64)
  key = jax.random.PRNGKey(3)
  _, plain = oj.run(oj.optdual(300, eta=0.05, bonus_scale=0.1), key, bench.cmdp, num_episodes=300)
  _, sgd = oj.run(
    oj.optdual(300, dual_optimizer=optax.sgd(0.05), bonus_scale=0.1),
    key,
    bench.cmdp,
    num_episodes=300,
  )
  assert float(plain.multipliers.max()) > 0.1  # the constraint binds: multipliers move
  np.testing.assert_array_equal(plain.multipliers, sgd.multipliers)
  np.testing.assert_array_equal(plain.cost_value, sgd.cost_value)
  # A callable receives OptDual's step: eta=0.05 with optax.sgd is the same run again.
  _, called = oj.run(
    oj.optdual(300, eta=0.05, dual_optimizer=optax.sgd, bonus_scale=0.1),
    key,
    bench.cmdp,
    num_episodes=300,
  )
  np.testing.assert_array_equal(plain.multipliers, called.multipliers)


@pytest.mark.parametrize(
  "name",
  [  # 12-15 s each: one in the default suite
    pytest.param("optdual_optimistic", marks=pytest.mark.slow),
    "pid_lagrangian",
    pytest.param("nupi_lagrangian", marks=pytest.mark.slow),
  ],
)
def test_controller_variants_run_jit_and_vmap(name):
  bench = oj.benchmarks.make_benchmark("factored", dtype=jnp.float64)
  agent = oj.agents.make_agent(name, bench, num_episodes=100, bonus_scale=0.1)
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  states, logs = jax.jit(jax.vmap(lambda k: oj.run(agent, k, bench.cmdp, num_episodes=100)))(keys)
  assert isinstance(states, oj.agents.DualOptimizerState)
  _, one = oj.run(agent, keys[2], bench.cmdp, num_episodes=100)
  chex.assert_trees_all_close(jax.tree.map(lambda x: x[2], logs), one, atol=1e-12)
  assert float(logs.multipliers.max()) > 0 and float(logs.multipliers.min()) >= 0


def test_bad_dual_optimizers_are_refused():
  with pytest.raises(ValueError, match="dual_optimizer"):
    oj.optdual(10, eta=0.1, dual_optimizer="sgd")
  with pytest.raises(ValueError, match="eta"):
    oj.optdual(10, eta=0.1, dual_optimizer=optax.sgd(0.1))
  with pytest.raises(ValueError, match="nu"):
    oj.agents.nupi(0.1, nu=1.0)
  with pytest.raises(ValueError, match="kd"):
    oj.agents.pid_lagrangian(kp=0.1, ki=0.1, kd=-1.0)
  with pytest.raises(ValueError, match="params"):
    oj.agents.pid_lagrangian(kp=0.1, ki=0.1).update(jnp.zeros(1), None)
