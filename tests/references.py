"""Independent references for the tests: NumPy loops, HiGHS LPs, cvxpy programs.

Nothing here calls optaug_jax code.
"""

from __future__ import annotations

import itertools
import math

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
    horizon, num_states, num_actions, num_states
  )


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
  for h, s, a, t in itertools.product(
    range(horizon), range(num_states), range(num_actions), range(num_states)
  ):
    row = np.zeros(n)
    row[idx[h, s, a]] = -upper[h, s, a, t]
    row[idx[h, s, a, t]] += 1.0
    ub_rows.append(row)
    row = np.zeros(n)
    row[idx[h, s, a]] = lower[h, s, a, t]
    row[idx[h, s, a, t]] -= 1.0
    ub_rows.append(row)
  return (
    sp.csr_matrix(np.array(eq_rows)),
    np.array(eq_b),
    sp.csr_matrix(np.array(ub_rows)),
    np.zeros(len(ub_rows)),
  )


def extended_lp_value(reward, lower, upper, initial_state):
  """min_{z in Z} sum r . z by HiGHS (the extended LP of Efroni et al. 2020)."""
  reward = np.asarray(reward, np.float64)
  num_states = reward.shape[1]
  a_eq, b_eq, a_ub, b_ub = extended_polytope(
    np.asarray(lower, np.float64), np.asarray(upper, np.float64), initial_state
  )
  c = np.repeat(reward[..., None], num_states, axis=-1).ravel()
  res = scipy.optimize.linprog(
    c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs"
  )
  assert res.status == 0, res.message
  return res.fun


def inner_cvxpy(cost, constraint_costs, lower, upper, initial_state, thresholds, multipliers, eta):
  """The paper's eq. (convex-fw) in z-space, solved by cvxpy (Clarabel). Returns (value, q)."""
  import cvxpy as cp

  cost = np.asarray(cost, np.float64)
  d = np.asarray(constraint_costs, np.float64)
  lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
  horizon, num_states, num_actions = cost.shape
  n = horizon * num_states * num_actions
  if np.all(upper - lower <= 1e-7):
    # A point box: the transitions are known (rows renormalised: float32 data sum to
    # 1 +- 6e-8). The z-space polytope would have no interior, which Clarabel cannot solve.
    p = lower / np.sum(lower, axis=-1, keepdims=True)
    a_eq, b_eq = _flow_constraints(p, initial_state)
    z = cp.Variable(n, nonneg=True)
    summ = sp.eye(n)
    constraints = [a_eq @ z == b_eq]
  else:
    a_eq, b_eq, a_ub, b_ub = extended_polytope(lower, upper, initial_state)
    z = cp.Variable(n * num_states, nonneg=True)
    # q = sum_s' z as a linear map
    summ = sp.kron(sp.eye(n), np.ones((1, num_states)))
    constraints = [a_eq @ z == b_eq, a_ub @ z <= b_ub]
  q = summ @ z
  # Scale-free: (eta/2) ||[lambda/eta + Dq - alpha]_+||^2, no eta^2 (well scaled to 1e8).
  shifted = cp.pos(
    np.asarray(multipliers) / eta + d.reshape(d.shape[0], -1) @ q - np.asarray(thresholds)
  )
  objective = cost.ravel() @ q + 0.5 * eta * cp.sum_squares(shifted)
  # Clarabel fails on some instances with a large objective (eta 1e7 and thresholds far out
  # of reach: an optimum of 2.5e7); the objective divided by eta solves there. On a few
  # others its tight tolerances end "optimal_inaccurate" while its defaults (feasibility
  # 1e-8) end "optimal". Last of all an "optimal_inaccurate" answer is taken (seen at eta 1e8
  # with a box of radius 1e-3 and an optimum of 1.2e8: 2e-9 from SCS's and ours).
  # Where Clarabel's tight tolerances fail, SCS at eps 1e-10 comes before its defaults:
  # at eta 1e6 with a box of radius 0.008 Clarabel's defaults ended "optimal" 3e-5 below the
  # optimum (SCS and the exact method agree to 1e-12).
  strict = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
  scs = dict(solver=cp.SCS, eps=1e-10, max_iters=500_000)
  inaccurate = None
  for scale, tolerances in (
    (1.0, strict),
    (1.0 / max(1.0, eta), strict),
    (1.0 / max(1.0, eta), scs),
    (1.0, {}),
    (1.0 / max(1.0, eta), {}),
  ):
    prob = cp.Problem(cp.Minimize(scale * objective), constraints)
    try:
      options = dict(tolerances)
      prob.solve(solver=options.pop("solver", cp.CLARABEL), **options)
    except cp.error.SolverError:
      continue
    if prob.status == "optimal":
      break
    if prob.status == "optimal_inaccurate" and inaccurate is None:
      inaccurate = (prob.value / scale, summ @ z.value)
  else:
    assert inaccurate is not None, "Clarabel failed on every formulation"
    return inaccurate[0], np.asarray(inaccurate[1]).reshape(horizon, num_states, num_actions)
  return (prob.value / scale, np.asarray(summ @ z.value).reshape(horizon, num_states, num_actions))


