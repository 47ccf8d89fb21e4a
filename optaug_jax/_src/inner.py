"""The inner problem of OptAug-CMDP (paper's eq. (primal-step)) by Frank-Wolfe.

The objective depends on the state-action-state occupancy `z` only through
`q = sum_s' z` (paper's eq. (retrieve-q)); its gradient in `z` is the same for every `s'`
(eq. (nabla)). Frank-Wolfe iterates on `z` therefore map one-to-one onto iterates on `q`,
so the loop runs on `q` `[H, S, A]`; `z` (for the optimistic transitions) is accumulated
only when asked for.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax import lax

from . import checks, planning, validation

STEP_RULES = ("standard", "linesearch")
GRADIENTS = ("unrolled", "envelope")


class InnerProblem(NamedTuple):
  """The data of one inner problem, eq. (primal-step) (what every inner method receives)."""

  cost: jax.Array  # [H, S, A] c (optimistic c~_k in an agent)
  constraint_costs: jax.Array  # [I, H, S, A] D
  lower: jax.Array  # [H, S, A, S'] lower transition bounds
  upper: jax.Array  # [H, S, A, S'] upper transition bounds
  initial_state: jax.Array  # [] int
  thresholds: jax.Array  # [I] alpha
  multipliers: jax.Array  # [I] lambda >= 0
  eta: jax.Array  # [] > 0
  next_states: jax.Array | None = None  # [H or 1, S, A, N] int32: the sparse layout of
  #   lower and upper (`extended_lmo`); None: dense


class InnerSolution(NamedTuple):
  """Approximate minimiser of eq. (primal-step) and its certificate."""

  occupancy: jax.Array  # [H, S, A] q = sum_s' z
  policy: jax.Array  # [H, S, A] eq. (retrieve-pi); where q_h(s) = 0 see `unreached`
  transitions: jax.Array | None  # [H, S, A, S'] eq. (retrieve-p), in the box (None if not asked)
  objective: jax.Array  # [] augmented Lagrangian at the returned point
  fw_gap: jax.Array  # [] certificate: objective - optimum <= fw_gap (the method's own bound)
  num_iters: jax.Array  # [] int, iterations the method took
  dp_calls: jax.Array  # [] int, extended DPs (LMO calls) the method made
  certified: jax.Array  # [] bool, fw_gap <= certified_tolerance(dtype) * (1 + |objective|)


def certified_tolerance(dtype) -> float:
  """The relative accuracy a solve must prove to count as certified (`InnerSolution.certified`):
  `fw_gap <= tol * (1 + |objective|)` with tol 1e-8 in float64 and 1e-4 in float32."""
  return 1e-8 if jnp.finfo(dtype).bits >= 64 else 1e-4


class MethodResult(NamedTuple):
  """What an inner method returns to `solve_inner` (see `INNER_METHODS`)."""

  occupancy: jax.Array  # [H, S, A]
  transitions: jax.Array | None  # [H, S, A, S'] or None when `with_transitions=False`
  gap: jax.Array  # [] certificate objective - optimum <= gap
  num_iters: jax.Array  # [] int
  dp_calls: jax.Array  # [] int


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


def dual_step(
    occupancy: jax.Array,
    constraint_costs: jax.Array,
    thresholds: jax.Array,
    multipliers: jax.Array,
    eta: jax.typing.ArrayLike,
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

  Returns:
    `[I]` next multipliers, non-negative.
  """
  violation = jnp.einsum("ihsa,hsa->i", constraint_costs, occupancy) - thresholds
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
  # Compare the pieces by their change from t = 0, not by absolute values: a short step
  # (a small weight moved, a small `b`) changes the objective far below the rounding of
  # `||a||^2`, and absolute values would then tie and freeze the step at t = 0.
  moved = a + t[:, None] * b
  now, before = jnp.maximum(moved, 0.0), jnp.maximum(a, 0.0)
  change = jnp.where((moved > 0) & (a > 0), t[:, None] * b, now - before)
  values = t * g_dir + 0.5 * eta * jnp.sum(change * (now + before), axis=1)
  return t[jnp.argmin(values)]


class _FWState(NamedTuple):
  t: jax.Array  # [] int
  q: jax.Array  # [H, S, A] current iterate
  z: jax.Array  # [H, S, A, S'] current iterate in z-space (or a dummy)
  lmo: planning.LMOSolution  # LMO at the current gradient
  grad: jax.Array  # [H, S, A]
  gap: jax.Array  # []


def _z_of(lmo: planning.LMOSolution, num_actions: int) -> jax.Array:
  """`z_h(s, a, s') = q_h(s, a) p_h(s'|s, a)` of a deterministic LMO vertex (eq. (subst))."""
  one_hot = jax.nn.one_hot(lmo.actions, num_actions, dtype=lmo.occupancy.dtype)
  return (one_hot[..., None] * (lmo.state_occupancy[..., None, None]
                                * lmo.greedy_transitions[:, :, None, :]))


def frank_wolfe(
    problem: InnerProblem, *, num_iters: int | None, step_rule: str = "linesearch",
    tol: float | None = None, with_transitions: bool = True, fill: str = planning.DEFAULT_FILL,
) -> MethodResult:
  """Frank-Wolfe on eq. (convex-fw), run on q (Algorithm InnerOpt-FW; the paper's method).

  `num_iters` steps (default 100) of `step_rule` (`"standard"`: `2 / (t + 2)`;
  `"linesearch"`: exact line search on the piecewise-quadratic objective); with `tol`, stops
  once the Frank-Wolfe gap is `<= tol` (`lax.while_loop`). The gap at the returned point is
  the certificate. One extended DP per step, plus two at the start.
  """
  if step_rule not in STEP_RULES:
    raise ValueError(f"step_rule: expected one of {STEP_RULES}, got {step_rule!r}")
  num_iters = 100 if num_iters is None else num_iters
  (cost, constraint_costs, lower, upper, initial_state, thresholds, multipliers,
   eta) = problem[:8]
  next_states = problem.next_states
  num_actions = cost.shape[-1]

  def gradient(q):  # eq. (nabla)
    shifted = dual_step(q, constraint_costs, thresholds, multipliers, eta)
    return cost + jnp.einsum("i,ihsa->hsa", shifted, constraint_costs)

  def oracle(grad):
    return planning.extended_lmo(grad, lower, upper, initial_state, fill=fill,
                                 next_states=next_states)

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
  transitions = (_transitions_from_z(state.z, state.q, lower, upper, fill, next_states)
                 if with_transitions else None)
  return MethodResult(occupancy=state.q, transitions=transitions, gap=state.gap,
                      num_iters=state.t, dp_calls=state.t + 2)


