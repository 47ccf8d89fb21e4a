"""Benchmark CMDPs: validity, strictly feasible baselines, binding constraints, known optima."""

import functools

import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest
import references as ref

import optaug_jax as oj
from optaug_jax import benchmarks

matplotlib.use("Agg")

NAMES = [
  "media_streaming",
  "factored",
  "gridworld",
  "random_family",
  "queue",
  "inventory",
  "lost_sales",
]


@functools.cache
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
  """The recorded slack against the baseline's constraint value by a NumPy loop."""
  b = _benchmark(name)
  dense = oj.to_dense(b.cmdp)  # the NumPy loop reads the dense layout
  q = ref.occupancy_loop(dense.transitions, b.safe_policy, int(b.cmdp.initial_state))
  value = float(np.sum(np.asarray(b.cmdp.constraint_costs)[0] * q))
  assert b.slack == pytest.approx(float(b.cmdp.thresholds[0]) - value, abs=1e-10)
  assert b.slack > 0


@pytest.mark.parametrize("name", ["media_streaming", "factored", "inventory"])
def test_lp_baselines_have_four_fifths_of_the_threshold_as_slack(name):
  """By construction (module docstring) the baseline is LP-optimal for alpha / 5, and that
  smaller constraint binds: slack = 4 alpha / 5 (media_streaming: 4.0, factored: 2.4,
  inventory: 2.8)."""
  b = _benchmark(name)
  expected = {"media_streaming": 4.0, "factored": 2.4, "inventory": 2.8}[name]
  assert b.slack == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
  "name", [n if n != "random_family" else pytest.param(n, marks=pytest.mark.slow) for n in NAMES]
)  # random: 15 s, in the slow suite
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
  ax = oj.plotting.plot_gridworld(b, policy=lp.policy, occupancy=lp.occupancy)
  assert isinstance(ax, matplotlib.axes.Axes)
  _, given = plt.subplots()
  assert oj.plotting.plot_gridworld(b, ax=given, step=3) is given
  plt.close("all")


def test_dtype_argument():
  b = benchmarks.media_streaming(dtype=jnp.float32)
  assert b.cmdp.transitions.dtype == jnp.float32
  assert b.safe_policy.dtype == jnp.float32
  assert b.slack > 0


def test_queue_is_the_documented_birth_death_chain():
  b = benchmarks.queue(capacity=9, arrival=0.5, horizon=6, sparse=False)
  p = np.asarray(b.cmdp.transitions)[0]  # [S, A, S']
  rates = benchmarks.QUEUE_RATES
  for length in range(10):
    for a, mu in enumerate(rates):
      arrive = 0.5 if length < 9 else 0.0
      leave = mu if length > 0 else 0.0
      expected = np.zeros(10)
      expected[min(length + 1, 9)] += arrive * (1 - leave)
      expected[max(length - 1, 0)] += leave * (1 - arrive)
      expected[length] += 1 - arrive * (1 - leave) - leave * (1 - arrive)
      np.testing.assert_allclose(p[length, a], expected, atol=1e-12)
  np.testing.assert_allclose(np.asarray(b.cmdp.cost)[0, :, 0], np.arange(10) / 9)
  assert float(b.cmdp.thresholds[0]) == pytest.approx(0.3 * 6)
  assert b.slack == pytest.approx(0.3 * 6)  # the slow rate uses no energy
  assert int(b.cmdp.initial_state) == 4
  sparse = benchmarks.queue()
  assert sparse.cmdp.is_sparse and sparse.cmdp.transitions.shape == (50, 200, 3, 3)
  with pytest.raises(ValueError, match="budget_fraction"):
    benchmarks.queue(budget_fraction=0.0)


# Kitamura et al.'s, registered with their features (tests/test_linear.py checks them;
# their constraint binds on some instances only).
LINEAR_NAMES = ["kitamura_random", "kitamura_streaming", "kitamura_linear"]


@pytest.mark.slow  # 15-25 s; another default test covers the kernel (default suite under 10 min)
def test_registry_holds_the_documented_benchmarks():
  assert sorted(benchmarks.BENCHMARKS) == sorted(NAMES + LINEAR_NAMES)
  for name in NAMES + LINEAR_NAMES:
    b = benchmarks.make_benchmark(name)
    assert isinstance(b, benchmarks.Benchmark)
    assert b.cmdp.num_constraints == 1


