"""`oj.analysis.outlook` and its pieces, against independent references: the exact counts
against the true model, the perfect-model run of OptDual against the known-model dual
descent of `known_model.py` (another DP), the prediction and the measured separation on
inputs whose answer is known in closed form."""

import json

import jax
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax._src import estimates


@pytest.mark.parametrize(
  ("name", "setting"), [("factored", "paper"), ("gridworld", "bura2022"), ("queue", "bura2022")]
)
def test_exact_counts_reproduce_the_true_model(name, setting):
  """The empirical model of the counts is the CMDP (dense per-step, pooled, sparse slots)."""
  bench = oj.benchmarks.make_benchmark(name)
  cmdp = bench.cmdp
  agent = oj.agents.make_agent(
    "optdual", bench, num_episodes=100, setting=oj.named_setting(setting, cmdp), bonus_scale=0.0
  )
  counts = oj.analysis.exact_counts(agent, cmdp)
  model = estimates.optimistic_model(
    counts, num_episodes=100, bonus_scale=0.0, setting=agent.assumptions.setting
  )
  dense = np.asarray(oj.to_dense(cmdp).transitions)
  got = np.asarray(model.transitions)
  if model.next_states is not None:  # slots back to dense rows
    ns = np.broadcast_to(np.asarray(model.next_states), got.shape)
    got = np.sum((ns[..., None] == np.arange(cmdp.num_states)) * got[..., None], axis=-2)
  np.testing.assert_allclose(np.broadcast_to(got, dense.shape), dense, atol=2e-6)
  np.testing.assert_array_equal(np.asarray(model.upper), np.asarray(model.lower))  # a point
  np.testing.assert_allclose(model.cost, cmdp.cost, atol=1e-6)
  np.testing.assert_allclose(model.constraint_costs, cmdp.constraint_costs, atol=1e-6)


def test_perfect_model_optdual_is_the_known_model_dual_descent():
  """OptDual planning on exact counts (its extended DP on a point box) against dual descent
  on the known CMDP (`dual_descent_known_model`: plain backward induction), same step."""
  cmdp = oj.random_cmdp(jax.random.PRNGKey(3), num_states=6, num_actions=3, horizon=5)
  policy, slack = oj.safest_policy(cmdp)
  bench = oj.benchmarks.Benchmark(cmdp, policy, float(slack))
  agent = oj.agents.make_agent("optdual", bench, num_episodes=1000, eta=0.2, bonus_scale=0.0)
  mine = oj.analysis.perfect_model_run(agent, cmdp, 300)
  ref = oj.analysis.dual_descent_known_model(cmdp, 0.2, num_iters=300)
  reference = np.max(np.asarray(ref.constraint_values) - np.asarray(cmdp.thresholds), -1)
  np.testing.assert_allclose(mine.violation, reference, atol=1e-4)
  np.testing.assert_allclose(mine.multipliers, ref.multipliers, atol=1e-4)
  assert np.ptp(reference[150:]) > 0.05  # it swings (the test is not of a constant)


def _bias(beta, start=300):
  z = np.ones(1)  # OptAug's violation is b(k) itself
  windows, zero = np.array([start]), np.array([0.0])
  return oj.analysis.BiasFit(beta, 0.0, windows, zero, zero, z, start)  # b = beta / sqrt(k)


def test_prediction_of_the_positive_violation_in_closed_form():
  """A Lagrangian level that does not move (its pilot's level is its perfect model's: +-0.4,
  mean [v]+ 0.2) and b(k) = beta / sqrt(k): OptAug's [v]+ = b is half the Lagrangian's
  from b = 0.1, so k = (beta / 0.1)^2."""
  swing = np.tile([0.4, -0.4], 500)
  pilot = np.tile([0.4, -0.4], (4, 1000))
  p = oj.analysis.predict("optdual", swing, _bias(10.0), pilot, threshold=0.05, horizon=10**6)
  assert p.positive_episode == pytest.approx((10.0 / 0.1) ** 2, rel=0.04)
  # The share: OptAug violates (b > 0.05) until k = (10 / 0.05)^2 = 40,000; the Lagrangian's
  # share is 0.5 (+0.4 + b > 0.05): 1 <= 0.5 - 0.1 fails, then 0 <= 0.4 holds.
  assert p.share_episode == pytest.approx(40_000, rel=0.04)
  assert "separates by about episode" in p.verdict


