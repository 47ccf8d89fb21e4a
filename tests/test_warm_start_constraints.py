"""The warm-started exact inner solve with several constraints (I >= 2, the cutting planes):
warm solves against Clarabel and cold solves whatever the hint, the optimum's own hint
proving the solve in one DP, vmapped batches (a loop whose finished members keep their
state) against each unbatched solve, and OptAug's warm start across episodes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref
from test_warm_start import _assert_exact, _cold  # the I = 1 file's cold solve and check

import optaug_jax as oj

S, A, H = 5, 3, 4
WARM = oj.inner.exact(warm_cuts=True)  # the I >= 2 warm start is asked for (off by default)


def _solve(problem, lam, eta, warm):
  return oj.solve_inner(problem, lam, eta, gradient=None, warm=warm, solver=WARM)


def _problem(seed, num_constraints, radius=0.2):
  m = oj.random_cmdp(
    jax.random.PRNGKey(seed),
    num_states=S,
    num_actions=A,
    horizon=H,
    num_constraints=num_constraints,
  )
  rng = np.random.default_rng(seed)
  lower, upper = ref.random_box(rng, np.asarray(m.transitions), radius)
  return oj.inner.InnerProblem(
    cost=m.cost,
    constraint_costs=m.constraint_costs,
    thresholds=m.thresholds * 0.9,
    transitions=oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)),
    initial_state=m.initial_state,
  ), rng


def _random_hint(rng, num_constraints):
  num = oj.inner.WarmStart.cold(H, S, num_constraints=num_constraints).actions.shape[0]
  return oj.inner.WarmStart(
    actions=jnp.asarray(rng.integers(0, A, size=(num, H, S)), jnp.int32),
    values=jnp.asarray(rng.normal(size=(num, H, S))),
    valid=jnp.asarray(True),
  )


@pytest.mark.parametrize("num_constraints", [2, 3])
@pytest.mark.parametrize("seed", range(3))
def test_warm_solves_are_exact_whatever_the_hint(seed, num_constraints):
  """A random hint, a cold one, and the hint a solve leaves to the next episode's problem
  (costs moved by 1%, prox centre at the last `mu*`): Clarabel's optimum and the cold
  solve's; the hint holds `I + 1` vertices."""
  problem, rng = _problem(seed, num_constraints)
  lam = jnp.asarray(rng.uniform(0.0, 2.0, num_constraints))
  eta = float(10 ** rng.uniform(-1, 2))
  cold = _cold(problem, lam, eta)
  _assert_exact(problem, lam, eta, cold)
  blank = oj.inner.WarmStart.cold(H, S, jnp.float64, num_constraints=num_constraints)
  for hint in (_random_hint(rng, num_constraints), blank):
    warm = _solve(problem, lam, eta, hint)
    _assert_exact(problem, lam, eta, warm)
    assert bool(warm.warm.valid) and warm.warm.actions.shape == (num_constraints + 1, H, S)
  mu = oj.dual_step(cold.occupancy, problem.constraint_costs, problem.thresholds, lam, eta)
  noise = jnp.asarray(rng.normal(size=problem.cost.shape))
  moved = problem._replace(cost=jnp.clip(problem.cost * (1 + 0.01 * noise), 0.0, 1.0))
  warm2 = _solve(moved, mu, eta, _solve(problem, lam, eta, blank).warm)
  _assert_exact(moved, mu, eta, warm2)


def test_the_optimums_own_hint_proves_it_in_one_dp_mostly():
  """Solved again (same problem, same prox centre) from the hint it left, a solve needs one
  DP where its master is exact enough: the master of the optimal mix's vertices peaks at
  `mu*` (the mix's constraint values are `alpha + (mu* - lambda) / eta`), where the DP
  meets the model. The interior-point master stops within ~1e-9 of `mu*`, where a vertex
  tied at `mu*` but not in the hint can be below the model by more than the float64 stop
  (1e-12): then the loop goes on, from the hint's cuts. Measured on these six problems:
  one DP on one, 3-12 on the others (cold: 12-18); always fewer than the first solve. Each
  proven solve pays one more DP, at the primal point's multiplier (the greedy actions at
  unreached states)."""
  ones = 0
  for seed in range(6):
    problem, rng = _problem(seed, 2)
    lam, eta = jnp.asarray(rng.uniform(0.0, 1.0, 2)), 10.0
    blank = oj.inner.WarmStart.cold(H, S, jnp.float64, num_constraints=2)
    first = _solve(problem, lam, eta, blank)
    again = _solve(problem, lam, eta, first.warm)
    assert int(again.dp_calls) < int(first.dp_calls), seed
    assert float(again.objective) == pytest.approx(float(first.objective), rel=1e-10, abs=1e-12)
    assert bool(again.certified)
    ones += int(again.dp_calls) == 2  # the proof, and the DP at the primal point's mu
  assert ones >= 1


