"""`optaug_jax.experiment.reductions` fed random logs in chunks, against the same quantities
computed from the whole logs at once with NumPy."""

from types import SimpleNamespace

import numpy as np
import pytest

from optaug_jax.experiment import reductions

SEEDS, EPISODES, CONSTRAINTS = 3, 50, 2
LP_VALUE, THRESHOLDS = 0.4, np.array([0.5, 0.3])


def _logs(rng):
  return SimpleNamespace(
    cost_value=rng.uniform(0, 1, (SEEDS, EPISODES)),
    constraint_values=rng.uniform(0, 1, (SEEDS, EPISODES, CONSTRAINTS)),
    multipliers=rng.uniform(0, 5, (SEEDS, EPISODES, CONSTRAINTS)),
    pretraining=np.arange(EPISODES)[None, :].repeat(SEEDS, 0) < 7,
  )


def _chunks(log, sizes):
  done = 0
  for n in sizes:
    yield SimpleNamespace(**{k: v[:, done : done + n] for k, v in vars(log).items()}), done
    done += n


def test_trace_episodes_are_log_spaced_with_the_fixed_points():
  t = reductions.trace_episodes(1000, 20)
  assert t[0] == 1 and t[-1] == 1000 and {500, 900} <= set(t.tolist())
  assert np.all(np.diff(t) > 0)
  grid = reductions.log_grid(1000, 20)  # the same without K/2 and 9K/10, off the grid here
  assert set(t.tolist()) - set(grid.tolist()) == {500, 900} and grid[-1] == 1000
  ratios = grid[1:] / grid[:-1]
  assert np.all(ratios[grid[1:] > 20] < 1.5)  # 1000^(1/19) = 1.44 once rounding is gone


@pytest.mark.parametrize("sizes", [(50,), (7, 13, 30), (1,) * 50])
def test_long_run_matches_whole_log_sums(sizes):
  log = _logs(np.random.default_rng(0))
  trace = reductions.trace_episodes(EPISODES, 10)
  run = reductions.LongRun(SEEDS, EPISODES, trace, 8, LP_VALUE, THRESHOLDS)
  for chunk, done in _chunks(log, sizes):
    run.consume(chunk, done)
  rec = run.result()
  gap = log.cost_value - LP_VALUE
  viol = log.constraint_values - THRESHOLDS
  worst = viol.max(-1)
  expected = {
    "strong_cost": np.maximum(gap, 0)[..., None],
    "absolute_cost": np.abs(gap)[..., None],
    "weak_constraint": viol,
    "strong_constraint": np.maximum(viol, 0),
    "worst_positive_violation": np.maximum(worst, 0)[..., None],
    "unsafe": np.stack([worst > e for e in reductions.EPSILONS], -1).astype(float),
    "pretraining": log.pretraining[..., None].astype(float),
  }
  for name, per_episode in expected.items():
    running = np.cumsum(per_episode, axis=1)
    np.testing.assert_allclose(rec[f"total_{name}"], running[:, -1], rtol=1e-12)
    np.testing.assert_allclose(rec[f"trace_{name}"], running[:, trace - 1], rtol=1e-12)
  np.testing.assert_array_equal(rec["trace_multipliers"], log.multipliers[:, trace - 1])
  np.testing.assert_array_equal(rec["tail_cost_value"], log.cost_value[:, -8:])
  np.testing.assert_array_equal(rec["tail_constraint_values"], log.constraint_values[:, -8:])


def test_long_run_checkpoint_round_trip_and_refusals():
  log = _logs(np.random.default_rng(1))
  trace = reductions.trace_episodes(EPISODES, 10)
  make = lambda: reductions.LongRun(SEEDS, EPISODES, trace, 8, LP_VALUE, THRESHOLDS)
  whole, cut = make(), make()
  for chunk, done in _chunks(log, (20, 30)):
    whole.consume(chunk, done)
  first, second = _chunks(log, (20, 30))
  cut.consume(*first)
  saved = {k: v.copy() for k, v in cut.arrays().items()}
  resumed = make()
  assert resumed.check(saved, 20) is None
  assert "does not stop at episode 30" in resumed.check(saved, 30)
  assert "missing" in resumed.check({k: v for k, v in saved.items() if k != "tail_cost_value"}, 20)
  resumed.restore(saved)
  resumed.consume(*second)
  for k, v in whole.result().items():
    np.testing.assert_array_equal(resumed.result()[k], v, err_msg=k)


def test_full_logs_concatenate_chunks_and_check_lengths():
  log = _logs(np.random.default_rng(2))
  fields = ("cost_value", "constraint_values")
  logs = reductions.FullLogs(fields, SEEDS)
  for chunk, done in _chunks(log, (10, 40)):
    logs.consume(chunk, done)
  for f in fields:
    np.testing.assert_array_equal(logs.result()[f], getattr(log, f))
  arrays = logs.arrays()
  assert set(arrays) == {"log_cost_value", "log_constraint_values"}
  fresh = reductions.FullLogs(fields, SEEDS)
  assert fresh.check(arrays, EPISODES) is None
  assert "expected (3, 49, ...)" in fresh.check(arrays, 49)
  fresh.restore(arrays)
  np.testing.assert_array_equal(fresh.result()["cost_value"], log.cost_value)
