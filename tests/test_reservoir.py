"""The reservoir of `experiments/own_cmdp/reservoir.py` (episode_cost.py's `reservoir`): a
CMDP with two constraints whose flood and drought budgets both bind at the exact
constrained optimum (positive multipliers), while the safe baseline keeps both with slack."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import optaug_jax as oj

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "experiments" / "own_cmdp"))
from reservoir import policy_values, reservoir  # noqa: E402


@pytest.fixture(scope="module")
def bench():
  """In float64: HiGHS's interior point takes three times as long on the float32 model's
  rounded rows, to the same optimum."""
  return reservoir(dtype=np.float64)


def test_its_shape(bench):
  cmdp = bench.cmdp
  assert (cmdp.horizon, cmdp.num_states, cmdp.num_actions) == (30, 200, 5)
  assert cmdp.constraint_costs.shape[0] == 2
  assert cmdp.next_states.shape == (30, 200, 5, 6)  # six inflow outcomes
  for costs in (cmdp.cost, cmdp.constraint_costs):
    assert 0.0 <= float(np.min(costs)) and float(np.max(costs)) <= 1.0


def test_both_budgets_bind_and_the_baseline_keeps_both_with_slack(bench):
  cmdp = bench.cmdp
  thresholds = np.asarray(cmdp.thresholds)
  lp = oj.solve_lp(cmdp)
  (free_value, free_values), safe, (value, values) = policy_values(cmdp)  # DP, jitted
  # Both multipliers positive, both constraints tight; the cost-optimal policy spends twice
  # each budget (the rule), and the constrained optimum costs more.
  assert np.all(lp.multipliers > 1e-3), lp.multipliers
  np.testing.assert_allclose(lp.constraint_values, thresholds, atol=1e-6)
  np.testing.assert_allclose(free_values, 2.0 * thresholds, rtol=1e-9)
  assert lp.value > float(free_value) + 0.1
  # The baseline (oj.safest_policy) is strictly feasible for both, with the slack it says,
  # and no better than the constrained optimum.
  np.testing.assert_array_equal(np.asarray(safe), np.asarray(bench.safe_policy))
  assert np.all(thresholds - np.asarray(values) > 1.0), (values, thresholds)
  assert bench.slack == pytest.approx(float(np.min(thresholds - np.asarray(values))), rel=1e-12)
  assert float(value) >= lp.value - 1e-9
