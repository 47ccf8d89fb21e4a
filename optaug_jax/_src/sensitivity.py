"""Sensitivities of the inner optimum (paper's eq. (primal-step)) in one call."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import inner


class InnerSensitivities(NamedTuple):
  """The inner optimum `f*` and its derivatives at the returned point."""

  value: jax.Array  # [] f* (the augmented Lagrangian at the returned point)
  next_multipliers: jax.Array  # [I] lambda+ = [lambda + eta (D q* - alpha)]_+
  occupancy: jax.Array  # [H, S, A] q*
  fw_gap: jax.Array  # [] accuracy certificate of value
  thresholds: jax.Array  # [I] d f*/d alpha (= -lambda+)
  multipliers: jax.Array  # [I] d f*/d lambda (= lambda+ / eta)
  eta: jax.Array  # [] d f*/d eta
  cost: jax.Array  # [H, S, A] d f*/d c (= q*)
  constraint_costs: jax.Array  # [I, H, S, A] d f*/d D (= lambda+_i q*)
  lower: jax.Array  # [H, S, A, S'] d f*/d lower
  upper: jax.Array  # [H, S, A, S'] d f*/d upper


def inner_sensitivities(
    cost: jax.Array,
    constraint_costs: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
    initial_state: jax.typing.ArrayLike,
    thresholds: jax.Array,
    multipliers: jax.Array,
    eta: jax.typing.ArrayLike,
    *,
    num_iters: int | None = None,
    step_rule: str = "linesearch",
    gradient: str = "envelope",
    tol: float | None = None,
    method: str = "dual",
) -> InnerSensitivities:
  """Solves the inner problem and differentiates its value in one `jax.value_and_grad`.

  Jittable and vmappable (e.g. over problems, thresholds or eta). With
  `gradient="envelope"` (default) the derivatives are those of the optimal value by
  Danskin's theorem (see `solve_inner`); with `"unrolled"` they are those of the T-step
  Frank-Wolfe output (requires `tol=None`).

  Args:
    cost, constraint_costs, lower, upper, initial_state, thresholds, multipliers, eta:
      as in `solve_inner`.
    num_iters, step_rule, gradient, tol, method: as in `solve_inner`.

  Returns:
    `InnerSensitivities`.
  """
  if gradient == "unrolled" and tol is not None:
    raise ValueError("tol: early stopping (lax.while_loop) cannot be reverse-differentiated;"
                     " use gradient='envelope' or tol=None")
  eta = jnp.asarray(eta, jnp.result_type(cost.dtype, jnp.asarray(eta).dtype))

  def value_fn(c, d, lo, up, alpha, lam, et):
    sol = inner.solve_inner(c, d, lo, up, initial_state, alpha, lam, et, num_iters=num_iters,
                            step_rule=step_rule, tol=tol, gradient=gradient, method=method)
    return sol.objective, sol

  (value, sol), grads = jax.value_and_grad(value_fn, argnums=tuple(range(7)), has_aux=True)(
      cost, constraint_costs, lower, upper, thresholds, multipliers, eta)
  d_cost, d_constraint, d_lower, d_upper, d_alpha, d_lambda, d_eta = grads
  next_multipliers = inner.dual_step(
      sol.occupancy, constraint_costs, thresholds, multipliers, eta)
  return InnerSensitivities(
      value=value, next_multipliers=next_multipliers, occupancy=sol.occupancy,
      fw_gap=sol.fw_gap, thresholds=d_alpha, multipliers=d_lambda, eta=d_eta, cost=d_cost,
      constraint_costs=d_constraint, lower=d_lower, upper=d_upper)