def _transitions_from_z(z, q, lower, upper, fill=planning.DEFAULT_FILL, next_states=None):
  """Eq. (retrieve-p); where `q_h(s, a) = 0`, a fixed point of the box (lower + fill, in
  the order of the next states' indices). Sparse layout: `z` and the result are slots."""
  if next_states is None:
    num_states = z.shape[-1]
    _, fallback = planning.box_minimize(jnp.arange(num_states, dtype=z.dtype), lower, upper,
                                        method=fill)
  else:
    _, fallback = planning._row_fill(next_states.astype(z.dtype), lower, upper)
  total = jnp.sum(z, axis=-1, keepdims=True)
  tiny = jnp.finfo(z.dtype).tiny
  safe_total = jnp.where(total > tiny, total, 1.0)
  return jnp.where(total > tiny, z / safe_total, fallback)


def _dual_value(mu, phi, thresholds, multipliers, eta):
  """`psi(mu) = Phi(mu) - mu . alpha - (||mu - lambda||^2 - ||lambda||^2) / (2 eta)`.

  The Fenchel dual of eq. (primal-step): `Phi(mu) = min_{q in Z} (c + D^T mu) . q` is one
  extended DP; `psi(mu) <= optimum` for every `mu >= 0` (weak duality).
  """
  return phi - jnp.dot(mu, thresholds) - jnp.dot(mu, mu - 2.0 * multipliers) / (2.0 * eta)


def _tree_where(pred, x, y):
  return jax.tree.map(lambda u, v: jnp.where(pred, u, v), x, y)


def _default_dual_iters(dtype, num_constraints: int) -> int:
  """Bisection steps (I = 1) or cutting planes (I >= 2) that reach the dtype's accuracy."""
  if num_constraints == 1:
    return 58 if jnp.finfo(dtype).bits >= 64 else 30
  return 80 if jnp.finfo(dtype).bits >= 64 else 50


def _iterate(body, carry, num_iters: int, early: bool, can_stop: bool = True):
  """Runs `body` (carry `(it, done, ...)`) up to `num_iters` times, until `done`.

  `early`: a `lax.while_loop` that stops at `done` (fewer DPs; not reverse-
  differentiable). Otherwise a `lax.fori_loop` of exactly `num_iters` steps in which a
  finished carry stays as it is (reverse-differentiable; every step still runs its DP).
  `can_stop=False` says `body` never sets `done`: the loop then skips the select that
  keeps a finished carry (a copy of the whole carry per step, e.g. the cutting planes'
  vertex memory: 11% of the I = 2 dual step at 256 seeds in float32).
  """
  if early:
    return lax.while_loop(lambda c: (c[0] < num_iters) & ~c[1], body, carry)
  if not can_stop:
    return lax.fori_loop(0, num_iters, lambda _, c: body(c), carry)

  def step(_, c):
    return _tree_where(c[1], c, body(c))

  return lax.fori_loop(0, num_iters, step, carry)


def _bisection(problem: InnerProblem, *, num_iters: int, tol: float | None,
               with_transitions: bool, fill: str) -> MethodResult:
  """I = 1: a safeguarded cutting-plane search on the dual (the two-cut model's maximiser,
  or bisection on the supergradient when that fails to halve the bracket), then the best
  point between the two bracketing vertices (an exact line search on their segment)."""
  (cost, constraint_costs, lower, upper, initial_state, thresholds, multipliers,
   eta) = problem[:8]
  next_states = problem.next_states
  dtype = cost.dtype
  d, alpha, lam = constraint_costs[0], thresholds[0], multipliers[0]
  num_actions = cost.shape[-1]

  def oracle(mu):
    return planning.extended_lmo(cost + mu * d, lower, upper, initial_state, fill=fill,
                                 next_states=next_states)

  def psi(mu, v):
    return _dual_value(mu[None], v.value, thresholds, multipliers, eta)

  def slope(mu, v):  # a supergradient of psi at mu: D q(mu) - alpha - (mu - lambda) / eta
    return jnp.sum(d * v.occupancy) - alpha - (mu - lam) / eta

  # mu* <= lambda + eta (max D q - alpha)_+ since D q - alpha = (mu* - lambda) / eta there.
  bound = jnp.sum(jnp.max(d.reshape(d.shape[0], -1), axis=-1))
  lo, hi = jnp.zeros((), dtype), lam + eta * jnp.maximum(bound - alpha, 0.0)
  v_lo, v_hi = oracle(lo), oracle(hi)
  best = jnp.maximum(psi(lo, v_lo), psi(hi, v_hi))
  tiny = 16 * jnp.finfo(dtype).eps

  def lines(v):  # the Lagrangian of vertex v as a line in mu: a + mu y
    return jnp.sum(cost * v.occupancy), jnp.sum(d * v.occupancy)

  def candidate(lo, hi, a_lo, y_lo, a_hi, y_hi):
    """Maximiser of the two-cut model `min(L_lo, L_hi)(mu) - mu alpha - (mu - lambda)^2 /
    (2 eta)` on [lo, hi]: the stationary point of one quadratic piece, or their kink."""
    gap = y_lo - y_hi  # >= 0: D q(mu) is non-increasing in mu
    kink = jnp.where(gap > 0, (a_hi - a_lo) / jnp.where(gap > 0, gap, 1.0), 0.5 * (lo + hi))
    top_lo, top_hi = lam + eta * (y_lo - alpha), lam + eta * (y_hi - alpha)
    mu = jnp.where(top_lo <= kink, top_lo, jnp.where(top_hi >= kink, top_hi, kink))
    return jnp.clip(mu, lo, hi)

  def body(carry):
    it, _, stalls, lo, hi, v_lo, v_hi, best = carry
    # Safeguarded: the model's maximiser, or the midpoint when the model failed to halve
    # the bracket last time (bisection's guarantee, Kelley's finite end on the kinks).
    (a_lo, y_lo), (a_hi, y_hi) = lines(v_lo), lines(v_hi)
    model = candidate(lo, hi, a_lo, y_lo, a_hi, y_hi)
    mu = jnp.where(stalls > 0, 0.5 * (lo + hi), model)
    v = oracle(mu)
    # The model is an upper bound of Phi built from two of its lines; where it meets Phi at
    # its own maximiser, that point maximises psi: stop (exact, up to rounding).
    upper = jnp.minimum(a_lo + mu * y_lo, a_hi + mu * y_hi)
    scale = 1.0 + jnp.abs(upper)
    done = (stalls == 0) & (v.value >= upper - tiny * scale)
    best_now = jnp.maximum(best, psi(mu, v))
    if tol is not None:  # the model's maximum bounds max psi from above
      bound = _dual_value(mu[None], upper, thresholds, multipliers, eta)
      done = done | ((stalls == 0) & (bound - best_now <= tol * scale))
    up = slope(mu, v) > 0  # mu* >= mu
    new_lo, new_hi = jnp.where(up, mu, lo), jnp.where(up, hi, mu)
    halved = (new_hi - new_lo) <= 0.5 * (hi - lo)
    return (it + 1, done, (~halved & (stalls == 0)).astype(jnp.int32), new_lo, new_hi,
            _tree_where(up, v, v_lo), _tree_where(up, v_hi, v), best_now)

  it, _, _, lo, hi, v_lo, v_hi, best = _iterate(
      body, (jnp.zeros((), jnp.int32), jnp.zeros((), bool), jnp.zeros((), jnp.int32),
             lo, hi, v_lo, v_hi, best), num_iters, early=tol is not None)
  # Both bracketing vertices minimise the Lagrangian at mu*: the optimum lies on their
  # segment (the whole optimal face when the bracket holds a single kink of Phi).
  direction = v_lo.occupancy - v_hi.occupancy
  a = lam / eta + jnp.sum(d * v_hi.occupancy) - alpha
  step = _exact_line_search(jnp.sum(cost * direction), a[None],
                            jnp.sum(d * direction)[None], eta)
  q = v_hi.occupancy + step * direction
  mu_hat = dual_step(q, constraint_costs, thresholds, multipliers, eta)[0]
  best = jnp.maximum(best, psi(mu_hat, oracle(mu_hat)))
  objective = augmented_lagrangian(q, cost, constraint_costs, thresholds, multipliers, eta)
  transitions = None
  if with_transitions:
    z = step * _z_of(v_lo, num_actions) + (1.0 - step) * _z_of(v_hi, num_actions)
    transitions = _transitions_from_z(z, q, lower, upper, fill, next_states)
  return MethodResult(occupancy=q, transitions=transitions,
                      gap=jnp.maximum(objective - best, 0.0),
                      num_iters=it,
                      dp_calls=(it if tol is not None
                                else jnp.asarray(num_iters, jnp.int32)) + 3)


