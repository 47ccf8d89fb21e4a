"""Occupancy, policy values, box minimisation and extended value iteration."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref
import scipy.optimize

import optaug_jax as oj
from optaug_jax._src.layouts import sparse as sparse_layout


def _problem(seed, s=4, a=3, h=4, radius=0.3):
  rng = np.random.default_rng(seed)
  p = rng.dirichlet(np.ones(s), size=(h, s, a))
  lower, upper = ref.random_box(rng, p, radius)
  reward = rng.uniform(-1, 1, size=(h, s, a))
  return reward, lower, upper, p, rng


def test_occupancy_matches_loop_and_is_normalised():
  _, _, _, p, rng = _problem(0)
  pi = rng.dirichlet(np.ones(3), size=(4, 4))
  q = oj.TransitionSet.point(jnp.asarray(p)).occupancy(jnp.asarray(pi), 2)
  np.testing.assert_allclose(q, ref.occupancy_loop(p, pi, 2), rtol=1e-12)
  np.testing.assert_allclose(q.sum((1, 2)), 1.0, rtol=1e-12)


def test_policy_values_are_expected_costs():
  m = oj.random_cmdp(
    jax.random.PRNGKey(1), num_states=3, num_actions=2, horizon=4, num_constraints=2
  )
  pi = np.random.default_rng(1).dirichlet(np.ones(2), size=(4, 3))
  q = ref.occupancy_loop(m.transitions, pi, 0)
  v, vd = oj.policy_values(m, jnp.asarray(pi))
  assert v == pytest.approx(np.sum(np.asarray(m.cost) * q), rel=1e-12)
  np.testing.assert_allclose(vd, np.einsum("ihsa,hsa->i", m.constraint_costs, q), rtol=1e-12)


@pytest.mark.parametrize("method", oj.kernels.FILL_METHODS)
def test_box_minimize_breaks_ties_by_index(method):
  values = jnp.zeros(4)
  lower = jnp.zeros(4)
  upper = jnp.full(4, 0.4)
  _, p = oj.kernels.box_minimize(values, lower, upper, method=method)
  np.testing.assert_allclose(p, [0.4, 0.4, 0.2, 0.0])


@pytest.mark.parametrize("seed", range(6))
def test_extended_value_iteration_matches_extended_lp(seed):
  reward, lower, upper, _, _ = _problem(seed)
  sol = oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)).value_iteration(
    jnp.asarray(reward), 1
  )
  lp = ref.extended_lp_value(reward, lower, upper, 1)
  assert float(sol.value) == pytest.approx(lp, abs=1e-8)
  t = np.asarray(sol.transitions)
  assert np.all(t >= lower - 1e-12) and np.all(t <= upper + 1e-12)
  np.testing.assert_allclose(t.sum(-1), 1.0, atol=1e-12)
  np.testing.assert_allclose(np.asarray(sol.policy).sum(-1), 1.0)
  assert set(np.unique(sol.policy)) <= {0.0, 1.0}
  # The returned (policy, transitions) attain the value.
  q = ref.occupancy_loop(t, sol.policy, 1)
  assert np.sum(q * reward) == pytest.approx(float(sol.value), abs=1e-10)


def test_extended_value_iteration_with_point_box_is_plain_dp():
  reward, _, _, p, _ = _problem(9)
  sol = oj.TransitionSet(jnp.asarray(p), jnp.asarray(p)).value_iteration(jnp.asarray(reward), 0)
  np.testing.assert_allclose(sol.transitions, p, atol=1e-12)
  lp = ref.extended_lp_value(reward, p, p, 0)
  assert float(sol.value) == pytest.approx(lp, abs=1e-8)


def test_zero_values_tie_break_gives_lowest_action():
  h, s, a = 3, 3, 4
  sol = oj.TransitionSet(jnp.zeros((h, s, a, s)), jnp.ones((h, s, a, s))).value_iteration(
    jnp.zeros((h, s, a)), 0
  )
  np.testing.assert_array_equal(np.argmax(sol.policy, -1), 0)
  np.testing.assert_allclose(sol.transitions[..., 0], 1.0)


def test_kernels_jit_and_vmap_parity():
  problems = [_problem(seed) for seed in range(3)]
  reward, lower, upper, p = (jnp.asarray(np.stack([x[i] for x in problems])) for i in range(4))
  pi = jax.nn.softmax(reward, axis=-1)
  checks = [
    (lambda r, lo, up, pp, po: oj.TransitionSet(lo, up).value_iteration(r, 0)),
    (lambda r, lo, up, pp, po: oj.TransitionSet.point(pp).occupancy(po, 0)),
    (lambda r, lo, up, pp, po: oj.kernels.box_minimize(r[0, :, 0], lo[0, 0], up[0, 0])),
    (lambda r, lo, up, pp, po: oj.TransitionSet.point(pp).optimal_policy(r)),
  ]
  for fn in checks:
    batched = jax.jit(jax.vmap(fn))(reward, lower, upper, p, pi)
    for j in range(3):
      single = fn(reward[j], lower[j], upper[j], p[j], pi[j])
      chex.assert_trees_all_close(single, jax.tree.map(lambda x: x[j], batched), rtol=1e-12)
      chex.assert_trees_all_close(
        single, jax.jit(fn)(reward[j], lower[j], upper[j], p[j], pi[j]), rtol=1e-12
      )


def test_float32_extended_value_iteration():
  reward, lower, upper, _, _ = _problem(4)
  sol = oj.TransitionSet(
    jnp.asarray(lower, jnp.float32), jnp.asarray(upper, jnp.float32)
  ).value_iteration(jnp.asarray(reward, jnp.float32), 1)
  assert sol.value.dtype == jnp.float32
  assert float(sol.value) == pytest.approx(ref.extended_lp_value(reward, lower, upper, 1), abs=1e-5)


@pytest.mark.parametrize("method", oj.kernels.FILL_METHODS)
def test_fill_methods_match_lp_per_row(method):
  rng = np.random.default_rng(3)
  for _ in range(10):
    s = 7
    values = rng.normal(size=s)
    values[rng.integers(s)] = values[0]  # a tie
    p = rng.dirichlet(np.ones(s), size=3)
    lower, upper = ref.random_box(rng, p, 0.4)
    val, arg = oj.kernels.box_minimize(
      jnp.asarray(values), jnp.asarray(lower), jnp.asarray(upper), method=method
    )
    for row in range(3):
      res = scipy.optimize.linprog(
        values,
        A_eq=np.ones((1, s)),
        b_eq=[1.0],
        bounds=list(zip(lower[row], upper[row])),
        method="highs",
      )
      assert float(val[row]) == pytest.approx(res.fun, abs=1e-10)
    assert np.all(arg >= lower - 1e-12) and np.all(arg <= upper + 1e-12)
    np.testing.assert_allclose(np.asarray(arg).sum(-1), 1.0, atol=1e-12)


@pytest.mark.parametrize("method", oj.kernels.FILL_METHODS)
def test_fill_methods_agree_in_extended_dp_under_jit_and_vmap(method):
  rng = np.random.default_rng(4)
  p = rng.dirichlet(np.ones(5), size=(3, 4, 5, 2))
  lower, upper = ref.random_box(rng, p, 0.3)
  reward = rng.uniform(-1, 1, size=(3, 4, 5, 2))
  fn = lambda r, lo, up: (
    oj.TransitionSet(lo, up, fill=method).value_iteration(r, 1),
    oj.TransitionSet(lo, up, fill=method).lmo(r, 1),
  )
  want = [
    (
      oj.TransitionSet(lower[j], upper[j]).value_iteration(reward[j], 1),
      oj.TransitionSet(lower[j], upper[j]).lmo(reward[j], 1),
    )
    for j in range(3)
  ]
  got = jax.jit(jax.vmap(fn))(reward, lower, upper)
  for j in range(3):
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[j], got), want[j], atol=1e-12)
    single = jax.jit(fn)(reward[j], lower[j], upper[j])
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[j], got), single, atol=1e-12)
    assert float(want[j][0].value) == pytest.approx(
      ref.extended_lp_value(reward[j], lower[j], upper[j], 1), abs=1e-9
    )


def test_unknown_fill_is_a_value_error():
  reward, lower, upper, _, _ = _problem(0)
  with pytest.raises(ValueError, match="fill"):
    oj.solve_inner(
      oj.inner.InnerProblem(
        cost=jnp.asarray(reward),
        constraint_costs=jnp.zeros((1,) + reward.shape),
        thresholds=jnp.ones(1),
        transitions=oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper), fill="bubble"),
        initial_state=0,
      ),
      jnp.zeros(1),
      1.0,
      solver=oj.inner.frank_wolfe(),
      gradient="unrolled",
    )


def test_box_minimize_rejects_unknown_method():
  with pytest.raises(ValueError, match="method"):
    oj.kernels.box_minimize(jnp.zeros(3), jnp.zeros(3), jnp.ones(3), method="bubble")


@pytest.mark.parametrize("horizon", [3, oj.kernels.tuning_constants()["unroll_horizon"] + 3])
def test_short_and_long_horizons_match_references(horizon):
  """Both code paths of the horizon scans (unrolled up to `UNROLL_HORIZON`, a rolled loop
  above) against the extended LP (scipy) and the NumPy occupancy loop, under jit and vmap."""
  reward, lower, upper, p, rng = _problem(11, s=3, a=2, h=horizon, radius=0.2)
  lmo = oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)).lmo(jnp.asarray(reward), 0)
  assert float(lmo.value) == pytest.approx(ref.extended_lp_value(reward, lower, upper, 0), abs=1e-8)
  assert float(jnp.sum(lmo.occupancy * reward)) == pytest.approx(float(lmo.value), abs=1e-10)
  pi = rng.dirichlet(np.ones(2), size=(horizon, 3))
  np.testing.assert_allclose(
    oj.TransitionSet.point(jnp.asarray(p)).occupancy(jnp.asarray(pi), 1),
    ref.occupancy_loop(p, pi, 1),
    rtol=1e-12,
  )
  batched = jax.jit(
    jax.vmap(
      lambda r, lo, up, s0: oj.TransitionSet(lo, up).lmo(r, s0),
      in_axes=(0, None, None, None),
    )
  )(
    jnp.stack([jnp.asarray(reward), -jnp.asarray(reward)]),
    jnp.asarray(lower),
    jnp.asarray(upper),
    0,
  )
  chex.assert_trees_all_close(jax.tree.map(lambda x: x[0], batched), lmo, rtol=1e-12)


def test_sparse_dp_over_a_stationary_box_rolls_from_the_slot_limit(monkeypatch):
  """`STATIONARY_ROLL_MIN_SLOTS`: a sparse DP over a stationary (`[1, ...]`) box with that
  many slots keeps its backward pass rolled; rolled, unrolled and the dense layout's DP of
  the same box give the same vertex."""
  n = sparse_layout.STATIONARY_ROLL_MIN_SLOTS
  rng = np.random.default_rng(0)
  p = rng.dirichlet(np.ones(n), size=(6, n, 3))
  lower, upper = (jnp.asarray(x) for x in ref.random_box(rng, p, 0.3))
  reward = jnp.asarray(rng.uniform(-1, 1, size=(6, n, 3)))
  lower, upper = lower[:1], upper[:1]  # stationary: one box for every step
  slots = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), lower.shape)

  def lmo():  # a new function each time: jit traces it again
    return jax.jit(lambda r, lo, up: oj.TransitionSet(lo, up, slots).lmo(r, 0))

  rolled_fn = lmo()
  assert "while" in rolled_fn.lower(reward, lower, upper).as_text()
  rolled = rolled_fn(reward, lower, upper)
  monkeypatch.setattr(sparse_layout, "STATIONARY_ROLL_MIN_SLOTS", n + 1)
  unrolled_fn = lmo()
  assert "while" not in unrolled_fn.lower(reward, lower, upper).as_text()
  chex.assert_trees_all_close(rolled, unrolled_fn(reward, lower, upper), atol=1e-12)
  dense = oj.TransitionSet(lower, upper).lmo(reward, 0)
  np.testing.assert_allclose(rolled.value, dense.value, atol=1e-12)
  np.testing.assert_allclose(rolled.occupancy, dense.occupancy, atol=1e-12)
