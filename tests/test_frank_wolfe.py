"""Augmented Lagrangian and the Frank-Wolfe inner solver against cvxpy and closed forms."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj
from optaug_jax import experiment
from optaug_jax._src.inner import line_search  # tested directly


def _instance(seed=3, s=3, a=2, h=3, num_constraints=2, radius=0.2):
  m = oj.random_cmdp(
    jax.random.PRNGKey(seed),
    num_states=s,
    num_actions=a,
    horizon=h,
    num_constraints=num_constraints,
  )
  rng = np.random.default_rng(seed)
  lower, upper = ref.random_box(rng, np.asarray(m.transitions), radius)
  return m, jnp.asarray(lower), jnp.asarray(upper)


def test_augmented_lagrangian_closed_form():
  m, _, _ = _instance()
  rng = np.random.default_rng(0)
  q = rng.uniform(size=m.cost.shape)
  lam = jnp.asarray([0.5, 0.0])
  eta = 3.0
  d = np.asarray(m.constraint_costs)
  viol = np.einsum("ihsa,hsa->i", d, q) - np.asarray(m.thresholds)
  expected = np.sum(np.asarray(m.cost) * q) + np.sum(np.maximum(lam + eta * viol, 0) ** 2) / (
    2 * eta
  )
  got = oj.augmented_lagrangian(jnp.asarray(q), m.cost, m.constraint_costs, m.thresholds, lam, eta)
  assert float(got) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("eta", [1.0, 10.0, 100.0])
def test_solve_inner_matches_cvxpy(eta):
  m, lower, upper = _instance()
  lam = jnp.asarray([0.3, 0.0])
  optimum, _ = ref.inner_cvxpy(m.cost, m.constraint_costs, lower, upper, 0, m.thresholds, lam, eta)
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
    solver=oj.inner.frank_wolfe(num_iters=3000, step_rule="linesearch"),
    gradient="unrolled",
  )
  assert abs(float(sol.objective) - optimum) <= 1e-3
  # The gap certifies the error (cvxpy's own accuracy is ~1e-9).
  assert float(sol.objective) - optimum <= float(sol.gap) + 1e-8
  # The objective is the augmented Lagrangian of the returned occupancy.
  assert float(sol.objective) == pytest.approx(
    float(
      oj.augmented_lagrangian(sol.occupancy, m.cost, m.constraint_costs, m.thresholds, lam, eta)
    ),
    rel=1e-12,
  )
  # (policy, transitions) reproduce the occupancy, and the transitions lie in the box.
  q = ref.occupancy_loop(sol.transitions, sol.policy, 0)
  np.testing.assert_allclose(q, sol.occupancy, atol=1e-9)
  t = np.asarray(sol.transitions)
  assert np.all(t >= np.asarray(lower) - 1e-9) and np.all(t <= np.asarray(upper) + 1e-9)
  np.testing.assert_allclose(t.sum(-1), 1.0, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("step_rule", ["standard", "linesearch"])
def test_gap_certificate_and_progress(step_rule):
  m, lower, upper = _instance(seed=5, s=4, a=3, h=4)
  lam = jnp.asarray([1.0, 0.2])
  eta = 30.0
  optimum, _ = ref.inner_cvxpy(m.cost, m.constraint_costs, lower, upper, 0, m.thresholds, lam, eta)
  errors = []
  for t in [10, 100, 1000]:
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
      solver=oj.inner.frank_wolfe(num_iters=t, step_rule=step_rule),
      gradient="unrolled",
    )
    err = float(sol.objective) - optimum
    assert -1e-8 <= err <= float(sol.gap) + 1e-8
    errors.append(err)
  assert errors[-1] < errors[0]
  assert errors[-1] < 5e-3


def test_exact_line_search_matches_grid():
  rng = np.random.default_rng(0)
  for _ in range(50):
    num = 3
    a = jnp.asarray(rng.normal(size=num))
    b = jnp.asarray(rng.normal(size=num) * 2)
    g = float(rng.normal())
    eta = float(rng.uniform(0.1, 10))
    t = float(line_search.exact_line_search(g, a, b, eta))
    grid = np.linspace(0, 1, 200001)
    phi = grid * g + 0.5 * eta * np.sum(
      np.maximum(np.asarray(a) + grid[:, None] * np.asarray(b), 0) ** 2, 1
    )
    phi_t = t * g + 0.5 * eta * np.sum(np.maximum(np.asarray(a) + t * np.asarray(b), 0) ** 2)
    assert 0.0 <= t <= 1.0
    assert phi_t <= phi.min() + 1e-9


def test_tol_stops_early_with_certificate():
  m, lower, upper = _instance()
  lam = jnp.asarray([0.3, 0.0])
  sol = oj.solve_inner(
    oj.inner.InnerProblem(
      cost=m.cost,
      constraint_costs=m.constraint_costs,
      thresholds=m.thresholds,
      transitions=oj.TransitionSet(lower, upper),
      initial_state=0,
    ),
    lam,
    100.0,
    solver=oj.inner.frank_wolfe(num_iters=5000, tol=1e-2),
  )
  assert float(sol.gap) <= 1e-2
  assert 0 < int(sol.num_iters) < 5000


@pytest.mark.slow
def test_solve_inner_jit_vmap_parity_and_no_retrace():
  problems = [_instance(seed) for seed in range(3)]
  cost = jnp.stack([p[0].cost for p in problems])
  d = jnp.stack([p[0].constraint_costs for p in problems])
  alpha = jnp.stack([p[0].thresholds for p in problems])
  lower = jnp.stack([p[1] for p in problems])
  upper = jnp.stack([p[2] for p in problems])
  lam = jnp.asarray([[0.3, 0.0], [0.0, 1.0], [2.0, 2.0]])
  eta = jnp.asarray([1.0, 10.0, 100.0])

  @jax.jit
  @chex.assert_max_traces(n=1)
  def solve(c, dd, lo, up, al, la, et):
    return oj.solve_inner(
      oj.inner.InnerProblem(
        cost=c,
        constraint_costs=dd,
        thresholds=al,
        transitions=oj.TransitionSet(lo, up),
        initial_state=0,
      ),
      la,
      et,
      solver=oj.inner.frank_wolfe(num_iters=50),
      gradient="unrolled",
    )

  batched = jax.vmap(solve)(cost, d, lower, upper, alpha, lam, eta)
  for j in range(3):
    args = (cost[j], d[j], lower[j], upper[j], alpha[j], lam[j], eta[j])
    single = solve(*args)
    eager = oj.solve_inner(
      oj.inner.InnerProblem(
        cost=cost[j],
        constraint_costs=d[j],
        thresholds=alpha[j],
        transitions=oj.TransitionSet(lower[j], upper[j]),
        initial_state=0,
      ),
      lam[j],
      eta[j],
      solver=oj.inner.frank_wolfe(num_iters=50),
      gradient="unrolled",
    )
    chex.assert_trees_all_close(single, jax.tree.map(lambda x: x[j], batched), atol=1e-10)
    chex.assert_trees_all_close(single, eager, atol=1e-10)


@pytest.mark.parametrize("eta", [1e6, 1e12, 1e19, 1e30])
def test_float32_large_eta_stays_finite(eta):
  """The paper's schedule reaches eta ~ 1e19 within ~1e4 optimistic episodes: the float32
  solve must stay finite (accuracy at such eta needs x64, see README)."""
  m, lower, upper = _instance()
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  sol = oj.solve_inner(
    oj.inner.InnerProblem(
      cost=f32(m.cost),
      constraint_costs=f32(m.constraint_costs),
      thresholds=f32(m.thresholds),
      transitions=oj.TransitionSet(f32(lower), f32(upper)),
      initial_state=0,
    ),
    f32(jnp.asarray([1e3, 0.0])),
    jnp.float32(eta),
    solver=oj.inner.frank_wolfe(num_iters=20),
    gradient="unrolled",
  )
  for leaf in [sol.objective, sol.gap, sol.occupancy, sol.policy]:
    assert np.all(np.isfinite(np.asarray(leaf)))


def test_nan_occupancy_is_not_hidden_by_the_policy():
  q = jnp.zeros((2, 2, 2)).at[0, 0].set(jnp.nan).at[0, 1].set(0.0).at[1, 0, 1].set(1.0)
  pi = oj.policy_from_occupancy(q)
  assert np.all(np.isnan(np.asarray(pi[0, 0])))
  np.testing.assert_allclose(pi[0, 1], 0.5)  # unreached: uniform
  np.testing.assert_allclose(pi[1, 0], [0.0, 1.0])


def test_policy_fallback_where_unreached():
  q = jnp.zeros((1, 3, 2)).at[0, 0].set(jnp.asarray([1.0, 3.0]))
  fallback = jax.nn.one_hot(jnp.asarray([[1, 0, 1]]), 2)
  np.testing.assert_allclose(
    oj.policy_from_occupancy(q, fallback)[0], [[0.25, 0.75], [1.0, 0.0], [0.0, 1.0]]
  )


@pytest.mark.parametrize(
  "method",
  [
    pytest.param("dual", marks=pytest.mark.slow),  # 56 s (the dual solver compiles 4 times)
    "frank_wolfe",
  ],
)
def test_unreached_states_play_the_greedy_action_of_the_gradient(method):
  """Where the inner solution never goes (`q_h(s) = 0`), the policy is the action of the
  extended DP on `c + D^T lambda+` at the solution (NumPy loop); "uniform" is uniform; the
  reached rows are eq. (retrieve-pi) in both."""
  npr = experiment.numpy_reference
  m = oj.random_cmdp(
    jax.random.PRNGKey(5), num_states=5, num_actions=3, horizon=4, num_constraints=2
  )
  p = np.asarray(m.transitions)
  lower = np.clip(p - 0.4, 0, 1)  # wide boxes: the optimistic plan reaches few states
  upper = np.clip(p + 0.4, 0, 1)
  lam = jnp.asarray([0.4, 0.1])
  problem = oj.inner.InnerProblem(
    cost=m.cost,
    constraint_costs=m.constraint_costs,
    thresholds=m.thresholds,
    transitions=oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)),
    initial_state=0,
  )
  kwargs = dict(
    solver=(oj.inner.frank_wolfe(num_iters=200) if method == "frank_wolfe" else oj.inner.exact()),
    gradient=None,
  )
  solve = jax.jit(
    lambda lam, unreached: oj.solve_inner(problem, lam, 5.0, **kwargs, unreached=unreached),
    static_argnums=1,
  )
  greedy = solve(lam, "greedy")
  uniform = solve(lam, "uniform")
  q = np.asarray(greedy.occupancy)
  np.testing.assert_array_equal(q, uniform.occupancy)
  unreached = q.sum(-1) == 0
  assert unreached.sum() >= 3 and (~unreached).sum() >= 3
  lam_plus = np.maximum(
    np.asarray(lam)
    + 5.0
    * (np.einsum("ihsa,hsa->i", np.asarray(m.constraint_costs), q) - np.asarray(m.thresholds)),
    0,
  )
  actions = npr.greedy_fallback(
    q, np.asarray(m.cost), np.asarray(m.constraint_costs), lower, upper, 0, lam_plus
  )
  np.testing.assert_allclose(greedy.policy, npr.policy_from_occupancy(q, actions), atol=1e-12)
  np.testing.assert_allclose(uniform.policy, npr.policy_from_occupancy(q), atol=1e-12)
  # Frank-Wolfe pays one more DP for the greedy actions; the exact solve (I = 2: the cutting
  # planes) reuses its last DP, at the solution's multiplier to its accuracy (the NumPy
  # reference above, at lambda+ itself, agrees).
  assert int(greedy.dp_calls) == int(uniform.dp_calls) + (method == "frank_wolfe")
  batched = jax.vmap(lambda lam: solve(lam, "greedy").policy)(jnp.stack([lam, lam]))
  np.testing.assert_allclose(batched[1], greedy.policy, atol=1e-12)
  with pytest.raises(ValueError, match="unreached"):
    oj.solve_inner(problem, lam, 5.0, unreached="random")


def test_bad_step_rule():
  m, lower, upper = _instance()
  with pytest.raises(ValueError, match="step_rule"):
    oj.solve_inner(
      oj.inner.InnerProblem(
        cost=m.cost,
        constraint_costs=m.constraint_costs,
        thresholds=m.thresholds,
        transitions=oj.TransitionSet(lower, upper),
        initial_state=0,
      ),
      jnp.zeros(2),
      1.0,
      solver=oj.inner.frank_wolfe(num_iters=3, step_rule="armijo"),
      gradient="unrolled",
    )


def _binding_cmdp():
  """A CMDP whose LP optimum has a binding constraint and a strictly randomised policy."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(2), num_states=3, num_actions=2, horizon=3, num_constraints=1
  )
  lp = oj.solve_lp(m)
  assert lp.multipliers[0] > 1e-3  # binding
  return m, lp


