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
