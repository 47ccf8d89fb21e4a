"""`solve_inner`: one inner problem, eq. (primal-step), by any inner solver.

Checks the arguments, runs the solver (`exact` or `frank_wolfe`, or any callable with
their signature, see `InnerSolver`), then completes what every solver shares: the
objective at the returned point, the certificate's verdict, the policy retrieved from the
occupancy (eq. (retrieve-pi)) with the choice at unreached states, and the derivatives of
the optimal value by the envelope theorem.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
from jax import lax

from .. import numerics, planning
from ..checking import arguments
from ..multiplier_updates import dual_step
from . import checks as inner_checks
from . import problem as problem_lib
from .exact import exact

# How derivatives flow through a solve (`solve_inner(gradient=...)`).
GRADIENTS = ("envelope", "unrolled", None)

# The policy where q_h(s) = 0 (`solve_inner(unreached=...)`).
UNREACHED = ("greedy", "uniform")


class InnerSolver(Protocol):
  """What `solve_inner(solver=)` and the agents' `inner=` accept: `exact(...)`,
  `frank_wolfe(...)`, or any callable with this signature (hashable, as it is static)."""

  def __call__(
    self,
    problem: problem_lib.InnerProblem,
    multipliers: jax.Array,
    eta,
    *,
    with_transitions: bool,
    fixed_length: bool,
  ) -> problem_lib.SolverResult:
    """The problem's box, layout and fill are its `TransitionSet` (`problem.lmo(reward)` is
    the extended DP). `fixed_length`: run the whole iteration budget (a reverse-differentiable
    `lax.fori_loop`) rather than stopping early; the numbers must not depend on it.

    A solver that can start from the last solve's hint also takes `warm:
    WarmStart | None` (keyword) and returns the next hint in `SolverResult.warm`;
    `solve_inner` passes `warm=` only when its caller gives one."""
    ...


@jax.named_scope("inner_solve")
def solve_inner(
  problem: problem_lib.InnerProblem,
  multipliers: jax.Array,
  eta: jax.typing.ArrayLike,
  *,
  solver: InnerSolver = exact(),
  gradient: str | None = "envelope",
  unreached: str = "greedy",
  with_transitions: bool = True,
  check: bool = False,
  warm: problem_lib.WarmStart | None = None,
) -> problem_lib.InnerSolution:
  """Solves the paper's eq. (primal-step), the inner problem of OptAug-CMDP.

  Minimises `c . q + ||[lambda + eta (D q - alpha)]_+||^2 / (2 eta)` over the occupancies
  of all policies and all transitions in the problem's box, which every solver reaches
  through the extended DP (`problem.lmo`). Call it under `jax.jit`, as the agents do.

  Args:
    problem: the `InnerProblem` (costs, thresholds, box, initial state; dense or sparse).
    multipliers: `[I]` multipliers `lambda >= 0`.
    eta: positive scalar (may be traced).
    solver: `oj.inner.exact()` (default), `oj.inner.frank_wolfe(...)` (InnerOpt-FW), or
      any `InnerSolver`.
    gradient: how derivatives flow (the values are the same in every mode):
      `"envelope"` (default): Danskin's theorem at the returned point; only `objective`
        carries a derivative, the optimal value's: `d/dc = q*`, `d/dD_i = lambda+_i q*`,
        `d/dalpha = -lambda+`, `d/dlambda = lambda+ / eta`, `d/deta = -||lambda+||^2 /
        (2 eta^2) + lambda+ . (D q* - alpha) / eta`, `lambda+ = [lambda + eta (D q* -
        alpha)]_+`, and for the box that of the linearised problem at `q*` (each row's
        fill in its own bounds, weighted by `q*`). One more DP.
      `"unrolled"`: reverse mode through the iterations (their whole budget is run).
      `None`: every output is a constant; what agents use.
      The guide "Gradients and sensitivities" says more.
    unreached: the policy at the `(h, s)` that `q` never reaches (eq. (retrieve-pi) is
      0/0 there): `"greedy"` (default), the extended DP's action on the gradient at the
      solution `c + D^T lambda+` (the solver's last DP where it was there, else one
      more); `"uniform"`.
    with_transitions: also recover the optimistic transitions (eq. (retrieve-p)).
    check: also check traced arguments through `checkify` (wrap the outer function in
      `oj.checked`); concrete arguments are always checked on the host.
    warm: `None` (default: a cold start) or the last solve's `InnerSolution.warm`: the
      solve starts where its vertices, re-filled in this box, put `mu*`; the problem and
      the certificate do not depend on it.

  Returns:
    `InnerSolution`; `objective - optimum <= gap`.
  """
  _check_options(solver, gradient, unreached, eta)
  inner_checks.solve_arguments(problem, multipliers, eta, warm, check=check)
  cost = problem.cost
  if gradient == "unrolled":
    inputs = (problem, multipliers, eta)
  else:
    inputs = lax.stop_gradient((problem, multipliers, eta))
  hint: dict[str, Any] = {} if warm is None else {"warm": lax.stop_gradient(warm)}
  result = solver(
    *inputs, with_transitions=with_transitions, fixed_length=gradient == "unrolled", **hint
  )
  if gradient is None:
    problem, multipliers, eta = inputs
  q = result.occupancy
  objective = problem_lib.objective(problem, q, multipliers, eta)
  objective, fallback, extra_dp = _at_solution(
    problem, q, multipliers, eta, objective, result.lmo, gradient, unreached
  )
  certified = _valid_inputs(problem, multipliers, eta) & (
    result.gap <= problem_lib.certified_tolerance(cost.dtype) * (1.0 + jnp.abs(objective))
  )
  return problem_lib.InnerSolution(
    occupancy=q,
    policy=planning.policy_from_occupancy(q, fallback),  # integer actions: no gradient
    transitions=result.transitions,
    objective=objective,
    gap=result.gap,
    num_iters=result.num_iters,
    dp_calls=result.dp_calls + extra_dp,
    certified=certified,
    warm=_cold_hint(problem) if result.warm is None else result.warm,
  )


def _check_options(solver, gradient, unreached, eta) -> None:
  arguments.check_inner_solver("solver", solver)
  arguments.check_choice("gradient", gradient, GRADIENTS)
  arguments.check_choice("unreached", unreached, UNREACHED)
  arguments.check_positive("eta", eta, allow_none=False)


def _cold_hint(problem: problem_lib.InnerProblem) -> problem_lib.WarmStart:
  """The hint of a solver that leaves none (a cold start for the next solve)."""
  horizon, num_states = problem.cost.shape[:2]
  num_constraints = problem.thresholds.shape[0]
  return problem_lib.WarmStart.cold(
    horizon, num_states, dtype=problem.cost.dtype, num_constraints=num_constraints
  )


def _at_solution(problem, q, multipliers, eta, objective, lmo, gradient, unreached):
  """What the solution's gradient gives: `(objective, fallback, extra DP)`, the objective
  with the box's envelope term (`gradient="envelope"`), the greedy actions at unreached
  states (`unreached="greedy"`: the solver's last DP where it was at that gradient,
  `lmo`, else one more DP at it) and whether that DP was taken."""
  cost = problem.cost
  fallback = None
  reuse = lmo is not None and gradient != "envelope"  # the solver's last DP
  if reuse and unreached == "greedy":
    fallback = jax.nn.one_hot(lmo.actions, cost.shape[-1], dtype=q.dtype)
  extra_dp = gradient == "envelope" or (unreached == "greedy" and not reuse)
  if extra_dp:
    # The gradient at q*: the linearised problem there has the same optimal KKT
    # multipliers (box sensitivity), and its extended DP acts at every (h, s).
    lam_plus = dual_step(q, problem.constraint_costs, problem.thresholds, multipliers, eta)
    grad = lax.stop_gradient(
      cost + numerics.einsum("i,ihsa->hsa", lam_plus, problem.constraint_costs)
    )
    linear = problem.lmo(grad)
    if gradient == "envelope":
      # The box's derivative: each row's fill differentiated in its bounds at the DP's
      # values, weighted by q* (not by the DP's vertex, which is one of several tied ones
      # wherever q* mixes vertices: the derivative must not depend on the tie-break).
      box_term = planning.box_weighted_expectation(
        lax.stop_gradient(q), lax.stop_gradient(linear.next_values), problem.transitions
      )
      objective = objective + (box_term - lax.stop_gradient(box_term))
    if unreached == "greedy":
      fallback = jax.nn.one_hot(linear.actions, cost.shape[-1], dtype=q.dtype)
  return objective, fallback, extra_dp


def _valid_inputs(problem: problem_lib.InnerProblem, multipliers, eta) -> jax.Array:
  """Whether the solve's inputs are what its certificate assumes (finite, non-negative
  costs and multipliers, finite thresholds, a positive finite eta): a solve of invalid
  inputs is never reported certified, checked or not."""
  nonnegative = lambda x: jnp.all(jnp.isfinite(x) & (x >= 0))
  return (
    nonnegative(problem.cost)
    & nonnegative(problem.constraint_costs)
    & nonnegative(multipliers)
    & jnp.all(jnp.isfinite(problem.thresholds))
    & jnp.isfinite(eta)
    & (eta > 0)
  )
