"""The exact inner solver (`oj.inner.exact`) against cvxpy/Clarabel, its certificate, its
primal outputs, batching, degenerate inputs and argument checks."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj

LAMBDAS = {1: [0.3], 2: [0.3, 0.0], 3: [0.3, 0.0, 1.0]}


def _instance(num_constraints, seed=3, s=3, a=2, h=3, radius=0.2):
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


def _problem(m, lower, upper):
  return oj.inner.InnerProblem(
    cost=m.cost,
    constraint_costs=m.constraint_costs,
    thresholds=m.thresholds,
    transitions=oj.TransitionSet(lower, upper),
    initial_state=m.initial_state,
  )


def _solve(m, lower, upper, lam, eta, *, num_iters=None, tol=None, **kw):
  """The exact solver; `tol=None` (its whole budget) unless given."""
  return oj.solve_inner(
    _problem(m, lower, upper),
    jnp.asarray(lam),
    eta,
    solver=oj.inner.exact(num_iters=num_iters, tol=tol),
    **kw,
  )


@jax.jit
def _jit_solve(cost, constraint_costs, lower, upper, initial_state, thresholds, lam, eta):
  """One compilation per shape and dtype (eta and the data are arguments)."""
  return oj.solve_inner(
    oj.inner.InnerProblem(
      cost=cost,
      constraint_costs=constraint_costs,
      thresholds=thresholds,
      transitions=oj.TransitionSet(lower, upper),
      initial_state=initial_state,
    ),
    lam,
    eta,
    solver=oj.inner.exact(tol=None),
    gradient="unrolled",
  )


@jax.jit
def _jit_early_solve(problem, lam, eta):
  """The solve that stops at an exact dual (`tol=0`); one compilation per shape."""
  return oj.solve_inner(problem, lam, eta, solver=oj.inner.exact(tol=0.0))


def _check_against_cvxpy(m, lower, upper, lam, eta):
  optimum, _ = ref.inner_cvxpy(
    m.cost, m.constraint_costs, lower, upper, int(m.initial_state), m.thresholds, lam, eta
  )
  sol = _jit_solve(
    m.cost,
    m.constraint_costs,
    lower,
    upper,
    m.initial_state,
    m.thresholds,
    jnp.asarray(lam, m.cost.dtype),
    eta,
  )
  scale = max(1.0, abs(optimum))
  error = float(sol.objective) - optimum
  assert abs(error) <= 1e-7 * scale, (error, float(sol.gap))
  # The certificate bounds the true error (up to Clarabel's own accuracy, ~1e-10) and is
  # itself small: the solve is exact, not just certified.
  assert error <= float(sol.gap) + 1e-9 * scale
  assert float(sol.gap) <= 1e-7 * scale
  return sol, optimum


@pytest.mark.parametrize("num_constraints", [1, 2, pytest.param(3, marks=pytest.mark.slow)])
@pytest.mark.parametrize("eta", [1.0, 1e2, 1e4, 1e6])
def test_dual_solve_matches_cvxpy(num_constraints, eta):
  m, lower, upper = _instance(num_constraints)
  sol, _ = _check_against_cvxpy(m, lower, upper, LAMBDAS[num_constraints], eta)
  # DP calls do not grow with eta: the whole budget with tol=None and the DPs at the prox
  # centre and at the primal point's multiplier, whose actions are the policy where q = 0
  # (`unreached="greedy"`); I >= 2: and the DP at the final master's maximiser ...
  assert int(sol.dp_calls) == (60 if num_constraints == 1 else 83)
  # ... and far fewer when the search stops at an exact dual (tol=0), just as exact.
  early = _jit_early_solve(_problem(m, lower, upper), jnp.asarray(LAMBDAS[num_constraints]), eta)
  assert int(early.dp_calls) <= (17 if num_constraints == 1 else 41), int(early.dp_calls)
  scale = max(1.0, abs(float(sol.objective)))
  assert abs(float(early.objective) - float(sol.objective)) <= 1e-9 * scale
  assert float(early.gap) <= 1e-7 * scale


def test_multiplier_zero_and_above_lambda_cases():
  """mu* = 0 (loose thresholds: no constraint binds) and mu* > lambda (tight ones)."""
  m, lower, upper = _instance(1)
  loose = m._replace(thresholds=jnp.full((1,), float(m.horizon)))
  sol, _ = _check_against_cvxpy(loose, lower, upper, [0.0], 10.0)
  assert (
    float(
      oj.dual_step(sol.occupancy, loose.constraint_costs, loose.thresholds, jnp.zeros(1), 10.0)[0]
    )
    == 0.0
  )
  tight = m._replace(thresholds=0.5 * m.thresholds)
  sol, _ = _check_against_cvxpy(tight, lower, upper, [0.1], 10.0)
  assert (
    float(
      oj.dual_step(
        sol.occupancy, tight.constraint_costs, tight.thresholds, jnp.asarray([0.1]), 10.0
      )[0]
    )
    > 0.1
  )


@pytest.mark.slow
@pytest.mark.parametrize("num_constraints", [1, 2])
def test_realistic_inner_problem_from_a_run(num_constraints):
  """The optimistic model of an OptAug run (media_streaming, I=1; a random CMDP, I=2)."""
  if num_constraints == 1:
    b = oj.benchmarks.make_benchmark("media_streaming")
    m, pi = b.cmdp, b.safe_policy
  else:
    m = oj.random_cmdp(
      jax.random.PRNGKey(5), num_states=4, num_actions=3, horizon=5, num_constraints=2
    )
    pi, _ = oj.safest_policy(m)
  slack = oj.check_safe_policy(m, pi)  # the true slack (run refuses a larger one)
  agent = oj.optaug(
    num_episodes=300, safe_policy=pi, pretrain_episodes=20, slack=slack, eta=100.0, bonus_scale=0.1
  )
  state, log = oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=60)
  model = oj.optimistic_model(state.counts, num_episodes=300, delta=0.1, bonus_scale=0.1)
  lam = np.asarray(state.multipliers) + 0.5
  problem = m._replace(cost=model.cost, constraint_costs=model.constraint_costs)
  for eta in [1e2, 1e4]:
    _check_against_cvxpy(problem, model.lower, model.upper, lam, eta)


def _clipped_instance(seed, num_constraints, radius, s=3, a=2, h=3):
  """A random CMDP, the box `p +- radius` (clipped) and random multipliers in [0, 2)."""
  key = jax.random.PRNGKey(seed)
  m = oj.random_cmdp(key, num_states=s, num_actions=a, horizon=h, num_constraints=num_constraints)
  lower = jnp.clip(m.transitions - radius, 0.0, 1.0)
  upper = jnp.clip(m.transitions + radius, 0.0, 1.0)
  lam = jax.random.uniform(jax.random.fold_in(key, 2), (num_constraints,)) * 2.0
  return m, lower, upper, np.asarray(lam)


# Instances on which the I >= 2 primal recovery once stopped short (relative errors 2.5e-3,
# 1.2e-3, 3.5e-7, 3.3e-5 before the exact simplex least squares); the dual optimum was exact.
@pytest.mark.parametrize(
  "seed,num_constraints,eta,radius",
  [
    (1960127676, 2, 78.0953046065382, 0.4675362118938841),  # dust weights froze the polish
    (666239354, 2, 254912.80014810263, 0.17889759835453511),  # mu_i ~ 1e-31 read as > 0
    (1805205898, 2, 184.0111425926151, 0.2382942108528852),  # a near-twin vertex off the face
    pytest.param(
      1636805963, 3, 2852.1243317864896, 0.24225731655493665, marks=pytest.mark.slow
    ),  # ill-conditioned face (11 s: slow suite)
  ],
)
def test_instances_that_once_stopped_short(seed, num_constraints, eta, radius):
  m, lower, upper, lam = _clipped_instance(seed, num_constraints, radius)
  _check_against_cvxpy(m, lower, upper, lam, eta)


@pytest.mark.slow
@pytest.mark.parametrize("num_constraints", [2, 3])
def test_random_instances_match_cvxpy(num_constraints):
  """A sweep: random sizes, boxes and multipliers, eta log-uniform in [1e-3, 1e6]."""
  rng = np.random.default_rng(num_constraints)
  for n in range(30):
    s, a, h = (3, 2, 3) if n % 2 else (5, 3, 4)  # two shapes: two compilations
    m, lower, upper, lam = _clipped_instance(
      int(rng.integers(2**31)), num_constraints, rng.uniform(0.0, 0.5), s, a, h
    )
    _check_against_cvxpy(m, lower, upper, lam, 10.0 ** rng.uniform(-3, 6))


@pytest.mark.slow
@pytest.mark.parametrize("num_constraints", [2, 3])
def test_float32_several_constraints_are_accurate(num_constraints):
  """float32, I >= 2: the returned q is within 1e-5 of the float64 optimum for eta <= 1e4
  (measured: max 3.8e-6 over 200 I = 2 and 4.5e-6 over 150 I = 3 instances, eta up to 1e6)."""
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  rng = np.random.default_rng(10 + num_constraints)
  for _ in range(10):
    # Exactly representable data: float32 and float64 then pose the same problem.
    m, lower, upper, lam = jax.tree.map(
      lambda x: jnp.asarray(f32(x), jnp.float64),
      _clipped_instance(int(rng.integers(2**31)), num_constraints, rng.uniform(0.0, 0.5)),
    )
    lower = jnp.minimum(lower, m.transitions)
    upper = jnp.maximum(upper, m.transitions)
    eta = float(np.float32(10.0 ** rng.uniform(-2, 4)))
    optimum, _ = ref.inner_cvxpy(
      m.cost, m.constraint_costs, lower, upper, 0, m.thresholds, lam, eta
    )
    sol = _jit_solve(
      f32(m.cost),
      f32(m.constraint_costs),
      f32(lower),
      f32(upper),
      0,
      f32(m.thresholds),
      f32(lam),
      jnp.float32(eta),
    )
    assert sol.objective.dtype == jnp.float32
    value = float(
      oj.augmented_lagrangian(
        jnp.asarray(sol.occupancy, jnp.float64), m.cost, m.constraint_costs, m.thresholds, lam, eta
      )
    )
    assert abs(value - optimum) <= 1e-5 * max(1.0, abs(optimum)), (eta, value - optimum)


@pytest.mark.parametrize("num_constraints", [1, 2, pytest.param(5, marks=pytest.mark.slow)])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_max_dp_calls_is_what_a_whole_budget_pays(dtype, num_constraints):
  """`oj.inner.max_dp_calls` (the inner-solvers guide's "at most" per solve and per episode) is
  what a solve that runs its whole budget (`tol=None`) reports, with the DP `solve_inner`
  adds at the solution; a solve that stops on its proof pays no more."""
  m, lower, upper = _instance(num_constraints, s=4, a=2, h=3)
  problem = jax.tree.map(lambda x: jnp.asarray(x, dtype), _problem(m, lower, upper))
  problem = problem._replace(initial_state=0)
  lam = jnp.zeros((num_constraints,), dtype)

  def dps(solver):
    solve = lambda p: oj.solve_inner(p, lam, jnp.asarray(100.0, dtype), solver=solver)
    return int(jax.jit(solve)(problem).dp_calls)

  most = oj.inner.max_dp_calls(dtype, num_constraints)
  assert (
    most
    == {(32, 1): 33, (32, 2): 54, (64, 1): 61, (64, 2): 84}[
      (jnp.finfo(dtype).bits, min(num_constraints, 2))
    ]
  )
  assert dps(oj.inner.exact(tol=None)) == most
  assert dps(oj.inner.exact()) <= most
  assert dps(oj.inner.exact(num_iters=7, tol=None)) == oj.inner.max_dp_calls(
    dtype, num_constraints, num_iters=7
  )


def test_float32_five_constraints_stop_when_certified():
  """float32, I = 5, `tol=0.0`: the loop stops on its proof (it ran its whole budget, 54 DPs
  on every solve, while float64 took 26; `experiments/inner_exactness.py --table larger
  --constraints 5`), every solve certified and within its certificate of cvxpy's optimum."""
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  rng = np.random.default_rng(55)
  solve = jax.jit(
    lambda c, d, lo, up, al, lam, eta: oj.solve_inner(
      oj.inner.InnerProblem(c, d, al, oj.TransitionSet(lo, up), 0), lam, eta
    )
  )
  budget = oj.inner.max_dp_calls(jnp.float32, 5)  # 50 planes and the 4 other DPs: 54
  for _ in range(4):
    c, d, lower, upper, _, alpha, lam = ref.random_inner_instance(
      rng, 5, radius=0.2, lam_scale=1.0, horizon=3, num_states=4, num_actions=2
    )
    # Exactly representable data: float32 and float64 then pose the same problem.
    c, d, lower, upper, alpha, lam = (
      np.asarray(f32(x), np.float64) for x in (c, d, lower, upper, alpha, lam)
    )
    eta = 100.0
    optimum, _ = ref.inner_cvxpy(c, d, lower, upper, 0, alpha, lam, eta)
    sol = solve(*(f32(x) for x in (c, d, lower, upper, alpha, lam)), jnp.float32(eta))
    assert bool(sol.certified)
    assert int(sol.dp_calls) < budget - 10, int(sol.dp_calls)
    value = float(
      oj.augmented_lagrangian(jnp.asarray(sol.occupancy, jnp.float64), c, d, alpha, lam, eta)
    )
    assert abs(value - optimum) <= 1e-4 * (1.0 + abs(optimum)), value - optimum


@pytest.mark.parametrize("num_constraints", [1, pytest.param(2, marks=pytest.mark.slow)])  # 21 s
def test_policy_and_transitions_reproduce_the_occupancy(num_constraints):
  m, lower, upper = _instance(num_constraints)
  sol = _solve(m, lower, upper, LAMBDAS[num_constraints], 10.0)
  p = np.asarray(sol.transitions)
  assert np.all(p >= np.asarray(lower) - 1e-12) and np.all(p <= np.asarray(upper) + 1e-12)
  np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-12)
  q = ref.occupancy_loop(p, np.asarray(sol.policy), 0)
  np.testing.assert_allclose(q, sol.occupancy, atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("num_constraints", [1, 2])
def test_jit_and_vmap_parity(num_constraints):
  problems = [_instance(num_constraints, seed) for seed in range(3)]
  stack = lambda f: jnp.stack([f(p) for p in problems])
  cost, d = stack(lambda p: p[0].cost), stack(lambda p: p[0].constraint_costs)
  alpha = stack(lambda p: p[0].thresholds)
  lower, upper = stack(lambda p: p[1]), stack(lambda p: p[2])
  lam = jnp.asarray([LAMBDAS[num_constraints]] * 3)
  eta = jnp.asarray([1.0, 1e2, 1e4])

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
      solver=oj.inner.exact(tol=None),
      gradient="unrolled",
    )

  batched = jax.jit(jax.vmap(solve))(cost, d, lower, upper, alpha, lam, eta)
  for j in range(3):
    single = jax.jit(solve)(cost[j], d[j], lower[j], upper[j], alpha[j], lam[j], eta[j])
    eager = solve(cost[j], d[j], lower[j], upper[j], alpha[j], lam[j], eta[j])
    for other in (jax.tree.map(lambda x: x[j], batched), eager):
      # The optimal q need not be unique (a face of Z); the value and the next multiplier
      # (the dual optimum, unique: psi is strongly concave) are.
      np.testing.assert_allclose(other.objective, single.objective, rtol=1e-10, atol=1e-10)
      step = lambda s: oj.dual_step(s.occupancy, d[j], alpha[j], lam[j], eta[j])
      np.testing.assert_allclose(step(other), step(single), rtol=1e-7, atol=1e-9)
      assert int(other.dp_calls) == int(single.dp_calls)