# Largest system `_spd_solve` writes out as scalar code (an unrolled Cholesky); larger
# ones go to `jnp.linalg.solve`. Under `vmap` on XLA:CPU a batched LU of a 3 x 3 system
# took 127 us per call at 256 seeds (20% of the I = 2 dual step, benchmark.py's profile).
_UNROLLED_SOLVE_MAX = 8


def _spd_solve(a, b):
  """`a^{-1} b` for a small symmetric positive definite `a` `[n, n]` (Cholesky).

  For `n <= _UNROLLED_SOLVE_MAX`, straight-line scalar code that XLA fuses into a few
  elementwise kernels (batched over any vmapped axes). A pivot that rounding made
  non-positive is raised to `eps` times its diagonal entry (plus the smallest normal):
  the answer stays finite, like LU's on a nearly singular system, instead of a NaN that
  would freeze the interior-point iterate. Larger systems use `jnp.linalg.solve`.
  """
  n = a.shape[0]
  if n > _UNROLLED_SOLVE_MAX:
    return jnp.linalg.solve(a, b)
  low = [[None] * n for _ in range(n)]
  info = jnp.finfo(a.dtype)
  for j in range(n):
    diag = a[j, j] - sum((low[j][k] ** 2 for k in range(j)), jnp.zeros((), a.dtype))
    low[j][j] = jnp.sqrt(jnp.maximum(diag, info.eps * jnp.abs(a[j, j]) + info.tiny))
    for i in range(j + 1, n):
      off = a[i, j] - sum((low[i][k] * low[j][k] for k in range(j)), jnp.zeros((), a.dtype))
      low[i][j] = off / low[j][j]
  y = []
  for i in range(n):
    y.append((b[i] - sum((low[i][k] * y[k] for k in range(i)), jnp.zeros((), a.dtype)))
             / low[i][i])
  x = [None] * n
  for i in reversed(range(n)):
    x[i] = (y[i] - sum((low[k][i] * x[k] for k in range(i + 1, n)),
                       jnp.zeros((), a.dtype))) / low[i][i]
  return jnp.stack(x)


