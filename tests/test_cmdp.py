"""CMDP container, host-side validation, random instances and safe policies."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj


def _small(key=0, **kw):
  kw = {"num_states": 3, "num_actions": 2, "horizon": 4, "num_constraints": 2, **kw}
  return oj.random_cmdp(jax.random.PRNGKey(key), **kw)


def _np(cmdp):
  return oj.CMDP(*[None if x is None else np.array(x) for x in cmdp])


def test_valid_cmdp_passes_and_is_returned():
  m = _small()
  assert oj.validate_cmdp(m) is m


def test_batched_cmdp_validates():
  batch = jax.vmap(lambda k: oj.random_cmdp(k, num_states=3, num_actions=2, horizon=4))(
    jax.random.split(jax.random.PRNGKey(0), 5)
  )
  oj.validate_cmdp(batch)


def _with(m, **fields):
  return m._replace(**fields)


@pytest.mark.parametrize(
  "mutate, message",
  [
    (lambda m: _with(m, transitions=m.transitions[..., :2]), "transitions: shape"),
    (lambda m: _with(m, transitions=m.transitions[0]), "transitions: expected rank 4"),
    (lambda m: _with(m, cost=m.cost[:, :, :1]), "cost: expected shape"),
    (lambda m: _with(m, constraint_costs=m.constraint_costs[0]), "constraint_costs: expected"),
    (lambda m: _with(m, thresholds=m.thresholds[:1]), "thresholds: expected shape"),
    (lambda m: _with(m, initial_state=np.array([0, 1])), "initial_state: expected shape"),
  ],
)
def test_shape_faults(mutate, message):
  with pytest.raises(ValueError, match=message):
    oj.validate_cmdp(mutate(_np(_small())))


def test_nan_and_inf_are_named():
  for field in ["transitions", "cost", "constraint_costs", "thresholds"]:
    m = _np(_small())
    arr = getattr(m, field).copy()
    arr.flat[0] = np.nan if field != "thresholds" else np.inf
    with pytest.raises(ValueError, match=f"{field}: contains NaN or inf"):
      oj.validate_cmdp(m._replace(**{field: arr}))


def test_negative_transitions():
  m = _np(_small())
  p = m.transitions.copy()
  p[1, 2, 0, :] = [1.2, -0.2, 0.0]
  with pytest.raises(ValueError, match="transitions: probabilities must be non-negative"):
    oj.validate_cmdp(m._replace(transitions=p))


def test_tiny_negative_probability_is_rejected():
  m = _np(_small())
  p = m.transitions.copy()
  p[0, 0, 0, :] = [1.0 + 5e-7, -5e-7, 0.0]  # sums to 1 exactly; one entry negative
  with pytest.raises(ValueError, match="transitions: probabilities must be non-negative"):
    oj.validate_cmdp(m._replace(transitions=p))


def test_no_constraint_and_complex_costs_are_named():
  m = _np(_small())
  with pytest.raises(ValueError, match="constraint_costs: needs at least one constraint"):
    oj.validate_cmdp(
      m._replace(constraint_costs=m.constraint_costs[:0], thresholds=m.thresholds[:0])
    )
  with pytest.raises(ValueError, match="cost: dtype complex128 is not supported"):
    oj.validate_cmdp(m._replace(cost=m.cost.astype(complex)))


def test_rows_not_summing_to_one():
  m = _np(_small())
  p = m.transitions.copy()
  p[2, 1, 1, 0] += 1e-4
  with pytest.raises(ValueError, match=r"transitions: rows must sum to 1.*\(2, 1, 1\)"):
    oj.validate_cmdp(m._replace(transitions=p))
  p[2, 1, 1, 0] -= 1e-4 - 1e-8  # within tolerance
  oj.validate_cmdp(m._replace(transitions=p))


@pytest.mark.parametrize("field, value", [("cost", 1.5), ("cost", -0.1), ("constraint_costs", 2.0)])
def test_costs_outside_unit_interval(field, value):
  m = _np(_small())
  arr = getattr(m, field).copy()
  arr.flat[3] = value
  with pytest.raises(ValueError, match=rf"{field}: costs must lie in \[0, 1\]"):
    oj.validate_cmdp(m._replace(**{field: arr}))


@pytest.mark.parametrize("value", [-0.5, 4.5])
def test_thresholds_outside_zero_h(value):
  m = _np(_small())
  alpha = m.thresholds.copy()
  alpha[1] = value
  with pytest.raises(ValueError, match=r"thresholds: must lie in \[0, H\] = \[0, 4\]"):
    oj.validate_cmdp(m._replace(thresholds=alpha))


@pytest.mark.parametrize("value", [3, -1, 1.5])
def test_initial_state_out_of_range(value):
  m = _np(_small())
  with pytest.raises(ValueError, match="initial_state"):
    oj.validate_cmdp(m._replace(initial_state=np.array(value)))


@pytest.mark.slow
def test_random_cmdp_family_properties():
  """Over many keys: valid, safe policy strictly feasible, some constraint binds for the
  unconstrained optimum, and the LP optimum is strictly better than the safe policy."""
  keys = jax.random.split(jax.random.PRNGKey(7), 12)
  make = jax.jit(
    jax.vmap(lambda k: oj.random_cmdp(k, num_states=4, num_actions=3, horizon=5, num_constraints=2))
  )
  batch = make(keys)
  oj.validate_cmdp(batch)
  for j in range(len(keys)):
    m = jax.tree.map(lambda x: x[j], batch)
    pi_safe, slack = oj.safest_policy(m)
    assert slack > 1e-6
    assert oj.check_safe_policy(m, pi_safe, slack) == pytest.approx(float(slack), abs=1e-9)
    pi_opt = ref_optimal_policy(m)
    _, v_opt = oj.policy_values(m, jnp.asarray(pi_opt))
    assert np.any(np.asarray(v_opt) > np.asarray(m.thresholds) + 1e-6)
    lp = oj.solve_lp(m)
    assert np.all(lp.constraint_values <= np.asarray(m.thresholds) + 1e-7)


def ref_optimal_policy(m):
  """NumPy backward induction for the unconstrained cost."""
  p, c = np.asarray(m.transitions), np.asarray(m.cost)
  horizon, num_states, num_actions, _ = p.shape
  v = np.zeros(num_states)
  pi = np.zeros((horizon, num_states, num_actions))
  for h in reversed(range(horizon)):
    qv = c[h] + p[h] @ v
    pi[h, np.arange(num_states), qv.argmin(-1)] = 1
    v = qv.min(-1)
  return pi


@pytest.mark.slow  # 15-25 s; another default test covers the kernel (default suite under 10 min)
def test_random_cmdp_jit_vmap_parity():
  key = jax.random.PRNGKey(11)
  make = lambda k: oj.random_cmdp(k, num_states=3, num_actions=2, horizon=4)
  eager = make(key)
  jitted = jax.jit(make)(key)
  batched = jax.vmap(make)(jnp.stack([key, key]))
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12), eager, jitted)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b[1], rtol=1e-12), eager, batched)


def test_safe_policy_minimises_summed_constraint_cost():
  """Against brute force over deterministic policies (the minimum is attained by one)."""
  m = _small(key=3, num_states=2, num_actions=2, horizon=3)
  pi, _ = oj.safest_policy(m)
  d_sum = np.asarray(m.constraint_costs).sum(0)
  best = min(
    np.sum(d_sum * ref.occupancy_loop(m.transitions, cand, 0))
    for cand in ref.deterministic_policies(3, 2, 2)
  )
  got = np.sum(d_sum * ref.occupancy_loop(m.transitions, pi, 0))
  assert got == pytest.approx(best, abs=1e-10)


def test_check_safe_policy_rejects_unsafe_baseline():
  m = _small(key=5)
  pi_opt = ref_optimal_policy(m)
  with pytest.raises(ValueError, match="safe_policy: not strictly feasible"):
    oj.check_safe_policy(m, pi_opt)
  pi, slack = oj.safest_policy(m)
  with pytest.raises(ValueError, match="slack: .* exceeds"):
    oj.check_safe_policy(m, pi, float(slack) + 0.1)
  with pytest.raises(ValueError, match="safe_policy: expected shape"):
    oj.check_safe_policy(m, pi[0])