@pytest.mark.slow
@pytest.mark.parametrize("num_constraints", [1, 2])
def test_degenerate_inputs_give_no_nan(num_constraints):
  m, lower, upper = _instance(num_constraints)
  lam = LAMBDAS[num_constraints]
  cases = {
    "point box": (m, m.transitions, m.transitions, 10.0),
    "zero constraint costs": (
      m._replace(constraint_costs=jnp.zeros_like(m.constraint_costs)),
      lower,
      upper,
      10.0,
    ),
    "tiny eta": (m, lower, upper, 1e-6),
  }
  for name, (mm, lo, up, eta) in cases.items():
    sol = _solve(mm, lo, up, lam, eta)
    for leaf in jax.tree.leaves(sol):
      assert np.all(np.isfinite(np.asarray(leaf))), name
    np.testing.assert_allclose(np.asarray(sol.occupancy).sum((1, 2)), 1.0, atol=1e-9)
  # The point box is a known model: the solve equals cvxpy there too.
  _check_against_cvxpy(m, m.transitions, m.transitions, lam, 10.0)


@pytest.mark.slow
def test_float32_single_constraint_is_accurate():
  """float32, I = 1 (bisection): within 1e-5 of the float64 cvxpy optimum at eta up to 1e4."""
  m, lower, upper = _instance(1)
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  for eta in [1.0, 1e2, 1e4]:
    optimum, _ = ref.inner_cvxpy(
      m.cost, m.constraint_costs, lower, upper, 0, m.thresholds, [0.3], eta
    )
    sol = oj.solve_inner(
      oj.inner.InnerProblem(
        cost=f32(m.cost),
        constraint_costs=f32(m.constraint_costs),
        thresholds=f32(m.thresholds),
        transitions=oj.TransitionSet(f32(lower), f32(upper)),
        initial_state=0,
      ),
      f32([0.3]),
      jnp.float32(eta),
      solver=oj.inner.exact(tol=None),
      gradient="unrolled",
    )
    assert sol.objective.dtype == jnp.float32
    assert abs(float(sol.objective) - optimum) <= 1e-5 * max(1.0, abs(optimum))


