"""The delivery robot of `experiments/own_cmdp/delivery.py`, the CMDP the outlook is validated
on (docs/results/outlook/delivery_*): it is the problem those runs recorded, it builds
without a dtype warning, and its threshold follows its rule, checked by NumPy loops."""

from __future__ import annotations

import json
import pathlib
import warnings

import jax
import numpy as np

from optaug_jax.experiment import problems

ROOT = pathlib.Path(__file__).parents[1]
SPEC = f"{ROOT / 'experiments/own_cmdp/delivery.py'}:delivery"


def _load():
  """The robot as the scripts build it without --x64 (the recorded runs), failing on any
  warning (e.g. float64 arrays that jax truncates to float32)."""
  with warnings.catch_warnings(), jax.enable_x64(False):
    warnings.simplefilter("error")
    return problems.load_benchmark(SPEC)


def test_the_recorded_runs_ran_this_problem():
  digest = problems.problem_digest(_load())
  for run in ("delivery_b0.1", "delivery_b1"):
    config = json.loads((ROOT / "docs/results/outlook" / run / "run/config.json").read_text())
    assert config["arguments"]["problem_digest"] == digest


def test_the_threshold_is_half_the_low_battery_steps_of_the_cost_optimal_policy():
  cmdp = _load().cmdp
  p, nxt = np.asarray(cmdp.transitions, np.float64), np.asarray(cmdp.next_states)
  cost, low = np.asarray(cmdp.cost, np.float64), np.asarray(cmdp.constraint_costs[0], np.float64)
  horizon, num_states, num_actions, _ = p.shape
  assert cmdp.transitions.dtype == np.float32
  np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-6)
  # Backward induction, state by state (ties to the lowest action, as the library's).
  policy = np.zeros((horizon, num_states), np.int64)
  v = np.zeros(num_states)
  for h in reversed(range(horizon)):
    q = np.array(
      [
        [cost[h, s, a] + p[h, s, a] @ v[nxt[h, s, a]] for a in range(num_actions)]
        for s in range(num_states)
      ]
    )
    policy[h], v = q.argmin(-1), q.min(-1)
  # Its expected low-battery steps from the start, forward.
  d = np.zeros(num_states)
  d[int(cmdp.initial_state)] = 1.0
  steps = 0.0
  for h in range(horizon):
    a = policy[h]
    steps += d @ low[h, np.arange(num_states), a]
    nd = np.zeros(num_states)
    np.add.at(
      nd,
      nxt[h, np.arange(num_states), a].ravel(),
      (d[:, None] * p[h, np.arange(num_states), a]).ravel(),
    )
    d = nd
  assert steps > 1.0  # the rule binds: the fastest policy runs low on battery
  np.testing.assert_allclose(float(cmdp.thresholds[0]), 0.5 * steps, rtol=1e-5)
