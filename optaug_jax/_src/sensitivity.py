"""Sensitivities of the inner optimum (paper's eq. (primal-step)) in one call."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import inner as inner_lib
from .checking import arguments
from .inner.exact import exact
from .multiplier_updates import dual_step


class InnerSensitivities(NamedTuple):
  """The inner optimum `f*` and its derivatives at the returned point."""

  value: jax.Array  # [] f* (the augmented Lagrangian at the returned point)
  next_multipliers: jax.Array  # [I] lambda+ = [lambda + eta (D q* - alpha)]_+
  occupancy: jax.Array  # [H, S, A] q*
  gap: jax.Array  # [] accuracy certificate of value (`InnerSolution.gap`)
  thresholds: jax.Array  # [I] d f*/d alpha (= -lambda+)
  multipliers: jax.Array  # [I] d f*/d lambda (= lambda+ / eta)
  eta: jax.Array  # [] d f*/d eta
  cost: jax.Array  # [H, S, A] d f*/d c (= q*)
  constraint_costs: jax.Array  # [I, H, S, A] d f*/d D (= lambda+_i q*)
  lower: jax.Array  # [H, S, A, S'] d f*/d lower
  upper: jax.Array  # [H, S, A, S'] d f*/d upper


def inner_sensitivities(
  problem: inner_lib.InnerProblem,
  multipliers: jax.Array,
  eta: jax.typing.ArrayLike,
  *,
  solver: inner_lib.InnerSolver = exact(),
  gradient: str = "envelope",
) -> InnerSensitivities:
  """Solves the inner problem and differentiates its value in one `jax.value_and_grad`.

  Jittable and vmappable (e.g. over problems, thresholds or eta); call it under `jax.jit`
  (unjitted, the solve runs op by op from Python, as `solve_inner`'s docstring says). With
  `gradient="envelope"` (default) the derivatives are those of the optimal value by
  Danskin's theorem (see `solve_inner`); with `"unrolled"` they are those of the solver's
  output (its loops then run their whole budget).

  Args:
    problem: as in `solve_inner` (a dense `problem`).
    multipliers: as in `solve_inner`.
    eta: as in `solve_inner`.
    solver: as in `solve_inner`.
    gradient: `"envelope"` or `"unrolled"`, as in `solve_inner`.

  Returns:
    `InnerSensitivities`.
  """
  arguments.check_choice("gradient", gradient, ("envelope", "unrolled"))
  eta = jnp.asarray(eta, jnp.result_type(problem.cost.dtype, jnp.asarray(eta).dtype))

  def value_fn(c, d, lo, up, alpha, lam, et):
    inputs = problem._replace(cost=c, constraint_costs=d, lower=lo, upper=up, thresholds=alpha)
    sol = inner_lib.solve_inner(inputs, lam, et, solver=solver, gradient=gradient)
    return sol.objective, sol

  (value, sol), grads = jax.value_and_grad(value_fn, argnums=tuple(range(7)), has_aux=True)(
    problem.cost,
    problem.constraint_costs,
    problem.lower,
    problem.upper,
    problem.thresholds,
    multipliers,
    eta,
  )
  d_cost, d_constraint, d_lower, d_upper, d_alpha, d_lambda, d_eta = grads
  next_multipliers = dual_step(
    sol.occupancy, problem.constraint_costs, problem.thresholds, multipliers, eta
  )
  return InnerSensitivities(
    value=value,
    next_multipliers=next_multipliers,
    occupancy=sol.occupancy,
    gap=sol.gap,
    thresholds=d_alpha,
    multipliers=d_lambda,
    eta=d_eta,
    cost=d_cost,
    constraint_costs=d_constraint,
    lower=d_lower,
    upper=d_upper,
  )