def test_bad_arguments_raise_value_errors():
  m, lower, upper = _instance(1)
  with pytest.raises(ValueError, match="solver"):
    oj.solve_inner(_problem(m, lower, upper), jnp.zeros(1), 1.0, solver="simplex")
  for eta in [0.0, -1.0, float("nan")]:
    with pytest.raises(ValueError, match="eta"):
      _solve(m, lower, upper, [0.0], eta)
  with pytest.raises(ValueError, match="inner"):
    oj.optaug(
      num_episodes=10,
      safe_policy=jnp.full((3, 3, 2), 0.5),
      pretrain_episodes=1,
      eta=1.0,
      inner="simplex",
    )
  with pytest.raises(ValueError, match="num_iters"):
    oj.inner.exact(num_iters=-1)
  with pytest.raises(ValueError, match="tol"):
    oj.inner.exact(tol=-1.0)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9])
def test_small_spd_solve_matches_numpy(n):
  """The master's Newton systems: the unrolled Cholesky (n <= 8) and the LAPACK fallback
  (n = 9) against NumPy's solve, eagerly, under jit and under vmap; a matrix with a
  non-positive pivot gives a finite answer (no NaN to freeze the master's iterate)."""
  from optaug_jax._src.inner import master  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(n)
  m = rng.normal(size=(4, n, n))
  a = m @ np.swapaxes(m, 1, 2) + 0.1 * np.eye(n)
  b = rng.normal(size=(4, n))
  want = np.linalg.solve(a, b[..., None])[..., 0]
  np.testing.assert_allclose(
    master.spd_solve(jnp.asarray(a[0]), jnp.asarray(b[0])), want[0], rtol=1e-9, atol=1e-9
  )
  np.testing.assert_allclose(
    jax.jit(jax.vmap(master.spd_solve))(jnp.asarray(a), jnp.asarray(b)), want, rtol=1e-9, atol=1e-9
  )
  if n <= master.UNROLLED_SOLVE_MAX:
    indefinite = np.diag(np.r_[np.ones(n - 1), -1.0])
    assert np.isfinite(
      np.asarray(master.spd_solve(jnp.asarray(indefinite), jnp.asarray(b[0])))
    ).all()


