"""Exact CMDP optima by linear programming (HiGHS through scipy). Host side, never jitted."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.optimize
import scipy.sparse as sp

from optaug_jax.cmdp import CMDP, validate_cmdp


class LPSolution(NamedTuple):
  """Exact solution of the occupancy-measure LP of a CMDP."""

  value: float  # V^{pi*}(c, p)
  constraint_values: np.ndarray  # [I] V^{pi*}(d_i, p)
  policy: np.ndarray  # [H, S, A] eq. (retrieve-pi), uniform where unreached
  occupancy: np.ndarray  # [H, S, A]
  multipliers: np.ndarray  # [I] optimal dual variables lambda* >= 0 (= -dV*/d alpha)


def flow_constraints(transitions: np.ndarray, initial_state: int) -> tuple[sp.csr_matrix,
                                                                          np.ndarray]:
  """Equalities `A_eq q = b_eq` of the occupancy polytope `Q(p)`, `q` flattened `[H, S, A]`.

  `sum_a q_1(s, a) = 1{s = s_1}` and `sum_a q_{h+1}(s', a) = sum_{s,a} p_h(s'|s,a) q_h(s,a)`.
  """
  horizon, num_states, num_actions, _ = transitions.shape
  n = horizon * num_states * num_actions
  index = np.arange(n).reshape(horizon, num_states, num_actions)
  rows, cols, vals = [], [], []
  for h in range(horizon):
    for s in range(num_states):
      row = h * num_states + s
      rows += [row] * num_actions
      cols += list(index[h, s])
      vals += [1.0] * num_actions
      if h > 0:
        prev = transitions[h - 1, :, :, s]  # [S, A] p_{h-1}(s | ., .)
        rows += [row] * (num_states * num_actions)
        cols += list(index[h - 1].ravel())
        vals += list(-prev.ravel())
  a_eq = sp.csr_matrix((vals, (rows, cols)), shape=(horizon * num_states, n))
  b_eq = np.zeros(horizon * num_states)
  b_eq[initial_state] = 1.0
  return a_eq, b_eq


def solve_lp(cmdp: CMDP) -> LPSolution:
  """The exact optimum of the CMDP via its occupancy-measure LP (HiGHS).

  `min_q c . q  s.t.  q in Q(p),  D q <= alpha` (paper's Appendix "CMDPs and Occupancy
  Measures").

  Args:
    cmdp: an unbatched `CMDP`; validated first.

  Returns:
    `LPSolution`.

  Raises:
    ValueError: if the CMDP is invalid or infeasible.
  """
  validate_cmdp(cmdp)
  p = np.asarray(cmdp.transitions, np.float64)
  c = np.asarray(cmdp.cost, np.float64)
  d = np.asarray(cmdp.constraint_costs, np.float64)
  alpha = np.asarray(cmdp.thresholds, np.float64)
  if p.ndim != 4:
    raise ValueError(f"transitions: solve_lp takes one CMDP, got batch shape {p.shape[:-4]}")
  horizon, num_states, num_actions, _ = p.shape
  a_eq, b_eq = flow_constraints(p, int(cmdp.initial_state))
  num_constraints = d.shape[0]
  res = scipy.optimize.linprog(
      c.ravel(), A_ub=d.reshape(num_constraints, -1), b_ub=alpha, A_eq=a_eq, b_eq=b_eq,
      bounds=(0, None), method="highs")
  if res.status == 2:
    raise ValueError("thresholds: the CMDP is infeasible (no policy meets every constraint)")
  if res.status != 0:
    raise RuntimeError(f"HiGHS failed: {res.message}")
  q = np.maximum(res.x, 0.0).reshape(horizon, num_states, num_actions)
  total = q.sum(-1, keepdims=True)
  policy = np.where(total > 1e-12, q / np.where(total > 1e-12, total, 1.0), 1.0 / num_actions)
  return LPSolution(
      value=float(c.ravel() @ res.x),
      constraint_values=d.reshape(num_constraints, -1) @ res.x,
      policy=policy,
      occupancy=q,
      multipliers=-np.asarray(res.ineqlin.marginals),
  )