def test_random_family_has_its_documented_thresholds_and_baseline():
  """Against brute force over all 64 deterministic policies (S=2 A=2 H=3): the baseline
  minimises the constraint value, and alpha = V_safe + 0.5 |V_opt - V_safe| where V_opt is
  the constraint value of the cost-minimising policy."""
  b = benchmarks.random_family(seed=3, num_states=2, num_actions=2, horizon=3)
  m = b.cmdp
  p, c, d = (np.asarray(x) for x in (m.transitions, m.cost, m.constraint_costs[0]))
  values = []
  for pi in ref.deterministic_policies(3, 2, 2):
    q = ref.occupancy_loop(p, pi, 0)
    values.append((np.sum(c * q), np.sum(d * q)))
  values = np.array(values)
  v_safe = values[:, 1].min()
  v_opt = values[np.argmin(values[:, 0]), 1]
  alpha = v_safe + 0.5 * abs(v_opt - v_safe)
  assert float(m.thresholds[0]) == pytest.approx(alpha, abs=1e-12)
  assert b.slack == pytest.approx(alpha - v_safe, abs=1e-12)
  q = ref.occupancy_loop(p, b.safe_policy, 0)
  assert np.sum(d * q) == pytest.approx(v_safe, abs=1e-12)


def test_make_benchmark_kwargs_and_unknown_name():
  assert benchmarks.make_benchmark("factored", horizon=9).cmdp.horizon == 9
  with pytest.raises(ValueError, match="unknown benchmark"):
    benchmarks.make_benchmark("race_track")


def _inventory_by_loops(num_states=6):
  """The authors' inventory model (Bura et al. 2022) restated with plain loops over their
  state-dependent action sets `a = 0..S-1-s`: `(P[s][a] [S'], reward[s][a], cost[s][a])`,
  reward and cost divided by their maxima."""
  demand = [0.3, 0.2, 0.2, 0.2, 0.05, 0.05]
  p, reward, cost = {}, {}, {}
  for s in range(num_states):
    for a in range(num_states - s):
      row = np.zeros(num_states)
      revenue = 0.0
      for d, prob in enumerate(demand):
        row[max(s + a - d, 0)] += prob
        revenue += prob * 0.08 * min(d, s + a)
      p[s, a] = row
      reward[s, a] = revenue
      cost[s, a] = (4 + 2 * a if a > 0 else 0) + (s + a)
  r_max, c_max = max(reward.values()), max(cost.values())
  return (p, {k: v / r_max for k, v in reward.items()}, {k: v / c_max for k, v in cost.items()})


def _inventory_lp(horizon, threshold):
  """The largest expected revenue `sum q R` subject to `sum q C <= threshold` over the
  occupancy measures `q[h, s, a]` of the authors' action sets, by HiGHS (scipy)."""
  from scipy.optimize import linprog

  p, reward, cost = _inventory_by_loops()
  pairs = sorted(p)
  index = {
    (h, s, a): i
    for i, (h, (s, a)) in enumerate((h, pair) for h in range(horizon) for pair in pairs)
  }
  n = len(index)
  a_eq, b_eq = [], []
  for h in range(horizon):
    for t in range(6):
      row = np.zeros(n)
      for s, a in pairs:
        if s == t:
          row[index[h, s, a]] += 1.0
        if h > 0:
          row[index[h - 1, s, a]] -= p[s, a][t]
      a_eq.append(row)
      b_eq.append(1.0 if (h == 0 and t == 0) else 0.0)
  c = np.zeros(n)
  d = np.zeros(n)
  for (_, s, a), i in index.items():
    c[i], d[i] = -reward[s, a], cost[s, a]
  res = linprog(
    c,
    A_ub=d[None],
    b_ub=[threshold],
    A_eq=np.array(a_eq),
    b_eq=b_eq,
    bounds=(0, None),
    method="highs",
  )
  assert res.status == 0, res.message
  return -res.fun