def _two_actions(threshold):
  """One state, one step, two actions: cost (0, 1), constraint cost (1, 0). The inner
  problem is `min_t (1 - t) + ||[lambda + eta (t - alpha)]_+||^2 / (2 eta)` over the weight
  `t` of action 0, solvable by hand."""
  ones = jnp.ones((1, 1, 2, 1))
  return oj.inner.InnerProblem(
    cost=jnp.asarray([[[0.0, 1.0]]]),
    constraint_costs=jnp.asarray([[[[1.0, 0.0]]]]),
    thresholds=jnp.asarray([threshold]),
    transitions=oj.TransitionSet(ones, ones),
    initial_state=0,
  )


@pytest.mark.parametrize(
  "lam, eta, weight, optimum, dps",
  [
    # lambda, the probe (1% of the way to the far end), then: the vertex holds up to the far
    # end lambda + eta g = 0.05, where the supergradient is 0
    (0.0, 0.1, 1.0, 0.0125, 3),
    # the probe (0.05) falls short; the far end (5) has the other vertex: one step, the kink
    (0.0, 10.0, 0.6, 0.45, 4),
    # g < 0 at lambda = 2: the probe (1.98) falls short, the bracket [0, 1.98], mu* = 1
    (2.0, 10.0, 0.4, 0.65, 4),
    # lambda = 0.99 just below mu* = 1: the probe (1.04) passes it and holds the other
    # vertex, the bracket [0.99, 1.04]: one step, at the kink
    (0.99, 10.0, 0.501, 0.549, 3),
    (0.0, 10.0, None, None, 1),  # alpha = 1: the plan at lambda = 0 is feasible, mu* = 0
  ],
)
def test_warm_start_on_a_problem_solved_by_hand(lam, eta, weight, optimum, dps):
  """`f(t) = 1 - t + [lambda + eta (t - alpha)]_+^2 / (2 eta)` over the weight `t` of action
  0 (alpha = 1/2): `t* = 1, f* = 0.05^2 / 0.2`; `t* = 0.6, f* = 0.4 + 5 (0.1)^2`;
  `t* = 0.4, f* = 0.6 + 1 / 20`; `t* = 0.501, f* = 0.499 + 1 / 20`; with alpha = 1, `t* = 1,
  f* = 0`. The DPs the warm-started
  search pays for each exit, and the solution against a grid over `t`."""
  alpha = 0.5 if weight is not None else 1.0
  weight, optimum = (1.0, 0.0) if weight is None else (weight, optimum)
  sol = oj.solve_inner(_two_actions(alpha), jnp.asarray([lam]), eta, gradient=None)
  assert float(sol.occupancy[0, 0, 0]) == pytest.approx(weight, abs=1e-9)
  assert float(sol.objective) == pytest.approx(optimum, abs=1e-12)
  grid = np.linspace(0.0, 1.0, 100_001)
  f = 1.0 - grid + np.maximum(lam + eta * (grid - alpha), 0.0) ** 2 / (2 * eta)
  assert float(sol.objective) == pytest.approx(f.min(), abs=1e-9)
  assert float(sol.gap) <= 1e-12 and bool(sol.certified)
  assert int(sol.dp_calls) == dps


