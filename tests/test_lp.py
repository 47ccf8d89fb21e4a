"""solve_lp against brute force (slack constraint) and cvxpy (binding constraint)."""

import cvxpy as cp
import jax
import numpy as np
import pytest
import references as ref

import optaug_jax as oj
from optaug_jax.lp import flow_constraints


def _tiny(seed, **kw):
  return oj.random_cmdp(jax.random.PRNGKey(seed), num_states=2, num_actions=2, horizon=3, **kw)


@pytest.mark.parametrize("seed", range(3))
def test_slack_constraint_equals_brute_force(seed):
  m = _tiny(seed)
  m = m._replace(thresholds=np.array([3.0]))  # = H: never binding
  lp = oj.solve_lp(m)
  best = min(
    np.sum(np.asarray(m.cost) * ref.occupancy_loop(m.transitions, pi, 0))
    for pi in ref.deterministic_policies(3, 2, 2)
  )
  assert lp.value == pytest.approx(best, abs=1e-9)
  assert lp.multipliers[0] == pytest.approx(0.0, abs=1e-9)
  v, vd = oj.policy_values(m, lp.policy)
  assert float(v) == pytest.approx(lp.value, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_binding_constraint_equals_cvxpy(seed):
  m = oj.random_cmdp(
    jax.random.PRNGKey(seed), num_states=3, num_actions=2, horizon=4, num_constraints=2
  )
  lp = oj.solve_lp(m)
  # Independent formulation: state-occupancy + policy-mixing variables, by cvxpy/Clarabel.
  p = np.asarray(m.transitions)
  h, s, a, _ = p.shape
  q = [cp.Variable((s, a), nonneg=True) for _ in range(h)]
  cons = [cp.sum(q[0], axis=1) == np.eye(s)[0]]
  for t in range(1, h):
    cons += [cp.sum(q[t][j]) == cp.sum(cp.multiply(p[t - 1, :, :, j], q[t - 1])) for j in range(s)]
  d = np.asarray(m.constraint_costs)
  cons += [
    sum(cp.sum(cp.multiply(d[i, t], q[t])) for t in range(h)) <= float(m.thresholds[i])
    for i in range(d.shape[0])
  ]
  obj = sum(cp.sum(cp.multiply(np.asarray(m.cost)[t], q[t])) for t in range(h))
  prob = cp.Problem(cp.Minimize(obj), cons)
  prob.solve(solver=cp.CLARABEL)
  assert lp.value == pytest.approx(prob.value, abs=1e-6)
  np.testing.assert_allclose(lp.multipliers, [c.dual_value for c in cons[-d.shape[0] :]], atol=1e-5)
  assert np.any(lp.multipliers > 1e-4)  # some constraint binds
  v, vd = oj.policy_values(m, lp.policy)
  assert float(v) == pytest.approx(lp.value, abs=1e-9)
  assert np.all(np.asarray(vd) <= np.asarray(m.thresholds) + 1e-8)


def test_flow_constraints_accept_true_occupancies():
  m = _tiny(0)
  pi = np.random.default_rng(0).dirichlet(np.ones(2), size=(3, 2))
  q = ref.occupancy_loop(m.transitions, pi, 0)
  a_eq, b_eq = flow_constraints(oj.TransitionSet.point(np.asarray(m.transitions)), 0)
  np.testing.assert_allclose(a_eq @ q.ravel(), b_eq, atol=1e-12)


def test_infeasible_cmdp_is_reported():
  m = _tiny(0)
  m = m._replace(
    thresholds=np.array([0.0]), constraint_costs=np.ones_like(np.asarray(m.constraint_costs))
  )
  with pytest.raises(ValueError, match="infeasible"):
    oj.solve_lp(m)


def test_jointly_infeasible_thresholds_say_by_how_much():
  """Two constraints, each threshold at its own least value (met by different policies):
  jointly infeasible. `solve_lp` raises a `ValueError` (never HiGHS's bare status) with the
  least excess of the closest policy; raising every threshold by that excess (and a
  tolerance) makes the CMDP feasible, raising them by less does not."""
  import re

  m = oj.random_cmdp(
    jax.random.PRNGKey(2), num_states=6, num_actions=3, horizon=5, num_constraints=2
  )
  least = []
  for i in range(2):
    alone = m._replace(
      cost=m.constraint_costs[i], constraint_costs=m.constraint_costs[:1], thresholds=[5.0]
    )
    least.append(float(oj.solve_lp(alone).value))
  tight = m._replace(thresholds=np.asarray(least))
  with pytest.raises(ValueError, match=r"thresholds: the CMDP is infeasible") as info:
    oj.solve_lp(tight)
  excess = float(re.search(r"by ([0-9.e+-]+) in the worst", str(info.value)).group(1))
  assert excess > 1e-3
  assert oj.lp.least_excess(tight) == pytest.approx(excess, rel=1e-5)
  # Feasible thresholds: the best slack any policy has (a mixture can beat the safest).
  roomy = m._replace(thresholds=np.asarray(least) + excess + 0.5)
  assert oj.lp.least_excess(roomy) == pytest.approx(-0.5, abs=1e-6)
  oj.solve_lp(m._replace(thresholds=np.asarray(least) + excess + 1e-6))  # feasible
  with pytest.raises(ValueError, match="infeasible"):
    oj.solve_lp(m._replace(thresholds=np.asarray(least) + 0.9 * excess))