def _flow_constraints(transitions, initial_state):
  """Flow constraints of the occupancy measures `q [H*S*A]` of a fixed MDP (sparse)."""
  horizon, num_states, num_actions, _ = transitions.shape
  idx = np.arange(horizon * num_states * num_actions).reshape(horizon, num_states, num_actions)
  rows = sp.lil_matrix((horizon * num_states, idx.size))
  b = np.zeros(horizon * num_states)
  for h in range(horizon):
    for s in range(num_states):
      r = h * num_states + s
      rows[r, idx[h, s]] = 1.0
      if h == 0:
        b[r] = 1.0 if s == initial_state else 0.0
      else:
        for s0 in range(num_states):
          for a in range(num_actions):
            rows[r, idx[h - 1, s0, a]] = rows[r, idx[h - 1, s0, a]] - transitions[h - 1, s0, a, s]
  return rows.tocsr(), b


def random_box(rng, transitions, radius):
  """A box [max(0, p - r), min(1, p + r)] around true transitions, with random radii."""
  r = radius * rng.uniform(size=transitions.shape)
  return np.clip(transitions - r, 0, 1), np.clip(transitions + r, 0, 1)


def deterministic_policies(horizon, num_states, num_actions):
  """Every deterministic non-stationary policy, as [H, S, A] one-hot arrays."""
  for choice in itertools.product(range(num_actions), repeat=horizon * num_states):
    yield np.eye(num_actions)[np.array(choice).reshape(horizon, num_states)]


def bura2022_box(
  states,
  actions,
  num_states,
  num_actions,
  num_episodes,
  delta,
  support,
  horizon=None,
  bonus_scale=1.0,
  all_next_states=False,
):
  """The transition box of Bura et al. (2022)'s public code, as loops (their mode-1 radii).

  Counts pooled over steps; p-hat uniform over the support for an unvisited (s, a);
  `beta = min(2 sqrt(L p (1 - p) / n) + 14 L / (3 n), 1)`, 1 for an unvisited pair, with
  `L = log(6 S^2 H K / delta)`; the box `[p-hat - beta, p-hat + beta]` in `[0, 1]` on the
  support, `[0, 0]` off it. `states`: [episodes, H + 1]; `actions`: [episodes, H];
  `support`: [S, A, S'] bool. `bonus_scale` multiplies the radius before the cap.
  `all_next_states`: the returned radii also cover the next states off the support, as
  their code's `beta_prob_2` sums them (p-hat = 0 there: `min(14 L / (3 n), 1)`, 1 if
  unvisited); the box is unchanged. Returns `(lower, upper, radius)`, each [S, A, S'].
  """
  horizon = len(actions[0]) if horizon is None else horizon
  n = np.zeros((num_states, num_actions))
  nt = np.zeros((num_states, num_actions, num_states))
  for ep_states, ep_actions in zip(states, actions):
    for h in range(len(ep_actions)):
      n[ep_states[h], ep_actions[h]] += 1
      nt[ep_states[h], ep_actions[h], ep_states[h + 1]] += 1
  log_l = math.log(6 * num_states**2 * horizon * num_episodes / delta)
  lower = np.zeros((num_states, num_actions, num_states))
  upper = np.zeros((num_states, num_actions, num_states))
  radius = np.zeros((num_states, num_actions, num_states))
  for s in range(num_states):
    for a in range(num_actions):
      succ = [s1 for s1 in range(num_states) if support[s, a, s1]]
      for s1 in range(num_states):
        if s1 not in succ and not all_next_states:
          continue
        if n[s, a] == 0:
          p_hat, beta = (1.0 / len(succ) if s1 in succ else 0.0), 1.0
        else:
          p_hat = nt[s, a, s1] / n[s, a]
          beta = min(
            bonus_scale
            * (2 * math.sqrt(log_l * p_hat * (1 - p_hat) / n[s, a]) + 14 * log_l / (3 * n[s, a])),
            1.0,
          )
        radius[s, a, s1] = beta
        if s1 in succ:
          lower[s, a, s1] = max(p_hat - beta, 0.0)
          upper[s, a, s1] = min(p_hat + beta, 1.0)
  return lower, upper, radius


