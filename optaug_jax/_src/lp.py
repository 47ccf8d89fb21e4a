"""Exact CMDP optima by linear programming (HiGHS through scipy). Host side, never jitted."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.optimize
import scipy.sparse as sp

from .cmdp import CMDP
from .cmdp_checks import validate_cmdp
from .errors import ArgumentError
from .transition_set import TransitionSet


class LPSolution(NamedTuple):
  """Exact solution of the occupancy-measure LP of a CMDP."""

  value: float  # V^{pi*}(c, p)
  constraint_values: np.ndarray  # [I] V^{pi*}(d_i, p)
  policy: np.ndarray  # [H, S, A] eq. (retrieve-pi), uniform where unreached
  occupancy: np.ndarray  # [H, S, A]
  multipliers: np.ndarray  # [I] optimal dual variables lambda* >= 0 (= -dV*/d alpha)


def flow_constraints(
  kernel: TransitionSet, initial_state: int, *, horizon: int | None = None
) -> tuple[sp.csr_matrix, np.ndarray]:
  """Equalities `A_eq q = b_eq` of the occupancy polytope `Q(p)`, `q` flattened `[H, S, A]`.

  `sum_a q_1(s, a) = 1{s = s_1}` and `sum_a q_{h+1}(s', a) = sum_{s,a} p_h(s'|s,a) q_h(s,a)`.
  `kernel`: the known transitions `p`, a point `TransitionSet` (host arrays are fine):
  `[H, S, A, S']`, or slots `[H, S, A, N]` of its `next_states`; a step axis of length 1
  is the same at every step, for `horizon` steps. Built from the positive entries of `p`
  only, so its size is that of the model's support.
  """
  transitions = np.asarray(kernel.kernel)
  steps, num_states, num_actions, width = transitions.shape
  horizon = steps if horizon is None else horizon
  n = horizon * num_states * num_actions
  # sum_a q_h(s, a): row h * S + s, column (h, s, a).
  rows = [np.repeat(np.arange(horizon * num_states), num_actions)]
  cols = [np.arange(n)]
  vals = [np.ones(n)]
  if horizon > 1:
    p = np.broadcast_to(transitions, (horizon,) + transitions.shape[1:])[:-1]
    target = kernel.layout.targets((horizon,) + transitions.shape[1:])[:-1]
    h, s, a, k = np.nonzero(p)
    rows.append((h + 1) * num_states + target[h, s, a, k])
    cols.append((h * num_states + s) * num_actions + a)
    vals.append(-p[h, s, a, k])
  a_eq = sp.csr_matrix(
    (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
    shape=(horizon * num_states, n),
  )
  b_eq = np.zeros(horizon * num_states)
  b_eq[initial_state] = 1.0
  return a_eq, b_eq


# Above this many variables `solve_lp` runs HiGHS's interior-point method (with its
# crossover to a vertex) instead of its default simplex: on `gridworld(12)` (20,736
# variables) the dual simplex took 15.3 s and the interior point 1.8 s, optima within 5e-9
# of each other; below it the simplex is fast and exact to rounding.
IPM_MIN_VARIABLES = 20_000


def _method(num_variables: int) -> str:
  return "highs-ipm" if num_variables > IPM_MIN_VARIABLES else "highs"


# A least excess over the thresholds above this (in cost units) is infeasibility, not the
# solver's rounding (HiGHS's feasibility tolerance is 1e-7).
INFEASIBLE_EXCESS = 1e-6


def _shown(x: np.ndarray) -> str:
  return str(np.round(x, 6).tolist()) if x.size <= 8 else f"(an array of {x.size})"


def _least_excess(d: sp.spmatrix | np.ndarray, alpha, a_eq, b_eq) -> float:
  """`min_q max_i (D q - alpha)_i` over the occupancy measures (an LP in `(q, t)`): by how
  much the closest policy exceeds its thresholds (<= 0: feasible)."""
  num_constraints, num_variables = d.shape
  a_ub = sp.hstack([sp.csr_matrix(d), -sp.csr_matrix(np.ones((num_constraints, 1)))])
  a_eq = sp.hstack([sp.csr_matrix(a_eq), sp.csr_matrix((a_eq.shape[0], 1))])
  objective = np.zeros(num_variables + 1)
  objective[-1] = 1.0
  res = scipy.optimize.linprog(
    objective,
    A_ub=a_ub.tocsr(),
    b_ub=alpha,
    A_eq=a_eq.tocsr(),
    b_eq=b_eq,
    bounds=[(0, None)] * num_variables + [(None, None)],
    method="highs",
  )
  if res.status != 0:
    raise RuntimeError(f"HiGHS failed on the least-excess LP (status {res.status}): {res.message}")
  return float(res.fun)


def least_excess(cmdp: CMDP) -> float:
  """`min_pi max_i (V^pi_i - alpha_i)`: by how much the policy closest to meeting every
  constraint at once exceeds its thresholds (an LP over the occupancy measures, HiGHS).
  Negative: the thresholds leave that much room (the best slack any policy has); positive:
  they are jointly infeasible by that much; about 0: no policy is strictly feasible."""
  validate_cmdp(cmdp)
  p = np.asarray(cmdp.transitions, np.float64)
  if p.ndim != 4:
    raise ArgumentError(
      "transitions", f"least_excess takes one CMDP, got batch shape {p.shape[:-4]}"
    )
  next_states = None if cmdp.next_states is None else np.asarray(cmdp.next_states)
  d = np.asarray(cmdp.constraint_costs, np.float64)
  a_eq, b_eq = flow_constraints(TransitionSet.point(p, next_states), int(cmdp.initial_state))
  alpha = np.asarray(cmdp.thresholds, np.float64)
  return _least_excess(d.reshape(d.shape[0], -1), alpha, a_eq, b_eq)


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
  next_states = None if cmdp.next_states is None else np.asarray(cmdp.next_states)
  c = np.asarray(cmdp.cost, np.float64)
  d = np.asarray(cmdp.constraint_costs, np.float64)
  alpha = np.asarray(cmdp.thresholds, np.float64)
  if p.ndim != 4:
    raise ArgumentError("transitions", f"solve_lp takes one CMDP, got batch shape {p.shape[:-4]}")
  horizon, num_states, num_actions, _ = p.shape
  a_eq, b_eq = flow_constraints(TransitionSet.point(p, next_states), int(cmdp.initial_state))
  num_constraints = d.shape[0]
  res = scipy.optimize.linprog(
    c.ravel(),
    A_ub=sp.csr_matrix(d.reshape(num_constraints, -1)),
    b_ub=alpha,
    A_eq=a_eq,
    b_eq=b_eq,
    bounds=(0, None),
    method=_method(c.size),
  )
  if res.status != 0:  # infeasible (2), or a method that stopped without saying why
    excess = _least_excess(d.reshape(num_constraints, -1), alpha, a_eq, b_eq)
    if res.status == 2 or excess > INFEASIBLE_EXCESS:
      raise ArgumentError(
        "thresholds",
        "the CMDP is infeasible: no policy meets every constraint at once; the"
        f" policy closest to it exceeds its thresholds {_shown(alpha)} by {excess:.6g} in"
        " the worst constraint (raise them by at least that much, or see oj.safest_policy"
        " for the least constraint values)",
      )
    raise RuntimeError(f"HiGHS failed (status {res.status}): {res.message}")
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


def solve_occupancy_lp(
  transitions, cost, constraint_costs, thresholds, initial_state
) -> tuple[np.ndarray, bool]:
  """`min c . q  s.t.  D q <= alpha`, q an occupancy measure of `transitions` (HiGHS).

  Unlike `solve_lp`, takes any real costs (e.g. with bonuses) and reports infeasibility
  instead of raising: the episode problem of OptPess-LP on its empirical model.

  Returns:
    `(q [H, S, A], feasible)`; `q` is all zeros when infeasible.

  Raises:
    RuntimeError: if HiGHS fails (a status other than optimal or infeasible).
  """
  p = np.asarray(transitions, np.float64)
  c, d = np.asarray(cost, np.float64), np.asarray(constraint_costs, np.float64)
  a_eq, b_eq = flow_constraints(TransitionSet.point(p), int(initial_state), horizon=c.shape[0])
  res = scipy.optimize.linprog(
    c.ravel(),
    A_ub=d.reshape(d.shape[0], -1),
    b_ub=np.asarray(thresholds, np.float64),
    A_eq=a_eq,
    b_eq=b_eq,
    bounds=(0, None),
    method="highs",
  )
  if res.status == 2:
    return np.zeros(c.shape), False
  if res.status != 0:
    raise RuntimeError(f"HiGHS failed: {res.message}")
  return np.maximum(res.x, 0.0).reshape(c.shape), True


def extended_polytope(lower: np.ndarray, upper: np.ndarray, initial_state: int):
  """Sparse constraints of the extended polytope Z (paper's Appendix C), z flattened
  `[H, S, A, S']`: `(A_eq, b_eq, A_box, b_box)` with `z >= 0` left to variable bounds.

  Flow: `sum_{a,s'} z_1(s,a,s') = 1{s = s_1}`, `sum_{a,s'} z_h(s,a,s') = sum_{s'',a'}
  z_{h-1}(s'',a',s)`; box: `lower * sum_s'' z_h(s,a,s'') <= z_h(s,a,s') <= upper * (same)`.
  """
  horizon, num_states, num_actions, _ = lower.shape
  n = horizon * num_states * num_actions * num_states
  idx = np.arange(n).reshape(horizon, num_states, num_actions, num_states)
  # Outflow of (h, s): all z_h(s, ., .).
  rows_out = np.repeat(np.arange(horizon * num_states), num_actions * num_states)
  cols_out = idx.reshape(horizon * num_states, -1).ravel()
  # Inflow into (h, s) for h >= 1: z_{h-1}(., ., s).
  # (An explicit column count: for H = 1 the block is empty and -1 cannot be inferred.)
  inflow = np.moveaxis(idx[:-1], -1, 1).reshape(
    (horizon - 1) * num_states, num_states * num_actions
  )
  rows_in = np.repeat(np.arange(num_states, horizon * num_states), num_states * num_actions)
  a_eq = sp.csr_matrix(
    (
      np.concatenate([np.ones(cols_out.size), -np.ones(inflow.size)]),
      (np.concatenate([rows_out, rows_in]), np.concatenate([cols_out, inflow.ravel()])),
    ),
    shape=(horizon * num_states, n),
  )
  b_eq = np.zeros(horizon * num_states)
  b_eq[initial_state] = 1.0
  # Box rows, one per (h, s, a, s') and side: z(s') - u(s') * sum_s'' z(s'') <= 0, etc.
  m = n
  row = np.repeat(np.arange(m), num_states)
  col = np.repeat(idx.reshape(-1, num_states), num_states, axis=0).ravel()
  own = np.tile(np.eye(num_states).ravel(), horizon * num_states * num_actions)
  up = np.repeat(upper.ravel(), num_states)
  lo = np.repeat(lower.ravel(), num_states)
  a_box = sp.vstack(
    [
      sp.csr_matrix((own - up, (row, col)), shape=(m, n)),
      sp.csr_matrix((lo - own, (row, col)), shape=(m, n)),
    ]
  ).tocsr()
  return a_eq, b_eq, a_box, np.zeros(2 * m)


# Rounding slack of `repair_box`, in units of the input dtype's machine epsilon: a point
# row of float32 estimates sums to 1 within about one eps; box ends clipped from p +- r
# within a few.
BOX_TOLERANCE_EPS = 8.0


def box_tolerance(*arrays) -> float:
  """`BOX_TOLERANCE_EPS` machine epsilons of the coarsest floating dtype among `arrays`
  (float64's for non-float inputs)."""
  eps = [
    np.finfo(np.asarray(a).dtype).eps
    for a in arrays
    if np.issubdtype(np.asarray(a).dtype, np.floating)
  ]
  return float(BOX_TOLERANCE_EPS * max(eps, default=np.finfo(np.float64).eps))


def repair_box(lower, upper, *, tol: float | None = None) -> tuple[np.ndarray, np.ndarray]:
  """The transition box in float64, its rows that are empty only by rounding made feasible.

  A row `(h, s, a)` holds a distribution when `lower <= upper` and `sum lower <= 1 <= sum
  upper`. Rounded estimates break this by a few ulps: with no radius (`bonus_scale=0`) a
  row is the point `p-bar`, whose float32 entries sum to `1 +- 6e-8`, and the extended LP
  (whose box rows force `z(s') = p-bar(s') sum z`) has then no flow through any pair. Within
  `tol`: crossed ends (`lower > upper`) meet at their midpoint; a row with `sum lower > 1`
  is divided (both ends) by `sum lower`, a row with `sum upper < 1` by `sum upper` (a point
  row `p` becomes the point `p / sum p`, as renormalised in float64). Rows empty beyond
  `tol` are returned unchanged: no flow can pass through them in the LP.

  Args:
    lower: `[..., S']` the box's lower ends.
    upper: `[..., S']` its upper ends.
    tol: the rounding slack; `None`: `box_tolerance(lower, upper)` (8 eps of their dtype:
      about 1e-6 for float32, 2e-15 for float64).

  Returns:
    `(lower, upper)`, float64 copies.
  """
  tol = box_tolerance(lower, upper) if tol is None else float(tol)
  lo = np.array(lower, np.float64)
  up = np.array(upper, np.float64)
  crossed = (lo > up) & (lo - up <= tol)
  mid = 0.5 * (lo + up)
  lo, up = np.where(crossed, mid, lo), np.where(crossed, mid, up)
  # Both ends divided by the offending sum: lower <= upper is kept, that sum becomes 1, and
  # the other side stays valid (sum upper >= sum lower); a point row stays a point.
  low_sum = lo.sum(-1, keepdims=True)
  over = (low_sum > 1.0) & (low_sum <= 1.0 + tol)
  scale = np.where(over, low_sum, 1.0)
  lo, up = lo / scale, up / scale
  up_sum = up.sum(-1, keepdims=True)
  under = (up_sum < 1.0) & (up_sum >= 1.0 - tol) & (up_sum > 0.0)
  scale = np.where(under, up_sum, 1.0)
  lo, up = lo / scale, up / scale
  return lo, up


def solve_extended_lp(
  cost,
  constraint_costs,
  lower,
  upper,
  initial_state,
  thresholds,
  *,
  fallback: bool = True,
  box_tol: float | None = None,
) -> tuple[np.ndarray, bool]:
  """OptCMDP's episode problem: `min c~ . q  s.t.  D~ q <= alpha`, q the occupancy of some
  `z in Z` (the extended LP of Efroni et al. 2020), by HiGHS.

  The box is first passed through `repair_box` (rows empty only by rounding, such as the
  float32 point rows of `bonus_scale=0`, are made feasible in float64). If the optimistic
  problem is infeasible (possible outside the success event), falls back to the safest
  occupancy `argmin sum_i d~_i . q` over Z (`fallback=True`) or returns zeros.

  Args:
    cost: `[H, S, A]`.
    constraint_costs: `[I, H, S, A]`.
    lower: `[H, S, A, S']`.
    upper: `[H, S, A, S']`.
    initial_state: `s_1`.
    thresholds: `[I]`.
    fallback: solve the safest-occupancy LP when the problem is infeasible.
    box_tol: `repair_box`'s tolerance; `None`: 8 eps of the box's dtype.

  Returns:
    `(q [H, S, A], feasible)`; `q` is zeros when infeasible and `fallback=False`.

  Raises:
    RuntimeError: if HiGHS fails (a status other than optimal or infeasible), or the
      fallback LP has no solution (a box empty beyond `box_tol` on every path).
  """
  cost, d = np.asarray(cost, np.float64), np.asarray(constraint_costs, np.float64)
  lower, upper = repair_box(lower, upper, tol=box_tol)
  horizon, num_states, num_actions = cost.shape
  # A stationary box (step axis of length 1) is the same at every step.
  lower = np.broadcast_to(lower, (horizon,) + lower.shape[1:])
  upper = np.broadcast_to(upper, (horizon,) + upper.shape[1:])
  a_eq, b_eq, a_box, b_box = extended_polytope(lower, upper, int(initial_state))
  expand = lambda x: np.repeat(x.reshape(-1), num_states)  # [H,S,A] -> z-space
  a_con = sp.csr_matrix(np.stack([expand(di) for di in d]))
  res = scipy.optimize.linprog(
    expand(cost),
    A_ub=sp.vstack([a_box, a_con]).tocsr(),
    b_ub=np.concatenate([b_box, np.asarray(thresholds, np.float64)]),
    A_eq=a_eq,
    b_eq=b_eq,
    bounds=(0, None),
    method="highs",
  )
  if res.status not in (0, 2):
    raise RuntimeError(f"HiGHS failed on the extended LP (status {res.status}): {res.message}")
  feasible = res.status == 0
  if not feasible:
    if not fallback:
      return np.zeros(cost.shape), False
    res = scipy.optimize.linprog(
      expand(d.sum(0)),
      A_ub=a_box,
      b_ub=b_box,
      A_eq=a_eq,
      b_eq=b_eq,
      bounds=(0, None),
      method="highs",
    )
    if res.status != 0:
      raise RuntimeError(
        f"HiGHS failed on the extended polytope (status {res.status}): {res.message}"
      )
  z = np.maximum(res.x, 0.0).reshape(horizon, num_states, num_actions, num_states)
  return z.sum(-1), feasible


def solve_inner_reference(
  cost,
  constraint_costs,
  lower,
  upper,
  initial_state,
  thresholds,
  multipliers,
  eta,
  *,
  tol: float = 1e-10,
) -> tuple[float, np.ndarray]:
  """The inner problem eq. (primal-step) in z-space by cvxpy and Clarabel (host side).

  A reference for `solve_inner` (experiments, checks), not a solver for agents. Needs the
  `reference` extra (`pip install "optaug-jax[reference]"`: cvxpy and clarabel).

  Returns:
    `(optimal value, q [H, S, A])`, in float64.
  """
  try:
    import cvxpy as cp
  except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
      'solve_inner_reference needs cvxpy and clarabel: pip install "optaug-jax[reference]"'
    ) from e
  cost = np.asarray(cost, np.float64)
  d = np.asarray(constraint_costs, np.float64)
  horizon, num_states, num_actions = cost.shape
  a_eq, b_eq, a_box, b_box = extended_polytope(
    np.asarray(lower, np.float64), np.asarray(upper, np.float64), int(initial_state)
  )
  n = horizon * num_states * num_actions
  z = cp.Variable(n * num_states, nonneg=True)
  to_q = sp.kron(sp.eye(n), np.ones((1, num_states)), format="csr")  # q = sum_s' z
  q = to_q @ z
  eta = float(eta)
  # (eta / 2) ||[lambda / eta + D q - alpha]_+||^2: no eta^2 in the data.
  shifted = cp.pos(
    np.asarray(multipliers, np.float64) / eta
    + d.reshape(d.shape[0], -1) @ q
    - np.asarray(thresholds, np.float64)
  )
  objective = cost.ravel() @ q + 0.5 * eta * cp.sum_squares(shifted)
  problem = cp.Problem(cp.Minimize(objective), [a_eq @ z == b_eq, a_box @ z <= b_box])
  problem.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
  if problem.status not in ("optimal", "optimal_inaccurate"):
    raise RuntimeError(f"cvxpy/Clarabel: status {problem.status}")
  return float(problem.value), np.asarray(to_q @ z.value).reshape(horizon, num_states, num_actions)