def _master(values, images, mask, thresholds, multipliers, eta, *, num_steps: int = 40):
  """The cutting-plane master: `max_{mu >= 0, t} t - mu.(mu - 2 lambda)/(2 eta) - mu.alpha`
  s.t. `t <= values_j + mu . images_j` for the collected vertices `j` (`mask`).

  Solved in scale-free variables: `mu = lambda + eta v` and `t = L_min + eta tau`, with
  `L_j = values_j + lambda . images_j` the vertices' Lagrangians at `lambda`. Dividing by
  `eta` gives `max_{v >= -lambda/eta, tau} tau - v.alpha - ||v||^2 / 2` s.t.
  `tau <= (L_j - L_min)/eta + v . images_j`: unit curvature, and at the optimum
  `v = [lambda/eta + Y w - alpha]_+ - lambda/eta` is of the order of the constraint
  values whatever `eta` (in `mu` the system's scale grows with `eta`, and a fixed number
  of interior-point steps then stopped far from the optimum: the cause of inexact solves
  at large `eta`).

  A small dense QP in the `I + 1` variables `x = (v, tau)`, solved by a primal-dual
  interior-point method (`num_steps` Mehrotra predictor-corrector steps on the KKT
  system, step to 0.99 of the boundary): `min 1/2 x'Px + p'x` s.t. `Gx + s = h`, `s, z >= 0`.
  Returns `mu` and the cut multipliers `w = z_cuts` (`w >= 0`, `sum w = 1` at the optimum:
  the weights of the vertices in the primal point).
  """
  dtype = values.dtype
  num_constraints = thresholds.shape[0]
  n = num_constraints + 1
  slots = values.shape[0]
  lagrangians = values + images @ multipliers
  low = jnp.min(jnp.where(mask, lagrangians, jnp.inf))
  offsets = jnp.where(mask, (lagrangians - low) / eta, 1.0)
  floor = multipliers / eta  # v >= -lambda / eta, i.e. mu >= 0
  # Rows: cuts (tau - y_j . v <= offset_j; unused slots become 0 <= 1), then -v_i <= floor_i.
  cut_rows = jnp.concatenate([-images, jnp.ones((slots, 1), dtype)], axis=1)
  cut_rows = jnp.where(mask[:, None], cut_rows, 0.0)
  g = jnp.concatenate([cut_rows, -jnp.eye(num_constraints, n, dtype=dtype)], axis=0)
  h = jnp.concatenate([offsets, floor])
  curvature = jnp.concatenate([jnp.ones((num_constraints,), dtype), jnp.zeros((1,), dtype)])
  linear = jnp.concatenate([thresholds, -jnp.ones((1,), dtype)])
  x = jnp.concatenate([jnp.zeros((num_constraints,), dtype), -jnp.ones((1,), dtype)])
  slack = jnp.maximum(h - g @ x, 1.0)
  dual = jnp.ones_like(slack)

  def step(_, carry):
    x, slack, dual = carry
    r_dual = curvature * x + linear + g.T @ dual
    r_primal = g @ x + slack - h
    gap = jnp.dot(slack, dual) / slack.shape[0]
    weight = dual / slack
    lhs = jnp.diag(curvature) + (g * weight[:, None]).T @ g

    def direction(r_cent):
      rhs = -r_dual - g.T @ ((r_cent + dual * r_primal) / slack)
      dx = _spd_solve(lhs, rhs)
      ds = -r_primal - g @ dx
      return dx, ds, (r_cent - dual * ds) / slack

    def longest(v, dv):
      return jnp.min(jnp.where(dv < 0, -v / jnp.where(dv < 0, dv, -1.0), jnp.inf))

    # Mehrotra's predictor-corrector: an affine-scaling step sets the centring
    # (sigma = (gap after it / gap)^3) and its second-order term corrects the step.
    _, ds_aff, dz_aff = direction(-slack * dual)
    step_aff = jnp.minimum(1.0, jnp.minimum(longest(slack, ds_aff), longest(dual, dz_aff)))
    gap_aff = jnp.dot(slack + step_aff * ds_aff, dual + step_aff * dz_aff) / slack.shape[0]
    sigma = jnp.clip(gap_aff / jnp.where(gap > 0, gap, 1.0), 0.0, 1.0) ** 3
    dx, ds, dz = direction(-slack * dual - ds_aff * dz_aff + sigma * gap)
    alpha = jnp.minimum(1.0, 0.99 * jnp.minimum(longest(slack, ds), longest(dual, dz)))
    new = (x + alpha * dx, slack + alpha * ds, dual + alpha * dz)
    ok = jnp.all(jnp.isfinite(new[0])) & jnp.all(new[1] > 0) & jnp.all(new[2] > 0)
    return jax.tree.map(lambda u, v: jnp.where(ok, u, v), new, (x, slack, dual))

  x, slack, dual = lax.fori_loop(0, num_steps, step, (x, slack, dual))
  w = jnp.where(mask, dual[:slots], 0.0)
  mu = jnp.maximum(multipliers + eta * x[:-1], 0.0)
  return mu, w / jnp.sum(w)


# Interior-point steps of the master inside the cutting-plane loop (the final master takes
# 40), and the relative gap (restricted primal - best dual) at which the loop stops.
_LOOP_MASTER_STEPS = 20
_STOP_RTOL = 1e-12


def _restricted_objective(values, images, w, thresholds, multipliers, eta):
  """The objective at the mix `w` of collected vertices: `values.w + (eta / 2)
  ||[lambda / eta + Y'w - alpha]_+||^2` (eq. (step1) at `q = sum_j w_j q_j`)."""
  scaled = jnp.maximum(multipliers / eta + images.T @ w - thresholds, 0.0)
  return jnp.dot(values, w) + 0.5 * eta * jnp.sum(scaled**2)


def _polish(values, images, mask, w, thresholds, multipliers, eta, *, num_steps: int = 100):
  """Pairwise Frank-Wolfe steps (exact line search) on the master's primal,
  `min_{w in simplex} values.w + (eta/2) ||[lambda/eta + images' w - alpha]_+||^2`, from the
  interior-point weights: cheap (no DP), a fallback candidate for `_recover` where the best
  `mu` is not accurate (float32 at large eta); 100 steps measured better than 0 or 500 there
  (500 fits float32 rounding noise)."""
  base = multipliers / eta - thresholds

  def step(_, w):
    y = images.T @ w
    mu = jnp.maximum(multipliers + eta * (y - thresholds), 0.0)
    score = values + images @ mu  # gradient of the primal in w
    best = jnp.argmin(jnp.where(mask, score, jnp.inf))
    worst = jnp.argmax(jnp.where(mask & (w > 0), score, -jnp.inf))
    amount = w[worst]
    move = amount * (images[best] - images[worst])
    t = _exact_line_search(amount * (values[best] - values[worst]), base + y, move, eta)
    t = jnp.where(best == worst, 0.0, t)
    return w.at[worst].add(-t * amount).at[best].add(t * amount)

  return lax.fori_loop(0, num_steps, step, w)


