"""The inner solve's arguments (`solve_inner`): the problem's type and shapes, finite
costs, multipliers, thresholds and step, the box, and the warm start's shape."""

from __future__ import annotations

import chex

from ..checking import kernels
from ..errors import ArgumentError
from . import problem as problem_lib

WHERE = "solve_inner"


def solve_arguments(problem, multipliers, eta, warm, *, check: bool) -> None:
  """Refuses what `solve_inner` cannot solve, naming the argument: on the host when
  concrete, through `checkify` when traced and `check` (see `kernels`)."""
  if not isinstance(problem, problem_lib.InnerProblem):
    raise ArgumentError(
      "problem",
      f"expected an InnerProblem (e.g. InnerProblem.of_model or"
      f" InnerProblem.of_cmdp), got {type(problem).__name__}",
    )
  cost, constraint_costs = problem.cost, problem.constraint_costs
  thresholds, lower, upper = problem.thresholds, problem.lower, problem.upper
  chex.assert_rank(
    [cost, constraint_costs, lower, upper, thresholds, multipliers], [3, 4, 4, 4, 1, 1]
  )
  chex.assert_equal_shape([lower, upper])
  num_constraints = constraint_costs.shape[0]
  for name, x in (("thresholds", thresholds), ("multipliers", multipliers)):
    if x.shape != (num_constraints,):
      raise ArgumentError(
        name,
        f"expected shape ({num_constraints},) (one per constraint of"
        f" constraint_costs), got {x.shape}",
      )
  kernels.initial_state(problem.initial_state, cost.shape[1], WHERE, check=check)
  for name, x in (
    ("cost", cost),
    ("constraint_costs", constraint_costs),
    ("multipliers", multipliers),
  ):
    kernels.finite(name, x, WHERE, check=check, low=0.0)
  kernels.finite("thresholds", thresholds, WHERE, check=check)
  kernels.finite("eta", eta, WHERE, check=check, low=0.0, low_open=True)
  kernels.transition_set(problem.transitions, WHERE, check=check)
  if warm is not None:
    shape = (problem_lib.warm_vertices(num_constraints), cost.shape[0], cost.shape[1])
    if not isinstance(warm, problem_lib.WarmStart) or (
      warm.actions.shape,
      warm.values.shape,
    ) != (shape, shape):
      raise ArgumentError(
        "warm",
        f"expected a WarmStart with actions and values of shape {shape}"
        f" (InnerSolution.warm, or WarmStart.cold(..., num_constraints={num_constraints})),"
        f" got {warm!r:.200}",
      )
