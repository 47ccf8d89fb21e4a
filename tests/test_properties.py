"""Property tests (hypothesis): invariants of whole runs and inner solves over random
CMDPs and hyperparameters. Shapes are fixed so that each property compiles once."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import optaug_jax as oj  # noqa: E402

S, A, H, K = 3, 2, 3, 12
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)
INNER = {"frank_wolfe": oj.inner.frank_wolfe(num_iters=10), "dual": oj.inner.exact()}


@jax.jit
def _run(key, bonus_scale, eta, inner_flag):
  m = oj.random_cmdp(key, num_states=S, num_actions=A, horizon=H, num_constraints=2)
  pi, _ = oj.safest_policy(m)

  def with_method(method):
    agent = oj.optaug(
      num_episodes=K,
      safe_policy=pi,
      pretrain_episodes=3,
      slack=1.0,
      eta=eta,
      bonus_scale=bonus_scale,
      inner=INNER[method],
    )
    return oj.run(agent, jax.random.fold_in(key, 1), m, num_episodes=K)

  state_fw, log_fw = with_method("frank_wolfe")
  state_dual, log_dual = with_method("dual")
  return m, jax.tree.map(
    lambda a, b: jnp.where(inner_flag, b, a), (state_fw, log_fw), (state_dual, log_dual)
  )


@pytest.mark.slow  # 15 s; slow suite (default suite under 10 minutes)
@SETTINGS
@given(
  seed=st.integers(0, 2**31 - 1),
  bonus_scale=st.floats(0.0, 2.0),
  log_eta=st.floats(-3.0, 4.0),
  dual=st.booleans(),
)
def test_runs_stay_valid(seed, bonus_scale, log_eta, dual):
  m, (state, log) = _run(jax.random.PRNGKey(seed), bonus_scale, 10.0**log_eta, dual)
  for leaf in jax.tree.leaves((state, log)):
    assert np.all(np.isfinite(np.asarray(leaf)))
  assert np.all(np.asarray(log.multipliers) >= 0)
  assert np.all(np.asarray(log.inner_gap) >= -1e-12)  # a certificate, up to rounding
  v, vd = np.asarray(log.cost_value), np.asarray(log.constraint_values)
  assert np.all((v >= -1e-9) & (v <= H + 1e-9)) and np.all((vd >= -1e-9) & (vd <= H + 1e-9))
  model = oj.optimistic_model(state.counts, num_episodes=K, delta=0.1, bonus_scale=bonus_scale)
  lo, up = np.asarray(model.lower), np.asarray(model.upper)
  assert np.all(lo <= up + 1e-12) and np.all(lo.sum(-1) <= 1 + 1e-9)
  assert np.all(up.sum(-1) >= 1 - 1e-9)
  assert int(np.asarray(state.counts.visits).sum()) == K * H


@jax.jit
def _inner(key, eta, radius):
  m = oj.random_cmdp(key, num_states=S, num_actions=A, horizon=H, num_constraints=2)
  lower = jnp.clip(m.transitions - radius, 0.0, 1.0)
  upper = jnp.clip(m.transitions + radius, 0.0, 1.0)
  lam = jax.random.uniform(jax.random.fold_in(key, 2), (2,)) * 2.0
  sol = oj.solve_inner(
    oj.inner.InnerProblem(
      cost=m.cost,
      constraint_costs=m.constraint_costs,
      thresholds=m.thresholds,
      transitions=oj.TransitionSet(lower, upper),
      initial_state=0,
    ),
    lam,
    eta,
    solver=oj.inner.exact(tol=None),
    gradient="unrolled",
  )
  fw = oj.solve_inner(
    oj.inner.InnerProblem(
      cost=m.cost,
      constraint_costs=m.constraint_costs,
      thresholds=m.thresholds,
      transitions=oj.TransitionSet(lower, upper),
      initial_state=0,
    ),
    lam,
    eta,
    solver=oj.inner.frank_wolfe(num_iters=30),
    gradient="unrolled",
  )
  return sol, fw, lower, upper


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), log_eta=st.floats(-3.0, 6.0), radius=st.floats(0.0, 0.5))
@pytest.mark.slow  # 15-25 s; another default test covers the kernel (default suite under 10 min)
def test_inner_solutions_are_valid_and_certified(seed, log_eta, radius):
  sol, fw, lower, upper = _inner(jax.random.PRNGKey(seed), 10.0**log_eta, radius)
  for s in (sol, fw):
    q = np.asarray(s.occupancy)
    assert np.all(np.isfinite(q)) and np.all(q >= -1e-12)
    np.testing.assert_allclose(q.sum((1, 2)), 1.0, atol=1e-9)
    p = np.asarray(s.transitions)
    assert np.all(p >= np.asarray(lower) - 1e-9) and np.all(p <= np.asarray(upper) + 1e-9)
    assert float(s.gap) >= -1e-12
  # Both certificates bound the distance to the same optimum: the two objectives agree
  # within the sum of the certificates (the exact one is ~0).
  scale = max(1.0, abs(float(sol.objective)))
  if log_eta < 4.0:  # measured: exact below eta = 1e4; above, a few % of instances stop
    assert float(sol.gap) <= 1e-6 * scale  # with a certificate up to ~3e-2 (README)
  assert float(sol.objective) <= float(fw.objective) + 1e-9 * scale
  assert float(fw.objective) - float(sol.objective) <= float(fw.gap) + 1e-6 * scale