def _simplex_least_squares(c, allowed, *, num_iters: int):
  """`argmin ||c w||^2` over `{w >= 0, sum w = 1, w_j = 0 off allowed}` (`c`: `[m, k]`),
  by the Lawson-Hanson active-set method (each step solves the equality-constrained least
  squares on the passive set exactly, so it ends in finitely many steps on the right
  support, however ill-conditioned the points are).

  The columns are rescaled to unit size first, and a vertex enters when its reduced
  gradient `c_j . (c w) + nu` is below a tolerance of the rounding of that product
  (`8 k eps`); the reduced gradients are computed from the residual `c w`, not from the Gram
  matrix (whose products cancel to the residual's size and would bury it in float32
  rounding). A tiny ridge (relative `eps`) keeps the passive-set systems regular when
  vertices repeat or the passive set holds more than `rank(c) + 1` of them (it picks one
  of the tied mixes).
  """
  dtype = c.dtype
  k = c.shape[1]
  eps = jnp.finfo(dtype).eps
  size = jnp.max(jnp.where(allowed[None, :], jnp.abs(c), 0.0))
  c = c / jnp.where(size > 0, size, 1.0)
  gram = c.T @ c
  ridge = eps * (1.0 + jnp.trace(gram))
  single = jnp.diagonal(gram)  # ||c e_j||^2
  first = jnp.argmin(jnp.where(allowed, single, jnp.inf))
  passive = jax.nn.one_hot(first, k, dtype=bool) & allowed
  w = jnp.where(passive, 1.0, 0.0).astype(dtype)
  enter_tol = 8.0 * k * eps

  def solve_on(passive):
    pair = passive[:, None] & passive[None, :]
    block = jnp.where(pair, gram, 0.0) + jnp.diag(jnp.where(passive, ridge, 1.0))
    ones = passive.astype(dtype)
    kkt = jnp.block([[block, ones[:, None]], [ones[None, :], jnp.zeros((1, 1), dtype)]])
    rhs = jnp.concatenate([jnp.zeros((k,), dtype), jnp.ones((1,), dtype)])
    sol = jnp.linalg.solve(kkt, rhs)
    return jnp.where(passive, sol[:k], 0.0)

  def body(_, carry):
    passive, w = carry
    z = solve_on(passive)
    feasible = jnp.all(jnp.where(passive, z > 0, True))
    # Optimal on the passive set: add the most improving allowed vertex, if any. Reduced
    # gradients relative to the passive set's mean (the multiplier of sum w = 1).
    residual = c @ z
    score = c.T @ residual
    nu = jnp.sum(jnp.where(passive, score * z, 0.0)) / jnp.sum(jnp.where(passive, z, 0.0))
    reduced = jnp.where(allowed & ~passive, score - nu, jnp.inf)
    enter = jnp.argmin(reduced)
    grown = passive | (jax.nn.one_hot(enter, k, dtype=bool) & (reduced[enter] < -enter_tol))
    # Infeasible: move towards z until a weight hits 0 and drop it.
    shrinking = passive & (z <= 0)
    ratio = jnp.where(shrinking, w / jnp.where(shrinking, w - z, 1.0), jnp.inf)
    step = jnp.clip(jnp.min(ratio), 0.0, 1.0)
    moved = jnp.maximum(w + step * (z - w), 0.0)
    shrunk = passive & (moved > 0) & ~(shrinking & (ratio <= step))
    moved = jnp.where(shrunk, moved, 0.0)
    moved = moved / jnp.sum(moved)
    return (jnp.where(feasible, grown, shrunk), jnp.where(feasible, z, moved))

  passive, w = lax.fori_loop(0, num_iters, body, (passive, w))
  z = solve_on(passive)
  return jnp.where(jnp.all(jnp.where(passive, z > 0, True)), z, w)


def _recover(values, images, mask, w, mu, thresholds, multipliers, eta, occ, cost,
             constraint_costs, *, num_candidates: int | None = None):
  """Primal weights from the dual optimum `mu` (exact by then): among the vertices that
  minimise the Lagrangian at `mu`, the mix whose `y = Y w` meets `y_i = alpha_i +
  (mu_i - lambda_i)/eta` where `mu_i > 0` and `y_i <= alpha_i - lambda_i/eta` where
  `mu_i = 0` (the optimality conditions), as an exact least-squares problem on the simplex
  (`_simplex_least_squares`): unlike the primal objective, it does not scale with eta.

  - Inequality rows (`mu_i = 0`) start out dropped; the ones the mix violates become
    equalities, for up to `I` passes (by convexity, a violated row can be met with
    equality when it can be met at all).
  - Which vertices minimise the Lagrangian is decided up to a tolerance, and no single one
    fits every instance: too tight drops a vertex of the optimal face, too loose admits a
    near-twin off the face (its Lagrangian excess enters the objective). The search runs
    for three tolerances (relative `16 eps`, `sqrt(eps)`, `100 sqrt(eps)`) at once over the
    `num_candidates` (default `4 (I + 1)`) vertices of lowest Lagrangian, and the weights
    with the lowest primal objective win (`w` included).
  """
  dtype = values.dtype
  eps = jnp.finfo(dtype).eps
  slots, num_constraints = images.shape
  k = min(slots, num_candidates or 4 * (num_constraints + 1))
  lagrangian = jnp.where(mask, values + images @ mu, jnp.inf)
  _, index = lax.top_k(-lagrangian, k)
  lagr, pts, valid = lagrangian[index], images[index], mask[index]
  low = lagr[0]
  scale = 1.0 + jnp.max(jnp.where(valid, jnp.abs(lagr), 0.0))
  target = thresholds + (mu - multipliers) / eta
  # mu_i below rounding level counts as 0 (the cutting-plane master returns ~1e-30, not 0).
  # Misjudging a true 0 < mu_i <= tau costs at most ~tau^2 / eta in the objective.
  free = mu > jnp.sqrt(eps) * (1.0 + jnp.max(jnp.abs(mu)))

  def search(tol):
    allowed = valid & (lagr <= low + tol * scale)

    def one_pass(rows, _):
      c = jnp.where(rows[:, None], pts.T - target[:, None], 0.0)  # [I, k], d = 0
      v = _simplex_least_squares(c, allowed, num_iters=3 * k)
      over = (pts.T @ v - target) > jnp.sqrt(eps) * scale
      return rows | over, v

    _, tries = lax.scan(one_pass, free, None, length=num_constraints)
    return tries

  ladder = jnp.asarray([16 * eps, jnp.sqrt(eps), 1e2 * jnp.sqrt(eps)], dtype)
  tries = jax.vmap(search)(ladder).reshape(-1, k)
  candidates = jnp.zeros((tries.shape[0], slots), dtype).at[:, index].set(tries)
  candidates = jnp.concatenate([w[None], candidates])

  def objective(v):
    q = jnp.tensordot(v, occ, axes=1)
    return augmented_lagrangian(q, cost, constraint_costs, thresholds, multipliers, eta)

  scores = jax.vmap(objective)(candidates)
  return candidates[jnp.argmin(jnp.where(jnp.isfinite(scores), scores, jnp.inf))]


