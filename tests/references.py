"""Independent references for the tests: NumPy loops, HiGHS LPs, cvxpy programs.

Nothing here calls optaug_jax code.
"""

from __future__ import annotations

import importlib.util
import itertools
import pathlib

import numpy as np
import scipy.optimize
import scipy.sparse as sp


def occupancy_loop(transitions, policy, initial_state):
  """Plain-loop forward recursion."""
  p, pi = np.asarray(transitions, np.float64), np.asarray(policy, np.float64)
  horizon, num_states, num_actions, _ = p.shape
  q = np.zeros((horizon, num_states, num_actions))
  d = np.zeros(num_states)
  d[int(initial_state)] = 1.0
  for h in range(horizon):
    for s in range(num_states):
      for a in range(num_actions):
        q[h, s, a] = d[s] * pi[h, s, a]
    nxt = np.zeros(num_states)
    for s in range(num_states):
      for a in range(num_actions):
        for t in range(num_states):
          nxt[t] += q[h, s, a] * p[h, s, a, t]
    d = nxt
  return q


def _z_index(horizon, num_states, num_actions):
  return np.arange(horizon * num_states * num_actions * num_states).reshape(
      horizon, num_states, num_actions, num_states)


def extended_polytope(lower, upper, initial_state):
  """Linear constraints of the set Z of the paper's Appendix C, z flattened [H, S, A, S'].

  Returns (A_eq, b_eq, A_ub, b_ub) with z >= 0 implied by bounds.
  """
  horizon, num_states, num_actions, _ = lower.shape
  idx = _z_index(horizon, num_states, num_actions)
  n = idx.size
  eq_rows, eq_b = [], []
  for h in range(horizon):
    for s in range(num_states):
      row = np.zeros(n)
      row[idx[h, s].ravel()] = 1.0
      if h == 0:
        eq_b.append(1.0 if s == initial_state else 0.0)
      else:
        row[idx[h - 1, :, :, s].ravel()] -= 1.0
        eq_b.append(0.0)
      eq_rows.append(row)
  ub_rows = []
  for h, s, a, t in itertools.product(range(horizon), range(num_states), range(num_actions),
                                      range(num_states)):
    row = np.zeros(n)
    row[idx[h, s, a]] = -upper[h, s, a, t]
    row[idx[h, s, a, t]] += 1.0
    ub_rows.append(row)
    row = np.zeros(n)
    row[idx[h, s, a]] = lower[h, s, a, t]
    row[idx[h, s, a, t]] -= 1.0
    ub_rows.append(row)
  return (sp.csr_matrix(np.array(eq_rows)), np.array(eq_b), sp.csr_matrix(np.array(ub_rows)),
          np.zeros(len(ub_rows)))


def extended_lp_value(reward, lower, upper, initial_state):
  """min_{z in Z} sum r . z by HiGHS (the extended LP of Efroni et al. 2020)."""
  reward = np.asarray(reward, np.float64)
  num_states = reward.shape[1]
  a_eq, b_eq, a_ub, b_ub = extended_polytope(np.asarray(lower, np.float64),
                                             np.asarray(upper, np.float64), initial_state)
  c = np.repeat(reward[..., None], num_states, axis=-1).ravel()
  res = scipy.optimize.linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=(0, None),
                               method="highs")
  assert res.status == 0, res.message
  return res.fun


def inner_cvxpy(cost, constraint_costs, lower, upper, initial_state, thresholds, multipliers,
                eta):
  """The paper's eq. (convex-fw) in z-space, solved by cvxpy (Clarabel). Returns (value, q)."""
  import cvxpy as cp

  cost = np.asarray(cost, np.float64)
  d = np.asarray(constraint_costs, np.float64)
  horizon, num_states, num_actions = cost.shape
  a_eq, b_eq, a_ub, b_ub = extended_polytope(np.asarray(lower, np.float64),
                                             np.asarray(upper, np.float64), initial_state)
  n = horizon * num_states * num_actions
  z = cp.Variable(n * num_states, nonneg=True)
  # q = sum_s' z as a linear map
  summ = sp.kron(sp.eye(n), np.ones((1, num_states)))
  q = summ @ z
  shifted = cp.pos(np.asarray(multipliers) + eta * (d.reshape(d.shape[0], -1) @ q
                                                    - np.asarray(thresholds)))
  objective = cost.ravel() @ q + cp.sum_squares(shifted) / (2.0 * eta)
  prob = cp.Problem(cp.Minimize(objective), [a_eq @ z == b_eq, a_ub @ z <= b_ub])
  prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
  assert prob.status == "optimal", prob.status
  return prob.value, np.asarray(summ @ z.value).reshape(horizon, num_states, num_actions)


def random_box(rng, transitions, radius):
  """A box [max(0, p - r), min(1, p + r)] around true transitions, with random radii."""
  r = radius * rng.uniform(size=transitions.shape)
  return np.clip(transitions - r, 0, 1), np.clip(transitions + r, 0, 1)


def deterministic_policies(horizon, num_states, num_actions):
  """Every deterministic non-stationary policy, as [H, S, A] one-hot arrays."""
  for choice in itertools.product(range(num_actions), repeat=horizon * num_states):
    yield np.eye(num_actions)[np.array(choice).reshape(horizon, num_states)]


def load_experiment_module(name):
  """A module of `experiments/` by file path (e.g. the NumPy OptAug step, which serves the
  benchmark and these tests and is not shipped in the package)."""
  path = pathlib.Path(__file__).parent.parent / "experiments" / f"{name}.py"
  spec = importlib.util.spec_from_file_location(f"experiments_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module