def test_a_swing_below_the_threshold_never_separates_the_share():
  swing = np.tile([0.02, -0.02], 500)  # the user's delivery CMDP: alpha - 0.007 to + 0.024
  pilot = np.tile([0.02, -0.02], (4, 1000))
  p = oj.analysis.predict("optdual", swing, _bias(1.0), pilot, threshold=0.05, horizon=10**6)
  assert p.share_episode is None
  assert "will not separate" in p.verdict


def _summary(t, pos_a, pos_l, share_a, share_l):
  agent = lambda pos, share: {
    "episodes": list(t),
    "window_positive_violation": {"mean": list(pos)},
    "window_unsafe": {"0.05": list(share)},
  }
  return {"optaug": agent(pos_a, share_a), "optdual": agent(pos_l, share_l)}


def test_measured_separation_is_the_first_episode_from_which_it_holds():
  t = [10, 20, 40, 80, 160, 320]
  summary = _summary(
    t,
    pos_a=[0.0, 0.5, 0.3, 0.1, 0.05, 0.04],
    pos_l=[0.0, 0.4, 0.4, 0.3, 0.30, 0.30],  # half: from 80 on (the 0.0 at 10: below 0.01)
    share_a=[0.0, 1.0, 0.2, 0.5, 0.0, 0.0],  # 0.1 below: at 40, not at 80, from 160 on
    share_l=[0.0, 0.9, 0.4, 0.4, 0.4, 0.4],
  )
  assert oj.analysis.measured_separation(summary, "optaug", "optdual") == {
    "positive": 80,
    "share": 160,
  }
  summary["optaug"]["window_unsafe"]["0.05"][-1] = 0.35
  assert oj.analysis.measured_separation(summary, "optaug", "optdual")["share"] is None


@pytest.mark.slow
def test_outlook_script_writes_its_files_and_compares_with_a_run(tmp_path):
  """The script end to end on a run it made itself (headline.py), then `--like` it."""
  from optaug_jax.experiment import headline, outlook

  run = tmp_path / "run"
  flags = ["--benchmark", "media_streaming", "--bonus-scale", "0.1", "--episodes", "1000"]
  headline.main(flags + ["--seeds", "4", "--chunk", "500", "--out", str(run)])
  out, measured = outlook.main(
    ["--like", str(run), "--pilot-episodes", "500", "--out", str(tmp_path / "o")]
  )
  saved = json.loads((tmp_path / "o" / "outlook.json").read_text())
  assert set(saved["predictions"]) == {"optdual"} and saved["like"] == str(run)
  assert saved["measured"] == measured and set(measured["optdual"]) == {"positive", "share"}
  assert (tmp_path / "o" / "outlook.png").stat().st_size > 10_000
  assert out.seconds_per_seed_episode["optaug"] > 0
  # Fitted again from its pilots in another form; refused with another run flag.
  flags = ["--like", str(run), "--pilot-episodes", "500", "--refit", str(tmp_path / "o")]
  again, _ = outlook.main(flags + ["--bias-form", "radii", "--out", str(tmp_path / "o2")])
  assert again.bias.radii is not None and again.pilots["optaug"].state is None
  np.testing.assert_array_equal(again.swings["optdual"], out.swings["optdual"])
  np.testing.assert_array_equal(again.pilots["optaug"].violations, out.pilots["optaug"].violations)
  with pytest.raises(oj.experiment.cli.UsageError, match="threshold"):
    outlook.main(flags + ["--threshold", "0.1", "--out", str(tmp_path / "o3")])


def test_a_separation_in_the_last_tenth_only_is_not_established():
  t = [10, 20, 40, 80, 160, 320, 1000]
  summary = _summary(
    t,
    pos_a=[0.5] * 6 + [0.0],
    pos_l=[0.4] * 7,
    share_a=[1.0] * 6 + [0.0],
    share_l=[0.5] * 7,
  )
  assert oj.analysis.measured_separation(summary, "optaug", "optdual") == {
    "positive": None,
    "share": None,
  }


@pytest.mark.parametrize(("form", "a", "c"), [("sqrt", 5.0, 0.0), ("bernstein", 5.0, 300.0)])
def test_fit_bias_recovers_a_known_decay(form, a, c):
  """Pilot violations that are exactly b(k) = a / sqrt(k) + c / k after 100 episodes of
  pre-training (4 identical seeds): each form recovers its own coefficients."""
  k = np.arange(1, 4001, dtype=np.float64)
  b = a / np.sqrt(k) + c / k
  pretraining = k <= 100
  violations = np.tile(np.where(pretraining, -1.0, b), (4, 1))
  fit = oj.analysis.fit_bias(violations, pretraining, 0.05, form=form)
  assert fit.from_episode == 101
  assert fit.a == pytest.approx(a, rel=0.05)
  assert fit.c == pytest.approx(c, rel=0.1, abs=1e-9)
  np.testing.assert_allclose(
    fit.at([1e4, 1e6]), a / np.sqrt([1e4, 1e6]) + c / np.array([1e4, 1e6]), rtol=0.06
  )
  with pytest.raises(ValueError, match="form"):
    oj.analysis.fit_bias(violations, pretraining, 0.05, form="power")


