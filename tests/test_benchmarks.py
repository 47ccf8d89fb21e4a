"""Benchmark CMDPs: validity, strictly feasible baselines, binding constraints, known optima."""

import functools

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax import benchmarks

matplotlib.use("Agg")

NAMES = ["media_streaming", "factored", "gridworld", "random"]


@functools.lru_cache(maxsize=None)
def _benchmark(name):
  return benchmarks.make_benchmark(name)


def _with_threshold(cmdp, threshold):
  return cmdp._replace(thresholds=jnp.full_like(cmdp.thresholds, threshold))


def _unconstrained(cmdp):
  return oj.solve_lp(_with_threshold(cmdp, cmdp.horizon))


@pytest.mark.parametrize("name", NAMES)
def test_valid_and_rows_sum_to_one(name):
  b = _benchmark(name)
  oj.validate_cmdp(b.cmdp)
  assert b.cmdp.num_constraints == 1
  assert b.cmdp.transitions.dtype == jnp.float64  # conftest enables x64
  np.testing.assert_allclose(np.asarray(b.cmdp.transitions).sum(-1), 1.0, rtol=0, atol=1e-12)
  assert b.safe_policy.shape == (b.cmdp.horizon, b.cmdp.num_states, b.cmdp.num_actions)


@pytest.mark.parametrize("name", NAMES)
def test_safe_policy_strictly_feasible(name):
  b = _benchmark(name)
  slack = oj.check_safe_policy(b.cmdp, b.safe_policy)
  assert slack > 0
  assert slack == pytest.approx(b.slack, abs=1e-12)
  _, values = oj.policy_values(b.cmdp, b.safe_policy)
  assert float(b.cmdp.thresholds[0] - values[0]) == pytest.approx(b.slack, abs=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_constraint_binds(name):
  b = _benchmark(name)
  lp = oj.solve_lp(b.cmdp)
  free = _unconstrained(b.cmdp)
  assert lp.multipliers[0] > 1e-6
  assert lp.constraint_values[0] == pytest.approx(float(b.cmdp.thresholds[0]), abs=1e-7)
  assert free.constraint_values[0] > float(b.cmdp.thresholds[0]) + 1e-6
  # Costs are minimised: the constraint makes the optimum strictly worse (larger).
  assert lp.value > free.value + 1e-6
  # The baseline is feasible, so it is no better than the constrained optimum.
  value, _ = oj.policy_values(b.cmdp, b.safe_policy)
  assert float(value) >= lp.value - 1e-9


@pytest.mark.parametrize("horizon", [4, 5, 6, 7, 9])
def test_factored_unconstrained_optimum_by_hand(horizon):
  b = benchmarks.factored(horizon=horizon)
  free = _unconstrained(b.cmdp)
  assert free.value == pytest.approx(benchmarks.factored_unconstrained_value(horizon), abs=1e-9)
  assert free.constraint_values[0] == pytest.approx(horizon, abs=1e-9)  # always moves
  steps = np.arange(horizon)  # always moving, the agent is in state h mod 3 at step h
  np.testing.assert_allclose(free.policy[steps, steps % 3, 1], 1.0, atol=1e-9)


def test_factored_constrained_optimum_by_hand():
  b = _benchmark("factored")  # H = 6, alpha = 3
  assert benchmarks.factored_unconstrained_value(6) == 2.0
  assert float(b.cmdp.thresholds[0]) == 3.0
  lp = oj.solve_lp(b.cmdp)
  assert lp.value == pytest.approx(4.0, abs=1e-9)  # H - 2 alpha / 3
  assert lp.multipliers[0] == pytest.approx(2.0 / 3.0, abs=1e-9)
  assert b.slack == pytest.approx(2.4, abs=1e-9)  # 4 alpha / 5
  value, _ = oj.policy_values(b.cmdp, b.safe_policy)
  assert float(value) == pytest.approx(5.6, abs=1e-9)  # H - 2 alpha / 15


def test_media_streaming_fast_service_whenever_it_matters():
  b = _benchmark("media_streaming")
  m = b.cmdp
  p, c = np.asarray(m.transitions), np.asarray(m.cost)
  horizon, num_states, _ = c.shape
  q_values = np.zeros((horizon, num_states, 2))
  v = np.zeros(num_states)
  for h in reversed(range(horizon)):
    q_values[h] = c[h] + p[h] @ v
    v = q_values[h].min(-1)
  gap = q_values[..., 1] - q_values[..., 0]
  assert gap.min() > -1e-12  # the fast service is never worse
  assert np.all(np.abs(gap[-1]) < 1e-12)  # the last action never matters
  matters = gap > 1e-9
  assert matters[:-1, 0].all()  # an empty buffer always wants the fast service
  free = _unconstrained(m)
  assert free.value == pytest.approx(v[0], abs=1e-9)
  reached = free.occupancy.sum(-1) > 1e-9
  np.testing.assert_allclose(free.policy[matters & reached][:, 0], 1.0, atol=1e-6)
  # The least fast service that is still optimal (fast only where it matters) already
  # exceeds the budget H / 2.
  lazy = np.where(matters[..., None], [1.0, 0.0], [0.0, 1.0])
  value, constraint = oj.policy_values(m, jnp.asarray(lazy))
  assert float(value) == pytest.approx(free.value, abs=1e-9)
  assert float(constraint[0]) > horizon / 2
  assert float(m.thresholds[0]) == horizon / 2


@pytest.mark.parametrize("size", [2, 3, 4, 5])
def test_gridworld_without_slip_and_hazards_is_manhattan(size):
  b = benchmarks.gridworld(size, slip=0.0, hazards=())
  assert b.cmdp.horizon == 3 * size
  free = _unconstrained(b.cmdp)
  assert free.value == pytest.approx(2 * (size - 1), abs=1e-9)


@pytest.mark.parametrize("size,detour", [(4, None), (5, 10), (6, 12)])
def test_gridworld_default_hazards_force_a_detour(size, detour):
  b = benchmarks.gridworld(size, slip=0.0)
  assert float(b.cmdp.thresholds[0]) == pytest.approx(0.5, abs=1e-7)  # half of one crossing
  free = _unconstrained(b.cmdp)
  assert free.value == pytest.approx(2 * (size - 1), abs=1e-9)
  hazard_free = oj.solve_lp(_with_threshold(b.cmdp, 0.0))
  # size >= 5: a safe line 2 steps longer; size 4: the goal is cut off (value H).
  expected = b.cmdp.horizon if detour is None else detour
  assert hazard_free.value == pytest.approx(expected, abs=1e-9)


def test_gridworld_arguments():
  with pytest.raises(ValueError, match="hazards"):
    benchmarks.gridworld(4, hazards=[(3, 3)])
  with pytest.raises(ValueError, match="hazards"):
    benchmarks.gridworld(4, hazards=[(4, 0)])
  with pytest.raises(ValueError, match="slip"):
    benchmarks.gridworld(4, slip=1.5)
  with pytest.raises(ValueError, match="safe_policy"):  # no policy visits no hazard at all
    benchmarks.gridworld(5, budget=0.0)


def test_plot_gridworld_returns_axes():
  import matplotlib.pyplot as plt
  b = _benchmark("gridworld")
  lp = oj.solve_lp(b.cmdp)
  ax = benchmarks.plot_gridworld(b, policy=lp.policy, occupancy=lp.occupancy)
  assert isinstance(ax, matplotlib.axes.Axes)
  _, given = plt.subplots()
  assert benchmarks.plot_gridworld(b, ax=given, step=3) is given
  plt.close("all")


def test_dtype_argument():
  b = benchmarks.media_streaming(dtype=jnp.float32)
  assert b.cmdp.transitions.dtype == jnp.float32
  assert b.safe_policy.dtype == jnp.float32
  assert b.slack > 0


@pytest.mark.parametrize("name", NAMES)
def test_make_benchmark(name):
  b = benchmarks.make_benchmark(name)
  assert isinstance(b, benchmarks.Benchmark)
  assert oj.make_benchmark is benchmarks.make_benchmark
  fn = benchmarks.BENCHMARKS[name]
  assert fn is getattr(oj, fn.__name__)


def test_random_family_is_a_random_cmdp_member():
  b = benchmarks.random_family(seed=3, num_states=5, num_actions=3, horizon=4,
                               num_constraints=2)
  ref = oj.random_cmdp(jax.random.PRNGKey(3), num_states=5, num_actions=3, horizon=4,
                       num_constraints=2)
  for got, want in zip(b.cmdp, ref):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  policy, slack = oj.safe_policy(ref)
  np.testing.assert_array_equal(np.asarray(b.safe_policy), np.asarray(policy))
  assert b.slack == pytest.approx(float(slack), abs=1e-12) and b.slack > 0


def test_make_benchmark_kwargs_and_unknown_name():
  assert benchmarks.make_benchmark("factored", horizon=9).cmdp.horizon == 9
  with pytest.raises(ValueError, match="unknown benchmark"):
    benchmarks.make_benchmark("race_track")
