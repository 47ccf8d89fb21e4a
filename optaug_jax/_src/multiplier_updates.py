"""The outer loop's multiplier updates: OptAug's dual step, and the Lagrangian agents' optax
transformations.

`dual_step` is the paper's eq. (dual-step), the augmented-Lagrangian update of OptAug-CMDP
(and of the known-model ALM). The Lagrangian agents (`optdual(dual_optimizer=...)`) update
their multipliers with an optax `GradientTransformation` instead: they minimise
`-(D~ q - alpha) . lambda` over `lambda >= 0`, so the "gradient" they feed an optimizer is
`-(D~ q_k - alpha)` (minus the optimistic violation), the optimizer's updates are added to
`lambda`, and the result is projected on `lambda >= 0`
(`optax.projections.projection_non_negative`). So `optax.sgd(eta)` is projected dual
ascent (OptDual-CMDP), and `optax.optimistic_gradient_descent(eta)` is optimistic dual
descent, the multiplier update of ReLOAD (Moskovitz et al. 2023). This module adds the two
controllers of the Lagrangian-control literature:

- `nupi`: the nu-PI controller of Sohrabi et al. (2024, "On PI controllers for updating
  Lagrange multipliers in constrained optimization"), an incremental form;
- `pid_lagrangian`: the PID Lagrangian of Stooke et al. (2020, "Responsive safety in
  reinforcement learning by PID Lagrangian methods", Algorithm 2), a positional form.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import optax

from . import numerics
from .checking import arguments, kernels
from .errors import ArgumentError
from .numerics import compensated_add


def dual_step(
  occupancy: jax.Array,
  constraint_costs: jax.Array,
  thresholds: jax.Array,
  multipliers: jax.Array,
  eta: jax.typing.ArrayLike,
  *,
  check: bool = False,
) -> jax.Array:
  """The paper's eq. (dual-step): `lambda_{k+1} = [lambda_k + eta_k (D q_k - alpha)]_+`.

  Also the weights of the augmented Lagrangian's gradient, eq. (nabla):
  `grad f(q) = c + D^T dual_step(q, ...)`.

  Args:
    occupancy: `[H, S, A]` occupancy `q_k` (an agent's: the inner solution).
    constraint_costs: `[I, H, S, A]` constraint costs `D` (an agent's: optimistic `D~_k`).
    thresholds: `[I]` thresholds `alpha`.
    multipliers: `[I]` current multipliers `lambda_k >= 0`.
    eta: positive scalar step size `eta_k`.
    check: also check traced arguments through `checkify` (wrap the outer function in
      `oj.checked`); concrete arguments are always checked on the host.

  Returns:
    `[I]` next multipliers, non-negative.

  Raises:
    ValueError: (concrete arguments, or `check=True` under `oj.checked`) multipliers that
      are negative or not finite, an `eta` that is not positive and finite, or an
      occupancy, costs or thresholds that are not finite.
  """
  kernels.finite("multipliers", multipliers, "dual_step", check=check, low=0.0)
  kernels.finite("eta", eta, "dual_step", check=check, low=0.0, low_open=True)
  kernels.finite("occupancy", occupancy, "dual_step", check=check)
  kernels.finite("constraint_costs", constraint_costs, "dual_step", check=check)
  kernels.finite("thresholds", thresholds, "dual_step", check=check)
  violation = numerics.einsum("ihsa,hsa->i", constraint_costs, occupancy) - thresholds
  return jnp.maximum(multipliers + eta * violation, 0.0)


class NuPIState(NamedTuple):
  """`xi`: the exponential moving average of the error (`xi_{-1} = 0`)."""

  xi: optax.Updates


def nupi(
  learning_rate: optax.ScalarOrSchedule, *, kp: float = 0.0, ki: float = 1.0, nu: float = 0.0
) -> optax.GradientTransformation:
  """nu-PI (Sohrabi et al. 2024): `theta <- theta - lr (ki e_t + kp (xi_t - xi_{t-1}))`.

  With the error `e_t` the incoming gradient and `xi_t = nu xi_{t-1} + (1 - nu) e_t`,
  `xi_{-1} = 0` (their "zeros" initialisation: the first step is `-lr (ki + kp (1 - nu))
  e_0`). `kp = 0` is gradient descent; `kp = ki = 1, nu = 0` is the optimistic gradient
  method (`optax.optimistic_gradient_descent(lr)` up to its first step).

  Args:
    learning_rate: `lr`, a float or an optax schedule of the step count.
    kp: proportional gain (>= 0).
    ki: integral gain (>= 0).
    nu: EMA coefficient of the error, in `[0, 1)`.

  Returns:
    An `optax.GradientTransformation`.
  """
  arguments.check_real("nu", nu, low=0.0, high=1.0, high_open=True)
  arguments.check_real("kp", kp, low=0.0)
  arguments.check_real("ki", ki, low=0.0)

  def init(params):
    return NuPIState(xi=jax.tree.map(jnp.zeros_like, params))

  def update(updates, state, params=None):
    del params
    xi = jax.tree.map(lambda x, e: nu * x + (1.0 - nu) * e, state.xi, updates)
    step = jax.tree.map(lambda e, x_new, x: ki * e + kp * (x_new - x), updates, xi, state.xi)
    return step, NuPIState(xi=xi)

  return optax.chain(
    optax.GradientTransformation(init, update), optax.scale_by_learning_rate(learning_rate)
  )


class PIDState(NamedTuple):
  """The PID Lagrangian's integral (kept >= 0) and the previous error.

  The integral is a compensated running sum (`numerics.compensated_add`): `integral` is
  the sum rounded to its dtype, `integral_compensation` the rest, so a long run in float32
  does not lose the small errors added to a large integral.
  """

  integral: optax.Updates
  previous_error: optax.Updates
  integral_compensation: optax.Updates = None


def _accumulate_nonnegative(total, compensation, value):
  """`[total + value]_+` as a compensated sum `(total, compensation)`."""
  total, compensation = compensated_add(total, compensation, value)
  negative = total < 0  # the head has the sign of the compensated sum
  return (
    jnp.where(negative, 0.0, total).astype(total.dtype),
    jnp.where(negative, 0.0, compensation).astype(total.dtype),
  )


def pid_lagrangian(*, kp: float, ki: float, kd: float = 0.0) -> optax.GradientTransformation:
  """PID Lagrangian (Stooke et al. 2020, Algorithm 2) as a transformation of the multiplier.

  With the error `e_k = -gradient` (the violation `D~ q_k - alpha` in `optdual`):
  `I_k = [I_{k-1} + e_k]_+`, `lambda_{k+1} = [kp e_k + ki I_k + kd [e_k - e_{k-1}]_+]_+`
  (`e_{-1} = 0`: the previous *error* starts at 0, where Stooke et al. start the previous
  *cost* at 0; the two differ in the first derivative term only, when `kd > 0`). It sets
  the multiplier rather than stepping it, so `update` needs the current `params` and
  returns `lambda_{k+1} - lambda_k`. The gains are numbers (not schedules). `kp = kd = 0` is
  projected dual ascent with step `ki` from `lambda = 0`.

  Args:
    kp: proportional gain (>= 0).
    ki: integral gain (>= 0).
    kd: derivative gain (>= 0), on the rise of the error only.

  Returns:
    An `optax.GradientTransformation` (its `update` requires `params`).
  """
  for name, gain in (("kp", kp), ("ki", ki), ("kd", kd)):
    arguments.check_real(name, gain, low=0.0)  # skipped when traced

  def init(params):
    zeros = jax.tree.map(jnp.zeros_like, params)
    return PIDState(integral=zeros, previous_error=zeros, integral_compensation=zeros)

  def update(updates, state, params=None):
    if params is None:
      raise ArgumentError("params", "pid_lagrangian sets the multiplier, so update needs it")
    error = jax.tree.map(jnp.negative, updates)
    compensation = state.integral_compensation
    if compensation is None:  # a state built without it: plain sums, as before
      integral = jax.tree.map(lambda i, e: jnp.maximum(i + e, 0.0), state.integral, error)
    else:
      leaves, treedef = jax.tree.flatten(state.integral)
      treedef = cast(Any, treedef)  # jax's PyTreeDef has no type stubs
      pairs = [
        _accumulate_nonnegative(i, c, e)
        for i, c, e in zip(
          leaves, treedef.flatten_up_to(compensation), treedef.flatten_up_to(error)
        )
      ]
      integral = treedef.unflatten([p[0] for p in pairs])
      compensation = treedef.unflatten([p[1] for p in pairs])
    target = jax.tree.map(
      lambda e, i, e_prev: jnp.maximum(kp * e + ki * i + kd * jnp.maximum(e - e_prev, 0.0), 0.0),
      error,
      integral,
      state.previous_error,
    )
    step = jax.tree.map(lambda t, p: t - p, target, params)
    return step, PIDState(
      integral=integral, previous_error=error, integral_compensation=compensation
    )

  return optax.GradientTransformation(init, update)


def projected_dual_update(
  optimizer: optax.GradientTransformation, opt_state, multipliers: jax.Array, violation: jax.Array
):
  """One multiplier step: `lambda <- P_{>= 0}(lambda + updates(-violation))`."""
  updates, opt_state = optimizer.update(-violation, opt_state, multipliers)
  multipliers = optax.projections.projection_non_negative(optax.apply_updates(multipliers, updates))
  return multipliers, opt_state