def test_known_model_alm_last_iterate_vs_dual_descent():
  """The paper's central claim on a known model: ALM's LAST iterate reaches the LP optimum
  and feasibility, while dual descent's iterates keep violating the constraint."""
  m, lp = _binding_cmdp()
  log = jax.jit(lambda eta: oj.analysis.alm_known_model(m, eta, num_iters=40))(5.0)
  assert abs(float(log.cost_value[-1]) - lp.value) <= 1e-8  # exact inner solves
  assert float(jnp.max(log.constraint_values[-1] - m.thresholds)) <= 1e-8
  assert float(log.multipliers[-1, 0]) == pytest.approx(lp.multipliers[0], abs=1e-7)
  assert float(jnp.max(log.inner_gap)) <= 1e-9

  dd = jax.jit(lambda eta: oj.analysis.dual_descent_known_model(m, eta, num_iters=200))(0.5)
  late_v = np.asarray(dd.constraint_values[100:, 0] - m.thresholds[0])
  late_g = np.asarray(dd.cost_value[100:]) - lp.value
  # Every late iterate is off by a finite amount: either it violates or it is suboptimal.
  assert np.min(np.maximum(late_v, np.abs(late_g))) > 1e-2
  # ... and it keeps violating: a fixed fraction of late iterates, up to the very end
  # (here ~17%: the violating vertex is off by ~0.1, the safe one by ~0.02).
  assert np.mean(late_v > 1e-2) > 0.1
  assert np.max(late_v[-20:]) > 1e-2
  # ... while the averages converge (weak regret is fine).
  assert abs(np.mean(late_v)) < 0.1


def test_dual_descent_known_model_matches_a_numpy_loop():
  m, _ = _binding_cmdp()
  log = oj.analysis.dual_descent_known_model(m, 0.5, num_iters=30)
  p, c, d = (np.asarray(x) for x in (m.transitions, m.cost, m.constraint_costs))
  alpha = np.asarray(m.thresholds)
  lam = np.zeros(1)
  for n in range(30):
    reward = c + np.tensordot(lam, d, axes=1)
    v = np.zeros(p.shape[1])
    pi = np.zeros_like(c)
    for h in reversed(range(p.shape[0])):
      qv = reward[h] + p[h] @ v
      pi[h, np.arange(p.shape[1]), qv.argmin(-1)] = 1
      v = qv.min(-1)
    q = ref.occupancy_loop(p, pi, 0)
    lam = np.maximum(lam + 0.5 * (np.einsum("ihsa,hsa->i", d, q) - alpha), 0)
    np.testing.assert_allclose(log.multipliers[n], lam, rtol=1e-12, atol=1e-14)
    assert float(log.cost_value[n]) == pytest.approx(np.sum(c * q), rel=1e-12)
