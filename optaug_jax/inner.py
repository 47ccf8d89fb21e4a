"""The inner problem of OptAug-CMDP (paper's eq. (primal-step)) by Frank-Wolfe.

The objective depends on the state-action-state occupancy `z` only through
`q = sum_s' z` (paper's eq. (retrieve-q)); its gradient in `z` is the same for every `s'`
(eq. (nabla)). Frank-Wolfe iterates on `z` therefore map one-to-one onto iterates on `q`,
so the loop runs on `q` `[H, S, A]`; `z` (for the optimistic transitions) is accumulated
only when asked for.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax import lax

from optaug_jax import planning

_STEP_RULES = ("standard", "linesearch")
_GRADIENTS = ("unrolled", "envelope")


class InnerSolution(NamedTuple):
  """Approximate minimiser of eq. (primal-step) and its certificate."""

  occupancy: jax.Array  # [H, S, A] q = sum_s' z
  policy: jax.Array  # [H, S, A] eq. (retrieve-pi), uniform where q_h(s) = 0
  transitions: jax.Array  # [H, S, A, S'] eq. (retrieve-p), in the box
  objective: jax.Array  # [] augmented Lagrangian at the returned point
  fw_gap: jax.Array  # [] <grad f(q), q - q_lmo>: objective - optimum <= fw_gap
  num_iters: jax.Array  # [] int, Frank-Wolfe steps taken


def augmented_lagrangian(
    occupancy: jax.Array,
    cost: jax.Array,
    constraint_costs: jax.Array,
    thresholds: jax.Array,
    multipliers: jax.Array,
    eta: jax.typing.ArrayLike,
) -> jax.Array:
  """`c . q + ||[lambda + eta (D q - alpha)]_+||^2 / (2 eta)` (paper's eq. (step1)).

  Args:
    occupancy: `[H, S, A]` occupancy `q`.
    cost: `[H, S, A]` objective costs `c`.
    constraint_costs: `[I, H, S, A]` constraint costs `D`.
    thresholds: `[I]` thresholds `alpha`.
    multipliers: `[I]` multipliers `lambda >= 0`.
    eta: positive scalar step size.

  Returns:
    Scalar objective.
  """
  # Written as (eta / 2) ||[lambda / eta + (D q - alpha)]_+||^2: no eta^2 intermediate, so
  # float32 stays finite for eta up to ~1e37 (accuracy is another matter: use x64).
  violation = jnp.einsum("ihsa,hsa->i", constraint_costs, occupancy) - thresholds
  scaled = jnp.maximum(multipliers / eta + violation, 0.0)
  return jnp.sum(cost * occupancy) + 0.5 * eta * jnp.sum(scaled**2)


def _shifted_multipliers(q, constraint_costs, thresholds, multipliers, eta):
  """`[lambda + eta (D q - alpha)]_+`: the gradient's weights and the next dual iterate."""
  violation = jnp.einsum("ihsa,hsa->i", constraint_costs, q) - thresholds
  return jnp.maximum(multipliers + eta * violation, 0.0)


def _exact_line_search(g_dir, a, b, eta):
  """`argmin_{t in [0, 1]} t g_dir + (eta / 2) ||[a + t b]_+||^2`, exactly.

  Scale-free form: `a = lambda / eta + (D q - alpha)`, `b = D (q_lmo - q)` (no factor eta,
  so nothing grows like eta^2). The objective is a convex piecewise quadratic whose pieces
  change where some `a_i + t b_i` crosses 0 (at most I breakpoints). On each piece the
  active set is fixed and the minimiser is closed-form; the global minimiser is the best
  clipped piece-minimiser.
  """
  dtype = a.dtype
  safe_b = jnp.where(b == 0, 1.0, b)
  crossings = jnp.where(b == 0, 0.0, jnp.clip(-a / safe_b, 0.0, 1.0))
  knots = jnp.sort(jnp.concatenate([jnp.zeros((1,), dtype), crossings,
                                    jnp.ones((1,), dtype)]))
  left, right = knots[:-1], knots[1:]  # [I + 1] pieces
  mid = 0.5 * (left + right)
  active = (a[None, :] + mid[:, None] * b[None, :]) > 0  # [I + 1, I]
  curvature = jnp.sum(jnp.where(active, b * b, 0.0), axis=1)
  slope0 = g_dir / eta + jnp.sum(jnp.where(active, a * b, 0.0), axis=1)
  safe_curv = jnp.where(curvature > 0, curvature, 1.0)
  t_free = jnp.where(curvature > 0, -slope0 / safe_curv,
                     jnp.where(slope0 > 0, -jnp.inf, jnp.inf))
  t = jnp.clip(t_free, left, right)
  values = t * g_dir + 0.5 * eta * jnp.sum(jnp.maximum(a + t[:, None] * b, 0.0) ** 2, axis=1)
  return t[jnp.argmin(values)]


class _FWState(NamedTuple):
  t: jax.Array  # [] int
  q: jax.Array  # [H, S, A] current iterate
  z: jax.Array  # [H, S, A, S'] current iterate in z-space (or a dummy)
  lmo: planning._LMOSolution  # LMO at the current gradient
  grad: jax.Array  # [H, S, A]
  gap: jax.Array  # []


def _z_of(lmo: planning._LMOSolution, num_actions: int) -> jax.Array:
  """`z_h(s, a, s') = q_h(s, a) p_h(s'|s, a)` of a deterministic LMO vertex (eq. (subst))."""
  one_hot = jax.nn.one_hot(lmo.actions, num_actions, dtype=lmo.occupancy.dtype)
  return (one_hot[..., None] * (lmo.state_occupancy[..., None, None]
                                * lmo.greedy_transitions[:, :, None, :]))


def _frank_wolfe(
    cost, constraint_costs, lower, upper, initial_state, thresholds, multipliers, eta,
    *, num_iters: int, step_rule: str, tol, with_transitions: bool,
):
  """Frank-Wolfe on eq. (convex-fw), run on q. Returns (final _FWState, objective)."""
  num_actions = cost.shape[-1]

  def gradient(q):  # eq. (nabla)
    shifted = _shifted_multipliers(q, constraint_costs, thresholds, multipliers, eta)
    return cost + jnp.einsum("i,ihsa->hsa", shifted, constraint_costs)

  def oracle(grad):
    return planning._extended_lmo(grad, lower, upper, initial_state)

  def probe(q, z, t):
    grad = gradient(q)
    lmo = oracle(grad)
    gap = jnp.sum(grad * q) - lmo.value
    return _FWState(t=t, q=q, z=z, lmo=lmo, grad=grad, gap=gap)

  # z^0: the best response to the plain Lagrangian c + D^T lambda (a vertex of Z).
  start = oracle(cost + jnp.einsum("i,ihsa->hsa", multipliers, constraint_costs))
  z0 = _z_of(start, num_actions) if with_transitions else jnp.zeros(())
  state = probe(start.occupancy, z0, jnp.zeros((), jnp.int32))

  def body(state: _FWState) -> _FWState:
    direction = state.lmo.occupancy - state.q
    if step_rule == "standard":
      step = 2.0 / (state.t.astype(cost.dtype) + 2.0)
    else:
      violation = jnp.einsum("ihsa,hsa->i", constraint_costs, state.q) - thresholds
      a = multipliers / eta + violation
      b = jnp.einsum("ihsa,hsa->i", constraint_costs, direction)
      step = _exact_line_search(jnp.sum(cost * direction), a, b, eta)
    q = state.q + step * direction
    z = state.z
    if with_transitions:
      z = z + step * (_z_of(state.lmo, num_actions) - z)
    return probe(q, z, state.t + 1)

  if tol is None:
    state = lax.fori_loop(0, num_iters, lambda _, s: body(s), state)
  else:
    state = lax.while_loop(
        lambda s: (s.t < num_iters) & (s.gap > tol), body, state)
  objective = augmented_lagrangian(
      state.q, cost, constraint_costs, thresholds, multipliers, eta)
  return state, objective


def _transitions_from_z(z, q, lower, upper):
  """Eq. (retrieve-p); where `q_h(s, a) = 0`, a fixed point of the box (lower + fill)."""
  num_states = z.shape[-1]
  _, fallback = planning.box_minimize(jnp.arange(num_states, dtype=z.dtype), lower, upper)
  total = jnp.sum(z, axis=-1, keepdims=True)
  tiny = jnp.finfo(z.dtype).tiny
  safe_total = jnp.where(total > tiny, total, 1.0)
  return jnp.where(total > tiny, z / safe_total, fallback)


def solve_inner(
    cost: jax.Array,
    constraint_costs: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
    initial_state: jax.typing.ArrayLike,
    thresholds: jax.Array,
    multipliers: jax.Array,
    eta: jax.typing.ArrayLike,
    *,
    num_iters: int,
    step_rule: str = "linesearch",
    tol: float | None = None,
    gradient: str = "unrolled",
) -> InnerSolution:
  """Approximately solves the paper's eq. (primal-step) by Frank-Wolfe (Algorithm InnerOpt-FW).

  Minimises `c . q + ||[lambda + eta (D q - alpha)]_+||^2 / (2 eta)` over the occupancy
  measures of all policies and all transitions in the box `[lower, upper]`. The linear
  minimisation oracle is the extended DP (`extended_value_iteration`'s backward pass and a
  forward occupancy pass on the greedy actions only).

  Args:
    cost: `[H, S, A]` optimistic objective costs.
    constraint_costs: `[I, H, S, A]` optimistic constraint costs.
    lower: `[H, S, A, S']` lower transition bounds.
    upper: `[H, S, A, S']` upper transition bounds.
    initial_state: integer scalar.
    thresholds: `[I]`.
    multipliers: `[I]`, non-negative.
    eta: positive scalar (traced).
    num_iters: Frank-Wolfe steps (static). With `tol=None` the loop is a `lax.fori_loop`
      and reverse-differentiable.
    step_rule: `"standard"` (the paper's `2 / (t + 2)`) or `"linesearch"` (exact line
      search on the piecewise-quadratic objective; keeps accuracy for large `eta`).
    tol: if given, stop as soon as the Frank-Wolfe gap is `<= tol` (at most `num_iters`
      steps). Uses `lax.while_loop`: not reverse-differentiable, and under `vmap` every
      batch member runs until the slowest stops (results stay per-member exact).
    gradient: how derivatives flow (values are identical in both modes):
      `"unrolled"`: reverse mode through the Frank-Wolfe iterations (and the line search):
        the derivative of the T-step output. Needs `tol=None`.
      `"envelope"`: Danskin's theorem at the returned point. Only `objective` carries a
        derivative, that of the optimal value: `d/dc = q*`, `d/dD_i = lambda+_i q*`,
        `d/dalpha = -lambda+`, `d/dlambda = lambda+ / eta`,
        `d/deta = -||lambda+||^2 / (2 eta^2) + lambda+ . (D q* - alpha) / eta` with
        `lambda+ = [lambda + eta (D q* - alpha)]_+`; for the box, the derivative of
        `min_{q in Q(box)} <grad f(q*), q>` (same KKT multipliers). The iterations are not
        differentiated (no memory for them); the other outputs are constants. Exact at an
        exact optimum; the error is of the order of the Frank-Wolfe accuracy.

  Returns:
    `InnerSolution`; `objective - optimum <= fw_gap`.
  """
  if step_rule not in _STEP_RULES:
    raise ValueError(f"step_rule: expected one of {_STEP_RULES}, got {step_rule!r}")
  if gradient not in _GRADIENTS:
    raise ValueError(f"gradient: expected one of {_GRADIENTS}, got {gradient!r}")
  chex.assert_rank([cost, constraint_costs, lower, upper, thresholds, multipliers],
                   [3, 4, 4, 4, 1, 1])
  chex.assert_equal_shape([lower, upper])
  inputs = (cost, constraint_costs, lower, upper, initial_state, thresholds, multipliers, eta)
  if gradient == "envelope":
    inputs = lax.stop_gradient(inputs)
  state, objective = _frank_wolfe(
      *inputs, num_iters=num_iters, step_rule=step_rule, tol=tol, with_transitions=True)
  if gradient == "envelope":
    objective = augmented_lagrangian(
        state.q, cost, constraint_costs, thresholds, multipliers, eta)
    # Box sensitivity: the linearised problem at q* has the same optimal KKT multipliers.
    v1, _, _ = planning._backward(state.grad, lower, upper)
    linear_value = v1[initial_state]
    objective = objective + (linear_value - lax.stop_gradient(linear_value))
  return InnerSolution(
      occupancy=state.q,
      policy=planning.policy_from_occupancy(state.q),
      transitions=_transitions_from_z(state.z, state.q, lower, upper),
      objective=objective,
      fw_gap=state.gap,
      num_iters=state.t,
  )