def test_warm_solves_batched_as_unbatched():
  """A vmapped batch mixing no hint, the optimum's hint and a random one (members that stop
  apart: the loop runs while some member cuts and a finished one keeps its state) against
  each unbatched solve, to rounding (the point on a face of optima to 1e-7): the cutting
  planes' DP counts are not batch-invariant
  (the vmapped master rounds its sums otherwise, and a stop at 1e-12 flips; the same for
  cold solves at the parent commit, 19 of 24 batched members); a hint of I = 1's shape is
  refused."""
  problem, rng = _problem(7, 2)
  eta = 5.0
  lams = jnp.asarray([[0.4, 0.2], [0.4, 0.2], [1.3, 0.0]])
  blank = oj.inner.WarmStart.cold(H, S, jnp.float64, num_constraints=2)
  good = _solve(problem, lams[1], eta, blank).warm
  hints = jax.tree.map(lambda *x: jnp.stack(x), blank, good, _random_hint(rng, 2))
  batched = jax.jit(
    jax.vmap(lambda lam_, w: oj.solve_inner(problem, lam_, eta, gradient=None, warm=w, solver=WARM))
  )(lams, hints)
  assert len(set(np.asarray(batched.dp_calls).tolist())) > 1  # members stop apart
  for i in range(3):
    one = _solve(problem, lams[i], eta, jax.tree.map(lambda x: x[i], hints))
    # The objective to rounding; the point on the optimal face to the recovery's accuracy.
    for field, tol in (("objective", 1e-10), ("occupancy", 1e-7), ("policy", 1e-6)):
      np.testing.assert_allclose(
        getattr(batched, field)[i], getattr(one, field), rtol=tol, atol=tol, err_msg=f"{field} {i}"
      )
    assert bool(batched.certified[i]) and bool(one.certified)
  with pytest.raises(ValueError, match=r"warm: expected a WarmStart .*\(3, 4, 5\)"):
    oj.solve_inner(problem, lams[0], eta, warm=oj.inner.WarmStart.cold(H, S))


def test_optaug_warm_start_with_two_constraints_keeps_the_cold_multipliers():
  """Along a warm-started OptAug run on a CMDP with two constraints, each plan's
  multipliers are those of a cold plan from the same state, every solve certified; the
  warm plans pay fewer DPs in all."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(2), num_states=S, num_actions=A, horizon=H, num_constraints=2
  )
  pi, slack = oj.safest_policy(m)
  make = lambda warm_start: oj.optaug(
    num_episodes=60,
    safe_policy=pi,
    pretrain_episodes=10,
    slack=slack,
    eta=20.0,
    bonus_scale=0.1,
    warm_start=warm_start,
    inner=WARM,
  )
  warm_agent, cold_agent = make(True), make(False)
  key = jax.random.PRNGKey(0)
  state, _ = oj.run(warm_agent, key, m, num_episodes=10)  # pre-training
  assert state.warm.actions.shape == (3, H, S) and not bool(state.warm.valid)
  chunk = jax.jit(lambda s: oj.run(warm_agent, key, m, num_episodes=5, state=s))
  plan_warm, plan_cold = jax.jit(warm_agent.plan), jax.jit(cold_agent.plan)
  dps = {"warm": [], "cold": []}
  for _ in range(8):
    state, log = chunk(state)
    assert bool(state.warm.valid) and bool(jnp.all(log.certified))
    _, after_warm, info_warm = plan_warm(state)
    _, after_cold, info_cold = plan_cold(state.agent)
    np.testing.assert_allclose(after_warm.multipliers, after_cold.multipliers, atol=1e-6)
    assert bool(info_warm.certified) and bool(info_cold.certified)
    dps["warm"].append(int(info_warm.extras["dp_calls"]))
    dps["cold"].append(int(info_cold.extras["dp_calls"]))
  assert np.sum(dps["warm"]) < np.sum(dps["cold"]), dps