def _cutting_planes(problem: InnerProblem, *, num_iters: int, tol: float | None,
                    with_transitions: bool, fill: str) -> MethodResult:
  """I >= 2: fully-corrective Frank-Wolfe, i.e. a cutting-plane (proximal bundle) method on
  the I-dimensional dual, with the master over the collected vertices solved by `_master`."""
  (cost, constraint_costs, lower, upper, initial_state, thresholds, multipliers,
   eta) = problem[:8]
  next_states = problem.next_states
  num_constraints = thresholds.shape[0]
  num_actions = cost.shape[-1]
  slots = num_iters + 1

  def oracle(mu):
    reward = cost + jnp.einsum("i,ihsa->hsa", mu, constraint_costs)
    return planning.extended_lmo(reward, lower, upper, initial_state, fill=fill,
                                 next_states=next_states)

  def image(v):
    return jnp.sum(cost * v.occupancy), jnp.einsum("ihsa,hsa->i", constraint_costs,
                                                   v.occupancy)

  def store(memory, j, v):
    occ, values, images, mask, extra = memory
    a, y = image(v)
    occ = occ.at[j].set(v.occupancy)
    if with_transitions:
      extra = jax.tree.map(lambda m, x: m.at[j].set(x), extra,
                           (v.actions, v.greedy_transitions, v.state_occupancy))
    return occ, values.at[j].set(a), images.at[j].set(y), mask.at[j].set(True), extra

  v0 = oracle(multipliers)
  shape = v0.occupancy.shape
  dtype = cost.dtype
  extra = ()
  if with_transitions:
    extra = (jnp.zeros((slots,) + v0.actions.shape, v0.actions.dtype),
             jnp.zeros((slots,) + v0.greedy_transitions.shape, dtype),
             jnp.zeros((slots,) + v0.state_occupancy.shape, dtype))
  memory = (jnp.zeros((slots,) + shape, dtype), jnp.zeros((slots,), dtype),
            jnp.zeros((slots, num_constraints), dtype), jnp.zeros((slots,), bool), extra)
  memory = store(memory, 0, v0)
  best = _dual_value(multipliers, v0.value, thresholds, multipliers, eta)

  # float32 runs every step: stopping on its certificate was measured slower under vmap
  # (the while loop's per-member selects) for few DPs saved (docs/results/inner_exactness).
  exact_stop = jnp.finfo(dtype).bits >= 64

  def body(carry):
    it, _, memory, best, best_mu = carry
    _, values, images, mask, _ = memory
    mu, w = _master(values, images, mask, thresholds, multipliers, eta,
                    num_steps=_LOOP_MASTER_STEPS)
    v = oracle(mu)
    value = _dual_value(mu, v.value, thresholds, multipliers, eta)
    best_now = jnp.maximum(best, value)
    # Stop on a proof only: the master's own primal point (its cut weights: a point of Z)
    # within the tolerance of the best dual value (weak duality). With an exact master,
    # "no new cut" (the DP finds nothing below the model at mu) is the same event; with an
    # inexact one it is not, and stopping on it ended solves far from the optimum.
    primal = _restricted_objective(values, images, w, thresholds, multipliers, eta)
    stop_tol = _STOP_RTOL if tol is None else max(_STOP_RTOL, tol)
    done = (primal - best_now <= stop_tol * (1.0 + jnp.abs(primal))) & exact_stop
    better = value > best
    return (it + 1, done, store(memory, it + 1, v), best_now, jnp.where(better, mu, best_mu))

  early = tol is not None and exact_stop
  it, _, memory, best, best_mu = _iterate(
      body, (jnp.zeros((), jnp.int32), jnp.zeros((), bool), memory, best, multipliers),
      num_iters, early=early, can_stop=exact_stop)
  occ, values, images, mask, extra = memory
  # The final master over distinct vertices only: repeated cuts (the LMO returning a known
  # vertex near the optimum) leave its multipliers, i.e. the primal weights, degenerate.
  # Its weights, polished, are one candidate; `_recover` (exact given mu) gives the others.
  points = jnp.concatenate([values[:, None], images], axis=1)
  same_tol = 16 * jnp.finfo(cost.dtype).eps * (1.0 + jnp.max(jnp.abs(points)))
  same = jnp.all(jnp.abs(points[:, None] - points[None]) <= same_tol, axis=-1)
  earlier = jnp.tril(jnp.ones((slots, slots), bool), k=-1)
  mask = mask & ~jnp.any(same & earlier & mask[None, :], axis=1)
  mu_final, w = _master(values, images, mask, thresholds, multipliers, eta)
  # The loop's masters take 12 interior-point steps; this one takes 40: its mu can beat the
  # best queried one, and a better mu tightens both the recovery and the certificate.
  value = _dual_value(mu_final, oracle(mu_final).value, thresholds, multipliers, eta)
  best_mu = jnp.where(value > best, mu_final, best_mu)
  best = jnp.maximum(best, value)
  w = _polish(values, images, mask, w, thresholds, multipliers, eta, num_steps=100)
  w = _recover(values, images, mask, w, best_mu, thresholds, multipliers, eta, occ, cost,
               constraint_costs)
  q = jnp.tensordot(w, occ, axes=1)
  mu_hat = dual_step(q, constraint_costs, thresholds, multipliers, eta)
  best = jnp.maximum(best, _dual_value(mu_hat, oracle(mu_hat).value, thresholds,
                                       multipliers, eta))
  objective = augmented_lagrangian(q, cost, constraint_costs, thresholds, multipliers, eta)
  transitions = None
  if with_transitions:
    actions, greedy, states = extra
    vertices = planning.LMOSolution(values, occ, actions, greedy, states)
    z = jnp.tensordot(w, jax.vmap(lambda v: _z_of(v, num_actions))(vertices), axes=1)
    transitions = _transitions_from_z(z, q, lower, upper, fill, next_states)
  return MethodResult(occupancy=q, transitions=transitions,
                      gap=jnp.maximum(objective - best, 0.0),
                      num_iters=it,
                      dp_calls=(it if early else jnp.asarray(num_iters, jnp.int32)) + 3)


