"""OptAug without a known safe policy (the paper's open question 3): `safe_policy=None` with
`pretrain_episodes=0` and a constant eta, and the experiment that compares it."""

import json
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

import optaug_jax as oj


def test_no_baseline_is_optaug_with_an_unplayed_one():
  """With `K' = 0` the baseline is never played: the run without one is the run with one,
  bit for bit, and it starts learning in the first episode."""
  bench = oj.benchmarks.make_benchmark("factored")
  key = jax.random.PRNGKey(3)
  runs = []
  for policy in (None, bench.safe_policy):
    agent = oj.optaug(200, policy, pretrain_episodes=0, eta=10.0)
    runs.append(jax.jit(lambda k, a=agent: oj.run(a, k, bench.cmdp, num_episodes=40))(key))
  (state, logs), (state_b, logs_b) = runs
  assert not bool(np.asarray(logs.pretraining).any())
  np.testing.assert_array_equal(logs.constraint_values, logs_b.constraint_values)
  np.testing.assert_array_equal(state.multipliers, state_b.multipliers)


@pytest.mark.parametrize(
  "kwargs, message",
  [
    (dict(pretrain_episodes=5, eta=10.0), "pretrain_episodes=5"),
    (dict(pretrain_episodes=0), "eta=None"),
  ],
)
def test_no_baseline_needs_no_pretraining_and_a_constant_eta(kwargs, message):
  with pytest.raises(ValueError, match=f"safe_policy: None.*{message}"):
    oj.optaug(100, None, **kwargs)


@pytest.mark.slow  # 40-60 s: three agents compiled, OptCMDP's LPs on the host
def test_the_no_baseline_script_runs_and_resumes(tmp_path):
  script = pathlib.Path(__file__).parent.parent / "experiments" / "no_baseline.py"
  argv = [sys.executable, str(script), "--out", str(tmp_path), "--episodes", "30"]
  argv += ["--seeds", "2", "--problems", "factored,kitamura_random:1"]
  first = subprocess.run(argv, capture_output=True, text=True, timeout=600)
  assert first.returncode == 0, first.stderr[-2000:]
  record = json.loads((tmp_path / "no_baseline.json").read_text())
  values = record["results"]["kitamura_random:1"]
  assert set(values) == {"optaug_no_baseline", "optaug", "optcmdp"}
  # OptAug's pre-training (K' = 3) plays the strictly feasible baseline: no violation there.
  assert len(values["optcmdp"]["values"]["strong_regret"]) == 2
  again = subprocess.run(argv, capture_output=True, text=True, timeout=600)
  assert again.returncode == 0 and "6 pairs done" in again.stdout