@pytest.mark.slow  # 40-110 s idle (default suite time, 2026-11-25)
def test_warm_start_exits_batched_as_unbatched():
  """A vmapped batch whose members leave the search at different exits (mu* = 0 at once,
  the far end, a model step, out of steps with num_iters=1: the certifying DP) against each
  member's unbatched solve."""
  m, lower, upper = _instance(1)
  thresholds = jnp.asarray(
    [
      [float(m.horizon)],
      [0.5 * float(m.thresholds[0])],
      [float(m.thresholds[0])],
      [0.3 * float(m.thresholds[0])],
    ]
  )
  lams = jnp.asarray([[0.0], [0.3], [0.0], [1.0]])

  def solve(alpha, lam, num_iters):
    problem = _problem(m._replace(thresholds=alpha), lower, upper)
    return oj.solve_inner(
      problem, lam, 10.0, gradient=None, solver=oj.inner.exact(num_iters=num_iters)
    )

  for num_iters in (None, 1):
    batched = jax.jit(jax.vmap(lambda a, lam: solve(a, lam, num_iters)))(thresholds, lams)
    for i in range(len(lams)):
      one = solve(thresholds[i], lams[i], num_iters)
      for field in ("occupancy", "objective", "gap", "dp_calls", "policy"):
        np.testing.assert_allclose(
          getattr(batched, field)[i],
          getattr(one, field),
          rtol=1e-12,
          atol=1e-12,
          err_msg=f"{field} {i} {num_iters}",
        )