def constrained_extended_lp_value(cost, constraint_costs, lower, upper, initial_state, thresholds):
  """min_{z in Z} c . q(z) s.t. D q(z) <= alpha by HiGHS; None when infeasible."""
  cost = np.asarray(cost, np.float64)
  num_states = cost.shape[1]
  a_eq, b_eq, a_ub, b_ub = extended_polytope(
    np.asarray(lower, np.float64), np.asarray(upper, np.float64), initial_state
  )
  expand = lambda x: np.repeat(np.asarray(x, np.float64)[..., None], num_states, -1).ravel()
  rows = sp.csr_matrix(np.stack([expand(d) for d in constraint_costs]))
  res = scipy.optimize.linprog(
    expand(cost),
    A_ub=sp.vstack([a_ub, rows]),
    b_ub=np.concatenate([b_ub, thresholds]),
    A_eq=a_eq,
    b_eq=b_eq,
    bounds=(0, None),
    method="highs",
  )
  return None if res.status == 2 else res.fun


def occupancy_lp_value(transitions, cost, constraint_costs, thresholds, initial_state):
  """min_q c . q s.t. D q <= alpha, q an occupancy of `transitions` (flow rows as loops)."""
  p = np.asarray(transitions, np.float64)
  horizon, num_states, num_actions, _ = p.shape
  n = horizon * num_states * num_actions
  index = lambda h, s, a: (h * num_states + s) * num_actions + a
  rows, rhs = [], []
  for h in range(horizon):
    for s in range(num_states):
      row = np.zeros(n)
      for a in range(num_actions):
        row[index(h, s, a)] = 1.0
      if h > 0:
        for s0 in range(num_states):
          for a in range(num_actions):
            row[index(h - 1, s0, a)] -= p[h - 1, s0, a, s]
      rows.append(row)
      rhs.append(1.0 if (h == 0 and s == initial_state) else 0.0)
  d = np.asarray(constraint_costs, np.float64).reshape(len(thresholds), -1)
  res = scipy.optimize.linprog(
    np.asarray(cost, np.float64).ravel(),
    A_ub=d,
    b_ub=thresholds,
    A_eq=np.array(rows),
    b_eq=np.array(rhs),
    bounds=(0, None),
    method="highs",
  )
  return None if res.status == 2 else res.fun


def random_inner_instance(
  rng,
  num_constraints,
  *,
  radius,
  lam_scale,
  horizon=3,
  num_states=3,
  num_actions=2,
  threshold_share=None,
):
  """A random inner problem (cost, D, lower, upper, s1, alpha, lambda) in float64."""
  p = rng.dirichlet(np.ones(num_states), size=(horizon, num_states, num_actions))
  c = rng.uniform(size=(horizon, num_states, num_actions))
  d = rng.uniform(size=(num_constraints, horizon, num_states, num_actions))
  r = radius * rng.uniform(size=p.shape)
  lower, upper = np.clip(p - r, 0, 1), np.clip(p + r, 0, 1)
  share = rng.uniform(0.3, 0.7) if threshold_share is None else threshold_share
  alpha = share * horizon * d.reshape(num_constraints, -1).mean(axis=1)
  lam = rng.uniform(0, 2, size=num_constraints) * lam_scale
  return c, d, lower, upper, 0, alpha, lam


def run_on_cpu_devices(code: str, num_devices: int, timeout: int = 900) -> str:
  """Runs `code` in a fresh Python on `num_devices` host CPU devices (from the repository
  root) and returns its stdout; a failure raises with the end of its stderr."""
  import os
  import pathlib
  import subprocess
  import sys

  env = dict(
    os.environ,
    XLA_FLAGS=f"--xla_force_host_platform_device_count={num_devices}",
    JAX_PLATFORMS="cpu",
  )
  out = subprocess.run(
    [sys.executable, "-c", code],
    env=env,
    cwd=pathlib.Path(__file__).parent.parent,
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stdout