def _optimistic_evaluation_loop(cost, policy, lower, upper, initial_state):
  """`min_{p in box} V^pi(cost, p)` by explicit loops: each row's expectation filled from the
  lower ends, the rest of its mass to the cheapest next states first."""
  horizon, num_states, num_actions = cost.shape
  v = np.zeros(num_states)
  for h in reversed(range(horizon)):
    q = np.zeros((num_states, num_actions))
    for s in range(num_states):
      for a in range(num_actions):
        p = lower[h, s, a].astype(np.float64).copy()
        rest = 1.0 - p.sum()
        for t in np.argsort(v, kind="stable"):
          more = min(upper[h, s, a, t] - p[t], rest)
          p[t] += more
          rest -= more
        q[s, a] = cost[h, s, a] + p @ v
    v = np.sum(policy[h] * q, axis=-1)
  return v[initial_state]


def test_radii_gap_against_a_numpy_model_and_loop_evaluation():
  """`radii_gap` on the paper setting: at every grid episode, the visits of the stated model
  (the pilot's scaled, then the LP's occupancy per episode), NumPy's optimistic model of
  eq. (opt-c) (`numpy_reference`) and a loop evaluation of the optimal policy in its box."""
  from optaug_jax._src.experiment import numpy_reference

  cmdp = oj.random_cmdp(jax.random.PRNGKey(5), num_states=4, num_actions=3, horizon=4)
  bench = oj.benchmarks.Benchmark(cmdp, *oj.safest_policy(cmdp))
  num_episodes, bonus, pilot = 5000, 0.3, 200
  agent = oj.agents.make_agent("optaug", bench, num_episodes=num_episodes, bonus_scale=bonus)
  visits = np.array(jax.random.uniform(jax.random.PRNGKey(6), (4, 4, 3)) * 60.0)
  visits[0, 1, 2] = 0.0  # an unvisited pair: the whole simplex
  model = oj.agents.model_fn(num_episodes=num_episodes, delta=0.1, bonus_scale=bonus, setting=None)
  counts = oj.agents.init_agent(agent, cmdp).counts
  gap = oj.analysis.radii_gap(cmdp, model, counts, None, visits, pilot, 10**5, num_points=9)
  lp = oj.solve_lp(cmdp)
  p = np.asarray(cmdp.transitions, np.float64)
  d = np.asarray(cmdp.constraint_costs, np.float64)
  alpha = np.asarray(cmdp.thresholds, np.float64)
  expected = []
  for k in gap.episodes:
    n = visits * min(k, pilot) / pilot + max(k - pilot, 0.0) * lp.occupancy
    _, d_opt, lower, upper = numpy_reference.optimistic_model(
      n,
      p * n[..., None],
      np.asarray(cmdp.cost) * n,
      d * n,
      num_episodes=num_episodes,
      delta=0.1,
      bonus_scale=bonus,
    )
    v_opt = np.array(
      [
        _optimistic_evaluation_loop(d_opt[i], lp.policy, lower, upper, int(cmdp.initial_state))
        for i in range(d.shape[0])
      ]
    )
    slack = np.maximum(alpha - lp.constraint_values, 0.0)
    expected.append(np.max(np.maximum(lp.constraint_values - v_opt - slack, 0.0)))
  np.testing.assert_allclose(gap.gap, expected, rtol=2e-4, atol=2e-5)
  assert expected[0] > 0.5 and expected[-1] < 0.1 * expected[0]  # it decays
  assert np.all(np.diff(gap.gap) <= 1e-6)  # more visits, a smaller gap


@pytest.mark.parametrize("name", ["gridworld", "queue"])
def test_radii_gap_is_the_same_in_the_dense_and_the_sparse_layout(name):
  """bura2022 (known costs, a known support, visits pooled over h): the same gap whether
  the support is dense rows or sparse slots."""
  dense = oj.benchmarks.make_benchmark(name)
  cmdp = oj.to_dense(dense.cmdp)
  gaps = []
  for c in (cmdp, oj.to_sparse(cmdp)):
    bench = oj.benchmarks.Benchmark(c, dense.safe_policy, dense.slack)
    setting = oj.named_setting("bura2022", c)
    agent = oj.agents.make_agent("optaug", bench, num_episodes=10**4, setting=setting)
    model = oj.agents.model_fn(num_episodes=10**4, delta=None, bonus_scale=1.0, setting=setting)
    visits = np.full(cmdp.cost.shape, 3.0)
    counts = oj.agents.init_agent(agent, c).counts
    gaps.append(oj.analysis.radii_gap(c, model, counts, setting, visits, 100, 10**6, num_points=7))
  np.testing.assert_allclose(gaps[0].gap, gaps[1].gap, rtol=1e-4, atol=1e-5)
  assert gaps[0].gap[0] > gaps[0].gap[-1] > 0