def test_inventory_is_the_authors_model():
  """Transitions and costs against loops over the authors' action sets: an order beyond
  the free capacity is the full order; the objective cost is 1 - the scaled revenue."""
  b = _benchmark("inventory")
  m = b.cmdp
  assert (m.horizon, m.num_states, m.num_actions) == (7, 6, 6)
  assert float(m.thresholds[0]) == 3.5 and int(m.initial_state) == 0
  p, reward, cost = _inventory_by_loops()
  got_p, got_c, got_d = (np.asarray(x) for x in (m.transitions, m.cost, m.constraint_costs[0]))
  for s in range(6):
    for a in range(6):
      cut = min(a, 5 - s)
      for h in range(7):
        np.testing.assert_allclose(got_p[h, s, a], p[s, cut], rtol=0, atol=1e-15)
        assert got_c[h, s, a] == pytest.approx(1.0 - reward[s, cut], abs=1e-12)
        assert got_d[h, s, a] == pytest.approx(cost[s, cut], abs=1e-12)
  assert got_d.max() == 1.0 and got_c.min() == 0.0 and got_c.max() == 1.0
  # As sparse rows the stock-outs repeat state 0; merged, they are the dense rows.
  level = np.minimum(np.arange(6)[:, None] + np.arange(6)[None, :], 5)
  targets = np.maximum(level[..., None] - np.arange(6), 0)
  ns, probs = oj.merge_repeated_next_states(
    targets, np.broadcast_to(benchmarks.INVENTORY_DEMAND, targets.shape)
  )
  tile = lambda x: jnp.asarray(np.broadcast_to(x, (7,) + x.shape))
  dense = oj.to_dense(m._replace(transitions=tile(probs), next_states=tile(ns)))
  np.testing.assert_allclose(dense.transitions, got_p, rtol=0, atol=1e-15)


@pytest.mark.parametrize("horizon", [7, 4])
def test_inventory_optimum_against_an_independent_lp(horizon):
  """solve_lp's V* against HiGHS on the authors' LP (revenue maximised, their action
  sets): V* = H - the largest revenue; the same for the baseline's alpha / 5 LP."""
  b = benchmarks.inventory(horizon=horizon) if horizon != 7 else _benchmark("inventory")
  alpha = horizon / 2
  assert float(b.cmdp.thresholds[0]) == alpha
  lp = oj.solve_lp(b.cmdp)
  assert lp.value == pytest.approx(horizon - _inventory_lp(horizon, alpha), abs=1e-8)
  value, constraint = oj.policy_values(b.cmdp, b.safe_policy)
  assert float(value) == pytest.approx(horizon - _inventory_lp(horizon, alpha / 5), abs=1e-8)
  assert float(constraint[0]) == pytest.approx(alpha / 5, abs=1e-8)
  assert b.slack == pytest.approx(4 * alpha / 5, abs=1e-8)
  if horizon == 7:
    assert lp.value == pytest.approx(0.33467847, abs=1e-8)  # V*; revenue 6.66532153


def test_lost_sales_is_the_documented_inventory():
  """Rows, costs and threshold of a small instance against a loop over stocks, orders and
  demands (math.comb for the binomial demand)."""
  import math

  cap, sizes, dmax, horizon = 9, (0, 2, 5), 4, 5
  b = benchmarks.lost_sales(
    capacity=cap, order_sizes=sizes, max_demand=dmax, horizon=horizon, budget_fraction=0.4
  )
  dense = oj.to_dense(b.cmdp)
  p = np.asarray(dense.transitions)[0]
  demand = [math.comb(dmax, d) / 2**dmax for d in range(dmax + 1)]
  for s in range(cap + 1):
    for a, size in enumerate(sizes):
      y = min(s + size, cap)
      expected = np.zeros(cap + 1)
      left = lost = 0.0
      for d, pd in enumerate(demand):
        expected[max(y - d, 0)] += pd
        left += pd * max(y - d, 0)
        lost += pd * max(d - y, 0)
      np.testing.assert_allclose(p[s, a], expected, atol=1e-12)
      assert float(dense.cost[0, s, a]) == pytest.approx(0.5 * left / cap + 0.5 * lost / dmax)
      order = y - s
      spend = 0.2 + 0.8 * order / 5 if order > 0 else 0.0
      assert float(dense.constraint_costs[0, 0, s, a]) == pytest.approx(spend)
  assert float(b.cmdp.thresholds[0]) == pytest.approx(0.4 * horizon)
  assert b.slack == pytest.approx(0.4 * horizon)  # the baseline never orders
  assert int(b.cmdp.initial_state) == 0
  assert benchmarks.lost_sales().cmdp.transitions.shape == (20, 200, 4, 13)
  with pytest.raises(ValueError, match="order_sizes"):
    benchmarks.lost_sales(order_sizes=(0, -1))
