"""The optimisation half of the story: ALM vs dual descent on a KNOWN CMDP.

No estimation error: the transition box is the point `{p}` and the costs are exact, so what
remains is the behaviour of the outer method. The augmented Lagrangian method (paper's
eqs. (alm1)-(alm2)) converges in the last iterate; dual projected descent (eqs.
(pgd1)-(pgd2)) converges only on average, its iterates oscillate.

Both are `lax.scan`s over a static number of outer iterations, jittable, vmappable, and
differentiable end to end with respect to the CMDP's costs, thresholds and the step size
(through the unrolled Frank-Wolfe loop, or by the envelope theorem at each inner optimum).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from . import inner as inner_lib
from . import numerics
from .agents import base
from .checking import arguments
from .cmdp import CMDP
from .inner.exact import exact
from .multiplier_updates import dual_step


class KnownModelLog(NamedTuple):
  """Per outer iteration n (stacked over N)."""

  cost_value: jax.Array  # [N] V^{pi_n}(c, p) = c . q_n
  constraint_values: jax.Array  # [N, I] V^{pi_n}(d_i, p) = D q_n
  multipliers: jax.Array  # [N, I] lambda_{n+1}
  inner_gap: jax.Array  # [N] certificate of the inner solve (`InnerSolution.gap`; 0 for dual
  #                       descent)


def _values(cmdp: CMDP, q):
  return jnp.sum(cmdp.cost * q), numerics.einsum("ihsa,hsa->i", cmdp.constraint_costs, q)


def alm_known_model(
  cmdp: CMDP,
  eta: base.Schedule,
  *,
  num_iters: int,
  inner: inner_lib.InnerSolver = exact(),
  gradient: str | None = "unrolled",
) -> KnownModelLog:
  """The augmented Lagrangian method on the exact CMDP (inner problems by `solve_inner`).

  `q_n = argmin_q c.q + ||[lambda_n + eta_n (D q - alpha)]_+||^2 / (2 eta_n)` over `Q(p)`,
  `lambda_{n+1} = [lambda_n + eta_n (D q_n - alpha)]_+`, `lambda_0 = 0`.

  Args:
    cmdp: an unbatched `CMDP`.
    eta: a positive scalar (may be traced, e.g. differentiated) or a callable
      `n -> eta_n`.
    num_iters: outer iterations N (static).
    inner: the inner solver (static; default `oj.inner.exact()`, see `solve_inner`).
    gradient: `"unrolled"` (default: derivatives through every inner solve's iterations,
      which then run their whole budget), `"envelope"` or `None`, see `solve_inner`. With
      `"envelope"` the inner solutions carry no derivative; the multipliers still depend on
      the inputs through the dual step.

  Returns:
    `KnownModelLog`.
  """
  arguments.check_inner_solver("inner", inner)
  eta_fn = base.as_schedule(eta)
  problem = inner_lib.InnerProblem.of_cmdp(cmdp)
  dtype = cmdp.cost.dtype

  def step(multipliers, n):
    eta_n = jnp.asarray(eta_fn(n), dtype)
    sol = inner_lib.solve_inner(
      problem, multipliers, eta_n, solver=inner, gradient=gradient, with_transitions=False
    )
    next_multipliers = dual_step(
      sol.occupancy, cmdp.constraint_costs, cmdp.thresholds, multipliers, eta_n
    )
    cost_value, constraint_values = _values(cmdp, sol.occupancy)
    return next_multipliers, KnownModelLog(cost_value, constraint_values, next_multipliers, sol.gap)

  lam0 = jnp.zeros(cmdp.thresholds.shape, dtype)
  _, log = lax.scan(step, lam0, jnp.arange(num_iters))
  return log


def dual_descent_known_model(cmdp: CMDP, eta: base.Schedule, *, num_iters: int) -> KnownModelLog:
  """Dual projected descent on the exact CMDP (paper's eqs. (pgd1)-(pgd2)).

  `pi_n` is the best response to `c + lambda_n^T D` (one DP, ties to the lowest action);
  `lambda_{n+1} = [lambda_n + eta_n (D q_n - alpha)]_+`, `lambda_0 = 0`.

  Args:
    cmdp: an unbatched `CMDP`.
    eta: positive scalar or callable `n -> eta_n`.
    num_iters: outer iterations N (static).

  Returns:
    `KnownModelLog` (`inner_gap` is 0: the best response is exact).
  """
  eta_fn = base.as_schedule(eta)
  dtype = cmdp.cost.dtype

  def step(multipliers, n):
    reward = cmdp.cost + numerics.einsum("i,ihsa->hsa", multipliers, cmdp.constraint_costs)
    kernel = cmdp.transition_set()
    policy = kernel.optimal_policy(reward)
    q = kernel.occupancy(policy, cmdp.initial_state)
    eta_n = jnp.asarray(eta_fn(n), dtype)
    next_multipliers = dual_step(q, cmdp.constraint_costs, cmdp.thresholds, multipliers, eta_n)
    cost_value, constraint_values = _values(cmdp, q)
    return next_multipliers, KnownModelLog(
      cost_value, constraint_values, next_multipliers, jnp.zeros((), dtype)
    )

  lam0 = jnp.zeros(cmdp.thresholds.shape, dtype)
  _, log = lax.scan(step, lam0, jnp.arange(num_iters))
  return log


def optimal_value_estimate(
  cmdp: CMDP,
  eta: jax.typing.ArrayLike,
  *,
  num_iters: int,
  inner: inner_lib.InnerSolver = exact(),
) -> jax.Array:
  """A differentiable estimate of the constrained optimum `V*` of a known CMDP.

  Runs the known-model ALM (`alm_known_model`, constant `eta`) to its last multiplier
  `lambda_N ~ lambda*`, held fixed (no derivative through the iterations), then solves the
  inner problem once more with `gradient="envelope"`. At the ALM fixed point the inner
  optimum is `f* = V* + ||lambda*||^2 / (2 eta)`, so the estimate is
  `f* - ||lambda_N||^2 / (2 eta)`, and by the envelope theorem its derivative with respect
  to the thresholds is `-lambda+ = -lambda* = dV*/dalpha` (the price of safety); the
  derivatives with respect to the costs are those of `V*` likewise.

  Args:
    cmdp: an unbatched `CMDP`; derivatives flow to its costs and thresholds.
    eta: positive scalar.
    num_iters: ALM iterations (static).
    inner: the inner solver (static; default `oj.inner.exact()`, see `solve_inner`).

  Returns:
    Scalar estimate of `V*`.
  """
  log = alm_known_model(
    lax.stop_gradient(cmdp), lax.stop_gradient(eta), num_iters=num_iters, inner=inner, gradient=None
  )
  lam = lax.stop_gradient(log.multipliers[-1])
  sol = inner_lib.solve_inner(
    inner_lib.InnerProblem.of_cmdp(cmdp),
    lam,
    eta,
    solver=inner,
    gradient="envelope",
    with_transitions=False,
  )
  return sol.objective - jnp.sum(lam**2) / (2.0 * eta)
