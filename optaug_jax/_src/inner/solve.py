"""`solve_inner`: one inner problem, eq. (primal-step), by any inner solver.

Checks the arguments, runs the solver (`exact` or `frank_wolfe`, or any callable with
their signature, see `InnerSolver`), then completes what every solver shares: the
objective at the returned point, the certificate's verdict, the policy retrieved from the
occupancy (eq. (retrieve-pi)) with the choice at unreached states, and the derivatives of
the optimal value by the envelope theorem.
"""

from __future__ import annotations

from typing import Protocol

import jax
import jax.numpy as jnp
from jax import lax

from .. import planning
from ..checking import arguments
from ..checking import inner as inner_checks
from ..multiplier_updates import dual_step
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

  Minimises `c . q + ||[lambda + eta (D q - alpha)]_+||^2 / (2 eta)` over the occupancy
  measures of all policies and all transitions in the box `[lower, upper]` (the problem's
  `TransitionSet`, with its layout and fill). Every solver reaches that set only through
  its linear minimisation oracle, the extended DP (`problem.lmo`).

  Call it under `jax.jit` (as the agents do): unjitted, each DP and each step of the
  solver's loops is dispatched op by op from Python (a 200-state CMDP took 93 s a solve),
  and the eager calls compile many small programs (see the README on `vm.max_map_count`).

  Args:
    problem: the `InnerProblem` (costs, thresholds, box, initial state; dense or sparse).
    multipliers: `[I]` multipliers `lambda >= 0`.
    eta: positive scalar (may be traced).
    solver: `oj.inner.exact()` (default: exact, with a duality-gap certificate) or
      `oj.inner.frank_wolfe(...)` (the paper's Algorithm InnerOpt-FW), or any
      `InnerSolver`.
    gradient: how derivatives flow (the values are the same in every mode):
      `"envelope"` (default): Danskin's theorem at the returned point. Only `objective`
        carries a derivative, that of the optimal value: `d/dc = q*`,
        `d/dD_i = lambda+_i q*`, `d/dalpha = -lambda+`, `d/dlambda = lambda+ / eta`,
        `d/deta = -||lambda+||^2 / (2 eta^2) + lambda+ . (D q* - alpha) / eta` with
        `lambda+ = [lambda + eta (D q* - alpha)]_+`; for the box, that of the Lagrangian
        of `min_{q in Q(box)} <grad f(q*), q>` at `q*` and the DP's values (same KKT
        multipliers): each row's fill differentiated in its own bounds, weighted by `q*`
        (`planning.box_weighted_expectation`), whichever tied vertex the DP returns. The
        iterations are not differentiated (no memory for them); the other outputs are
        constants. Exact at an exact optimum; the error is of the order of the solver's
        accuracy. Costs one extended DP at the solution (shared with `unreached="greedy"`).
      `"unrolled"`: reverse mode through the iterations: the derivative of the solver's
        output. Its loops then run their whole budget (`lax.fori_loop`).
      `None`: not differentiated (every output is a constant); what agents use.
    unreached: the policy at the `(h, s)` that `q` never reaches, where eq. (retrieve-pi) is
      0/0 and any choice leaves `q` (and the objective) unchanged. `"greedy"` (default):
      the action of the extended DP on the gradient at the solution, `c + D^T lambda+`
      (the Lagrangian-optimistic action, which is what the dual-based agents play
      everywhere; one more DP, unless the solver's last DP was at that gradient to its
      accuracy, `SolverResult.lmo`, as the I = 1 exact search's is, and `gradient` is not
      `"envelope"`, which needs its own); the true dynamics reach states the optimistic
      plan does not, and there a uniform policy random-walks. `"uniform"`: the uniform policy.
    with_transitions: also recover the optimistic transitions (eq. (retrieve-p)); agents
      that only need the policy pass `False` (then `transitions` is `None`).
    check: also check traced arguments (an empty box, an initial state out of range,
      non-finite or negative costs and multipliers, non-finite thresholds, an eta that is
      not positive and finite) through `checkify`; wrap the outer function in `oj.checked`
      to get a `ValueError`. Concrete (eager) arguments are always checked on the host.
    warm: `None` (default: a cold start) or the `WarmStart` the last solve returned
      (`InnerSolution.warm`): the exact solve then starts where the last solve's
      vertices (two for I = 1, `I + 1` for I >= 2), re-evaluated in this box, put `mu*`
      (a policy evaluation of a DP's `1/A` each; in an agent, often the only DP then
      needed is the one that proves it). The problem solved and the certificate do not
      depend on it.

  Returns:
    `InnerSolution`; `objective - optimum <= gap`.
  """
  arguments.check_inner_solver("solver", solver)
  arguments.check_choice("gradient", gradient, GRADIENTS)
  arguments.check_choice("unreached", unreached, UNREACHED)
  arguments.check_positive("eta", eta, allow_none=False)
  inner_checks.solve_arguments(problem, multipliers, eta, warm, check=check)
  cost, constraint_costs, thresholds = problem.cost, problem.constraint_costs, problem.thresholds
  if gradient == "unrolled":
    inputs = (problem, multipliers, eta)
  else:
    inputs = lax.stop_gradient((problem, multipliers, eta))
  horizon, num_states = cost.shape[0], cost.shape[1]
  if warm is None:
    result = solver(*inputs, with_transitions=with_transitions, fixed_length=gradient == "unrolled")
  else:
    result = solver(
      *inputs,
      with_transitions=with_transitions,
      fixed_length=gradient == "unrolled",
      warm=lax.stop_gradient(warm),  # type: ignore[call-arg]
    )
  if gradient is None:
    problem, multipliers, eta = inputs
  q = result.occupancy
  objective = problem_lib.objective(problem, q, multipliers, eta)
  fallback = None
  reuse = result.lmo is not None and gradient != "envelope"  # the solver's last DP
  if reuse and unreached == "greedy":
    fallback = jax.nn.one_hot(result.lmo.actions, cost.shape[-1], dtype=q.dtype)
  if gradient == "envelope" or (unreached == "greedy" and not reuse):
    # The gradient at q*: the linearised problem there has the same optimal KKT
    # multipliers (box sensitivity), and its extended DP acts at every (h, s).
    grad = lax.stop_gradient(
      cost
      + jnp.einsum(
        "i,ihsa->hsa",
        dual_step(q, constraint_costs, thresholds, multipliers, eta),
        constraint_costs,
      )
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
  return problem_lib.InnerSolution(
    occupancy=q,
    policy=planning.policy_from_occupancy(q, fallback),  # integer actions: no gradient
    transitions=result.transitions,
    objective=objective,
    gap=result.gap,
    num_iters=result.num_iters,
    dp_calls=result.dp_calls + (gradient == "envelope" or (unreached == "greedy" and not reuse)),
    certified=_valid_inputs(problem, multipliers, eta)
    & (result.gap <= problem_lib.certified_tolerance(cost.dtype) * (1.0 + jnp.abs(objective))),
    warm=problem_lib.WarmStart.cold(
      horizon, num_states, dtype=cost.dtype, num_constraints=thresholds.shape[0]
    )
    if result.warm is None
    else result.warm,
  )


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