def dual(
    problem: InnerProblem, *, num_iters: int | None, step_rule: str = "linesearch",
    tol: float | None = None, with_transitions: bool = True, fill: str = planning.DEFAULT_FILL,
) -> MethodResult:
  """Exact inner solve through the I-dimensional Fenchel dual (a proximal step on it).

  `f(q) = c.q + g(Dq)`, `g(y) = ||[lambda + eta (y - alpha)]_+||^2 / (2 eta)`, so
  `min_Z f = max_{mu >= 0} psi(mu)`, `psi(mu) = Phi(mu) - mu.alpha - (||mu - lambda||^2 -
  ||lambda||^2) / (2 eta)` with `Phi(mu) = min_{q in Z} (c + D^T mu).q` (one extended DP),
  strongly concave (modulus `1/eta`), and `mu* = lambda_{k+1}`: each OptAug episode is one
  proximal-point step on the optimistic dual function.

  - I = 1: a safeguarded cutting-plane search on `[0, lambda + eta (max D q - alpha)_+]`:
    each step queries the maximiser of the model built from the two bracketing vertices
    (a kink of Phi or a stationary point of one quadratic piece), or the midpoint when the
    last model step did not halve the bracket (bisection on the supergradient
    `D q(mu) - alpha - (mu - lambda)/eta`); `num_iters` steps at most (default 58 in
    float64, 30 in float32); then the best point on the segment between the two
    bracketing vertices. The search ends exactly when the DP finds nothing below the model
    at its maximiser: measured 5-12 DPs in all (mean 7.8) on 100 random instances.
  - I >= 2: cutting planes on `mu` (fully-corrective Frank-Wolfe): `num_iters` DPs (default
    80 in float64, 50 in float32), each at the maximiser of the master over the vertices
    collected so far (`_master`, an interior-point QP in scale-free variables). With a
    `tol` the loop stops only on a proof: no new cut at a converged master, or the
    master's own primal point within `tol` (at least 16 eps) of the best dual value. The
    primal point is then recovered exactly from the best `mu`: the mix of
    Lagrangian-minimising vertices that meets the optimality conditions on `D q`, by an
    active-set least squares on the simplex (`_recover`). Measured against Clarabel
    (`experiments/inner_exactness.py`, 1,000 random instances per dtype, I = 1..3, eta
    1e-2..1e8, lambda 0 or random, box radius up to 0.5): float64, every solve certified,
    relative certificate <= 1.1e-14, error <= 2e-10 (Clarabel's accuracy); float32, 999
    certified (1e-4), error <= 2.5e-6; the other says so (eta 7e6, certificate 2.3e-3).

  `InnerSolution.certified` says whether the certificate is within
  `certified_tolerance(dtype) * (1 + |objective|)`; agents count the solves that are not.
  The certificate is `f(q) - max psi(mu)` over every `mu` queried (weak duality), so
  `objective - optimum <= gap` whatever the iteration budget. The DP count does not depend on
  `eta`. Stopping: with `tol=None` the loops run exactly `num_iters` steps (finished
  iterates stay put: `lax.fori_loop`, reverse-differentiable, every step pays its DP);
  with a `tol` (e.g. `0.0`) they stop once the dual is solved (no new cut), or, for I = 1,
  once the model's bound is within `tol` (relative) of the best dual value (`lax.while_loop`:
  fewer DPs, `dp_calls` counts them; not reverse-differentiable). I >= 2 stops early in
  float64 only (in float32 "no new cut" is decided at rounding level and ended some
  searches too soon). `step_rule` is a Frank-Wolfe option, ignored here.
  """
  del step_rule
  num_constraints = problem.thresholds.shape[0]
  if num_iters is None:
    num_iters = _default_dual_iters(problem.cost.dtype, num_constraints)
  if num_constraints == 1:
    return _bisection(problem, num_iters=num_iters, tol=tol, with_transitions=with_transitions,
                      fill=fill)
  return _cutting_planes(problem, num_iters=max(int(num_iters), 1), tol=tol,
                         with_transitions=with_transitions, fill=fill)


# The policy where q_h(s) = 0 (`solve_inner(unreached=...)`).
UNREACHED = ("greedy", "uniform")