def test_fit_bias_radii_recovers_a_known_scale_and_follows_the_gap():
  """Pilot violations that are exactly 2.5 r(k) for a gap r with a plateau then a 1/k fall
  (no power law): the form "radii" recovers 2.5, extrapolates r's shape, and a Lagrangian
  level decays as r does."""
  episodes = np.geomspace(1, 1e6, 60)
  gap = oj.analysis.RadiiGap(episodes, np.minimum(1.0, 500.0 / episodes))
  k = np.arange(1, 3001, dtype=np.float64)
  pretraining = k <= 100
  violations = np.tile(np.where(pretraining, -1.0, 2.5 * gap.at(k)), (4, 1))
  fit = oj.analysis.fit_bias(violations, pretraining, 0.05, form="radii", radii=gap)
  assert fit.scale == pytest.approx(2.5, rel=0.02)
  np.testing.assert_allclose(fit.at([1e4, 1e6]), 2.5 * 500.0 / np.array([1e4, 1e6]), rtol=0.03)
  np.testing.assert_allclose(fit.decay([1e4, 1e5], 1e3), [0.1, 0.01], rtol=0.03)
  assert fit.decay([10.0], 100.0)[0] == 1.0  # never above the reference's level
  with pytest.raises(ValueError, match="radii"):
    oj.analysis.fit_bias(violations, pretraining, 0.05, form="radii")
  with pytest.raises(ValueError, match="radii"):
    oj.analysis.fit_bias(violations, pretraining, 0.05, form="sqrt", radii=gap)


def test_outlook_radii_uses_optaugs_own_radii():
  """`outlook(bias_form="radii")` builds the gap with the options OptAug was given (here a
  bonus for OptAug alone, and a named setting): the same gap as `radii_gap` with that model
  and the pilot's visits; another bonus gives another gap."""
  bench = oj.benchmarks.make_benchmark("media_streaming")
  options = {"setting": "paper", "bonus_scale": {"optaug": 0.1, "optdual": 1.0}}
  out = oj.analysis.outlook(
    bench,
    key=jax.random.PRNGKey(0),
    num_episodes=10**4,
    options=options,
    pilot_episodes=250,
    perfect_episodes=100,
    chunk=250,
    bias_form="radii",
  )
  assert out.config["bias_form"] == "radii" and np.isfinite(out.bias.scale)
  pilot = out.pilots["optaug"]
  agent = oj.agents.make_agent("optaug", bench, num_episodes=10**4, bonus_scale=0.1)
  counts = oj.agents.init_agent(agent, bench.cmdp).counts
  gaps = {}
  for bonus in (0.1, 1.0):
    model = oj.agents.model_fn(num_episodes=10**4, delta=None, bonus_scale=bonus, setting=None)
    gaps[bonus] = oj.analysis.radii_gap(
      bench.cmdp, model, counts, None, pilot.visits[-1], 250, 10**6
    ).gap
  np.testing.assert_allclose(out.bias.radii.gap, gaps[0.1], rtol=1e-6)
  assert not np.allclose(gaps[0.1], gaps[1.0], rtol=0.05)
  np.testing.assert_allclose(pilot.visits[-1].sum(axis=(1, 2)), 250.0)  # one visit per step
  # Fitted again from the same measurements, in the default form: no run made again.
  kwargs = dict(key=jax.random.PRNGKey(1), num_episodes=10**4, options=options, chunk=250)
  again = oj.analysis.outlook(
    bench, pilot_episodes=250, perfect_episodes=100, measurements=out.measurements(), **kwargs
  )
  assert again.pilots["optaug"] is pilot and again.config["bias_form"] == "sqrt"
  assert again.bias.a == oj.analysis.fit_bias(pilot.violations, pilot.pretraining, 0.05).a
  with pytest.raises(ValueError, match="pilot_episodes"):
    oj.analysis.outlook(
      bench, pilot_episodes=500, perfect_episodes=100, measurements=out.measurements(), **kwargs
    )