@pytest.mark.parametrize("num_constraints", [1, 2])
def test_a_vmapped_search_pays_its_searching_members(num_constraints, monkeypatch):
  """Under `vmap` the search's loop computes its DP for the members still searching alone
  (`kernels.for_active`): the DPs the batch computes (counted per member by a host
  callback in the oracle) are at most twice the DPs its members report, fewer than the
  plain batched loop computes (every member until the slowest stops), with the plain
  loop's numbers bit for bit; each member's solve is its unbatched one."""
  from optaug_jax._src import batching

  computed = []
  lmo = oj.inner.InnerProblem.lmo

  def counted(self, reward):
    jax.debug.callback(lambda first: computed.append(first), reward[0, 0, 0])
    return lmo(self, reward)

  m, lower, upper = _instance(num_constraints, seed=5, s=4, a=3, h=4)
  scales = jnp.linspace(0.7, 1.6, 8)
  lams = jnp.stack([jnp.full((num_constraints,), lam) for lam in np.linspace(0.0, 2.0, 8)])

  def solve(scale, lam):
    problem = _problem(m._replace(thresholds=scale * m.thresholds), lower, upper)
    return oj.solve_inner(problem, lam, 10.0, gradient=None, solver=oj.inner.exact())

  def batch():
    computed.clear()
    jax.clear_caches()  # traces made without the counter, or with the other loop
    out = jax.jit(jax.vmap(solve))(scales, lams)
    jax.effects_barrier()
    return out, len(computed)

  monkeypatch.setattr(oj.inner.InnerProblem, "lmo", counted)
  try:
    gathered, in_batch = batch()
    monkeypatch.setattr(batching, "for_active", lambda active, fn, *ops: fn(*ops))
    plain, in_plain = batch()
  finally:
    monkeypatch.undo()
    jax.clear_caches()
  dps = np.asarray(gathered.dp_calls)
  assert len(set(dps.tolist())) > 1, dps  # the members search for different lengths
  assert in_batch <= 2 * dps.sum() and in_batch < in_plain, (in_batch, dps, in_plain)
  chex.assert_trees_all_equal(gathered, plain)
  for i in range(len(dps)):
    one = jax.jit(solve)(scales[i], lams[i])
    # I >= 2 in float64: the vmapped master rounds otherwise than the unbatched one, and
    # its stop at a relative gap of 1e-12 may come later (seen: 15 DPs alone, 65 in the
    # batch, the same plain or gathered); the solution agrees.
    # The point on a face of optima agrees to the recovery's accuracy then (1e-7).
    assert num_constraints > 1 or int(one.dp_calls) == int(dps[i])
    for field in ("occupancy", "objective", "gap", "policy"):
      tol = 1e-12 if num_constraints == 1 or field in ("objective", "gap") else 1e-7
      np.testing.assert_allclose(
        getattr(gathered, field)[i], getattr(one, field), rtol=tol, atol=tol, err_msg=field
      )


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_the_final_masters_dp_is_paid_only_where_the_point_needs_it(dtype, monkeypatch):
  """A cold I = 2 solve that stops on its proof ends on the final master; the DP at its
  maximiser is paid only where the recovered point is not certified without it. Against
  the same solve that always pays it (the certificate's tolerance patched below zero):
  one DP fewer where it was skipped, and both within their certificates of cvxpy's
  optimum; the skip happens on most instances."""
  from optaug_jax._src.inner import problem as problem_module

  tolerance = problem_module.certified_tolerance(dtype)
  eta = 100.0
  skipped = 0
  for seed in range(6):
    m, lower, upper = _instance(2, seed=seed, s=4, a=2, h=3)
    problem = jax.tree.map(lambda x: jnp.asarray(x, dtype), _problem(m, lower, upper))
    problem = problem._replace(initial_state=0)
    lam = jnp.asarray(LAMBDAS[2], dtype)
    solve = lambda p: oj.solve_inner(p, lam, jnp.asarray(eta, dtype), solver=oj.inner.exact())
    sol = jax.jit(solve)(problem)
    with monkeypatch.context() as patch:
      patch.setattr(problem_module, "certified_tolerance", lambda dtype: -1.0)
      paid = jax.jit(lambda p: solve(p))(problem)  # a new trace, under the patch
    optimum, _ = ref.inner_cvxpy(
      m.cost, m.constraint_costs, lower, upper, int(m.initial_state), m.thresholds, lam, eta
    )
    assert bool(sol.certified), seed
    scale = 1.0 + abs(optimum)
    for s in (sol, paid):
      value = float(
        oj.augmented_lagrangian(
          jnp.asarray(s.occupancy, jnp.float64), m.cost, m.constraint_costs, m.thresholds, lam, eta
        )
      )
      assert abs(value - optimum) <= 2 * tolerance * scale, (seed, value - optimum)
    assert int(sol.num_iters) == int(paid.num_iters), seed
    assert int(sol.dp_calls) in (int(paid.dp_calls) - 1, int(paid.dp_calls)), seed
    skipped += int(sol.dp_calls) == int(paid.dp_calls) - 1
  assert skipped >= 4, skipped