# The inner-solver slot: every method has `frank_wolfe`'s signature,
# `(problem: InnerProblem, *, num_iters, step_rule, tol, with_transitions, fill) ->
# MethodResult`, and `solve_inner(method=name)` (or `method=callable`) dispatches to it.
INNER_METHODS: dict[str, Callable[..., MethodResult]] = {"frank_wolfe": frank_wolfe,
                                                          "dual": dual}


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
    method: str | Callable[..., MethodResult] = "frank_wolfe",
    num_iters: int | None = None,
    step_rule: str = "linesearch",
    tol: float | None = None,
    gradient: str = "unrolled",
    fill: str = planning.DEFAULT_FILL,
    with_transitions: bool = True,
    check: bool = False,
    next_states: jax.Array | None = None,
    unreached: str = "greedy",
) -> InnerSolution:
  """Solves the paper's eq. (primal-step), the inner problem of OptAug-CMDP.

  Minimises `c . q + ||[lambda + eta (D q - alpha)]_+||^2 / (2 eta)` over the occupancy
  measures of all policies and all transitions in the box `[lower, upper]`. Every method
  reaches that set only through its linear minimisation oracle, the extended DP
  (`extended_lmo`).

  Args:
    cost: `[H, S, A]` optimistic objective costs.
    constraint_costs: `[I, H, S, A]` optimistic constraint costs.
    lower: `[H, S, A, S']` lower transition bounds.
    upper: `[H, S, A, S']` upper transition bounds.
    initial_state: integer scalar.
    thresholds: `[I]`.
    multipliers: `[I]`, non-negative.
    eta: positive scalar (traced).
    method: a name in `INNER_METHODS` or a callable with the same signature:
      `"frank_wolfe"` (the paper's Algorithm InnerOpt-FW; `num_iters` steps of
      `step_rule`, default 100; its error at fixed T grows with eta);
      `"dual"` (exact: bisection (I = 1) or cutting planes (I >= 2) on the I-dimensional
      Fenchel dual, with a duality-gap certificate; see `kernels.dual`).
    num_iters: the method's iteration budget (static; `None`: the method's default). With
      `tol=None` the loops are `lax.fori_loop`s and reverse-differentiable.
    step_rule: Frank-Wolfe's step: `"standard"` (the paper's `2 / (t + 2)`) or
      `"linesearch"` (exact line search on the piecewise-quadratic objective; keeps
      accuracy for large `eta`).
    tol: if given, Frank-Wolfe stops as soon as its gap is `<= tol` (`lax.while_loop`: not
      reverse-differentiable; under `vmap` every batch member runs until the slowest
      stops, results stay per-member exact).
    gradient: how derivatives flow (values are identical in both modes):
      `"unrolled"`: reverse mode through the iterations: the derivative of the T-step
        output. Needs `tol=None`.
      `"envelope"`: Danskin's theorem at the returned point. Only `objective` carries a
        derivative, that of the optimal value: `d/dc = q*`, `d/dD_i = lambda+_i q*`,
        `d/dalpha = -lambda+`, `d/dlambda = lambda+ / eta`,
        `d/deta = -||lambda+||^2 / (2 eta^2) + lambda+ . (D q* - alpha) / eta` with
        `lambda+ = [lambda + eta (D q* - alpha)]_+`; for the box, the derivative of
        `min_{q in Q(box)} <grad f(q*), q>` (same KKT multipliers). The iterations are not
        differentiated (no memory for them); the other outputs are constants. Exact at an
        exact optimum; the error is of the order of the solver's accuracy.
    fill: the greedy-fill formulation of the extended DP (`FILL_METHODS`).
    with_transitions: also recover the optimistic transitions (eq. (retrieve-p)); agents
      that only need the policy pass `False` (then `transitions` is `None`).
    next_states: `None` (dense) or the sparse layout's `[H or 1, S, A, N]` int next
      states of the slots of `lower` and `upper` (`extended_lmo`).
    unreached: the policy at the `(h, s)` that `q` never reaches, where eq. (retrieve-pi) is
      0/0 and any choice leaves `q` (and the objective) unchanged. `"greedy"` (default):
      the action of the extended DP on the gradient at the solution, `c + D^T lambda+`
      (one more DP; the Lagrangian-optimistic action, which is what the dual-based agents
      play everywhere); the true dynamics reach states the optimistic plan does not, and
      there a uniform policy random-walks (on a 20 x 20 grid it never reaches the goal).
      `"uniform"`: the uniform policy (the choice of every result committed before
      2026-11-24).
    check: also check traced arguments (an empty box, an initial state out of range,
      non-finite or negative costs and multipliers, non-finite thresholds, an eta that is
      not positive and finite) through `checkify`; wrap the outer function in `oj.checked` to get a `ValueError`.
      Concrete (eager) arguments are always checked on the host.

  Returns:
    `InnerSolution`; `objective - optimum <= fw_gap`.
  """
  if isinstance(method, str):
    if method not in INNER_METHODS:
      raise ValueError(f"method: expected one of {tuple(INNER_METHODS)} or a callable,"
                       f" got {method!r}")
    method_fn = INNER_METHODS[method]
  elif callable(method):
    method_fn = method
  else:
    raise ValueError(f"method: expected a name or a callable, got {method!r}")
  if step_rule not in STEP_RULES:
    raise ValueError(f"step_rule: expected one of {STEP_RULES}, got {step_rule!r}")
  if gradient not in GRADIENTS:
    raise ValueError(f"gradient: expected one of {GRADIENTS}, got {gradient!r}")
  if unreached not in UNREACHED:
    raise ValueError(f"unreached: expected one of {UNREACHED}, got {unreached!r}")
  planning.check_fill(fill)
  validation.check_positive("eta", eta, allow_none=False)
  if num_iters is not None and (int(num_iters) != num_iters or num_iters < 0):
    raise ValueError(f"num_iters: must be a non-negative integer, got {num_iters!r}")
  chex.assert_rank([cost, constraint_costs, lower, upper, thresholds, multipliers],
                   [3, 4, 4, 4, 1, 1])
  chex.assert_equal_shape([lower, upper])
  num_constraints = constraint_costs.shape[0]
  for name, x in (("thresholds", thresholds), ("multipliers", multipliers)):
    if x.shape != (num_constraints,):
      raise ValueError(f"{name}: expected shape ({num_constraints},) (one per constraint of"
                       f" constraint_costs), got {x.shape}")
  checks.initial_state(initial_state, cost.shape[1], "solve_inner", check=check)
  for name, x in (("cost", cost), ("constraint_costs", constraint_costs),
                  ("multipliers", multipliers)):
    checks.finite(name, x, "solve_inner", check=check, low=0.0)
  checks.finite("thresholds", thresholds, "solve_inner", check=check)
  checks.finite("eta", eta, "solve_inner", check=check, low=0.0, low_open=True)
  checks.box(lower, upper, "solve_inner", check=check)
  problem = InnerProblem(cost, constraint_costs, lower, upper, initial_state, thresholds,
                         multipliers, eta, next_states)
  inputs = lax.stop_gradient(problem) if gradient == "envelope" else problem
  result = method_fn(inputs, num_iters=num_iters, step_rule=step_rule, tol=tol,
                     with_transitions=with_transitions, fill=fill)
  q = result.occupancy
  objective = augmented_lagrangian(q, cost, constraint_costs, thresholds, multipliers, eta)
  fallback = None
  if gradient == "envelope" or unreached == "greedy":
    # The gradient at q*: the linearised problem there has the same optimal KKT
    # multipliers (box sensitivity), and its extended DP acts at every (h, s).
    grad = lax.stop_gradient(
        cost + jnp.einsum("i,ihsa->hsa",
                          dual_step(q, constraint_costs, thresholds, multipliers, eta),
                          constraint_costs))
    linear = planning.extended_lmo(grad, lower, upper, initial_state, fill=fill,
                                   next_states=next_states)
    if gradient == "envelope":
      objective = objective + (linear.value - lax.stop_gradient(linear.value))
    if unreached == "greedy":
      fallback = jax.nn.one_hot(linear.actions, cost.shape[-1], dtype=q.dtype)
  return InnerSolution(
      occupancy=q,
      policy=planning.policy_from_occupancy(q, fallback),  # integer actions: no gradient
      transitions=result.transitions,
      objective=objective,
      fw_gap=result.gap,
      num_iters=result.num_iters,
      dp_calls=result.dp_calls + (unreached == "greedy" or gradient == "envelope"),
      certified=result.gap <= certified_tolerance(cost.dtype) * (1.0 + jnp.abs(objective)),
  )