def test_the_single_constraint_search_stops_at_the_float32_tolerance(monkeypatch):
  """float32, I = 1: the search stops where the two-cut model's maximum is within
  `FLOAT32_SEARCH_STOP_RTOL` of the best dual value, not only at Kelley's exact end.
  Against the same solve with that floor patched to 0 (the exact end), on six instances
  (five where the exact end takes more DPs, measured): never more DPs, fewer on most,
  both certified, and both within the certificate's tolerance of cvxpy's optimum (the
  point's objective evaluated in float64)."""
  from optaug_jax._src.inner import dual_function

  dtype = jnp.float32
  tolerance = oj.inner.certified_tolerance(dtype)
  fewer = 0
  for seed, lam, eta in [
    (2, 0.3, 1e2),
    (4, 0.3, 1e2),
    (7, 0.3, 1e2),
    (7, 0.0, 1e4),
    (5, 1.0, 10.0),
    (0, 0.3, 1e2),
  ]:
    lam = jnp.asarray([lam])
    m, lower, upper = _instance(1, seed=seed, s=15, a=3, h=6, radius=0.02)
    problem = jax.tree.map(lambda x: jnp.asarray(x, dtype), _problem(m, lower, upper))
    problem = problem._replace(initial_state=0)
    solve = lambda p, lam=lam, eta=eta: oj.solve_inner(
      p, lam.astype(dtype), jnp.asarray(eta, dtype), solver=oj.inner.exact()
    )
    stopped = jax.jit(solve)(problem)
    with monkeypatch.context() as patch:
      patch.setattr(dual_function, "FLOAT32_SEARCH_STOP_RTOL", 0.0)
      exact_end = jax.jit(lambda p, solve=solve: solve(p))(problem)  # a new trace, patched
    optimum, _ = ref.inner_cvxpy(
      m.cost, m.constraint_costs, lower, upper, int(m.initial_state), m.thresholds, lam, eta
    )
    scale = 1.0 + abs(optimum)
    for sol in (stopped, exact_end):
      assert bool(sol.certified), seed
      value = float(
        oj.augmented_lagrangian(
          jnp.asarray(sol.occupancy, jnp.float64),
          m.cost,
          m.constraint_costs,
          m.thresholds,
          lam,
          eta,
        )
      )
      assert abs(value - optimum) <= 2 * tolerance * scale, (seed, value - optimum)
    assert int(stopped.dp_calls) <= int(exact_end.dp_calls), seed
    fewer += int(stopped.dp_calls) < int(exact_end.dp_calls)
  assert fewer >= 4, fewer
