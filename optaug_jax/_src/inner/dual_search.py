"""The exact solver for one constraint (I = 1): a safeguarded cutting-plane search on the
one-dimensional dual `psi(mu)` (see `dual_function`).

`mu*` lies in `[0, lambda + eta (max D q - alpha)_+]` (since `D q - alpha = (mu* -
lambda) / eta` there). Each step queries the maximiser of the model built from the two
bracketing vertices' Lagrangian lines (a kink of `Phi` or the stationary point of one
quadratic piece), or the bracket's midpoint when the last model step did not halve it
(bisection on the supergradient `D q(mu) - alpha - (mu - lambda) / eta`). The search ends
exactly when the DP finds nothing below the model at its maximiser (Kelley's finite end on
the kinks of `Phi`). Both bracketing vertices then minimise the Lagrangian at `mu*`, so the
optimum lies on their segment: an exact line search there gives the primal point.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import planning
from ..multiplier_updates import dual_step
from . import loops, retrieve
from . import problem as problem_lib
from .dual_function import dual_value
from .line_search import exact_line_search


class _SearchState(NamedTuple):
  it: jax.Array  # [] int, steps taken
  done: jax.Array  # [] bool, the dual is solved
  stalls: jax.Array  # [] int, 1 when the last model step did not halve the bracket
  lo: jax.Array  # [] bracket's left end (mu* >= lo)
  hi: jax.Array  # [] bracket's right end (mu* <= hi)
  v_lo: planning.LMOSolution  # the extended DP's vertex at lo
  v_hi: planning.LMOSolution  # the extended DP's vertex at hi
  best: jax.Array  # [] the best dual value psi queried (a lower bound of f*)


def two_cut_search(
  problem: problem_lib.InnerProblem,
  multipliers,
  eta,
  *,
  num_iters: int,
  tol: float | None,
  with_transitions: bool,
  fill: str,
  fixed_length: bool,
) -> problem_lib.SolverResult:
  """The I = 1 exact solve (module docstring); `num_iters` steps at most."""
  cost, constraint_costs, thresholds = (problem.cost, problem.constraint_costs, problem.thresholds)
  dtype = cost.dtype
  d, alpha, lam = constraint_costs[0], thresholds[0], multipliers[0]
  num_actions = cost.shape[-1]

  def oracle(mu):
    return planning.extended_lmo(
      cost + mu * d,
      problem.lower,
      problem.upper,
      problem.initial_state,
      fill=fill,
      next_states=problem.next_states,
    )

  def psi(mu, v):
    return dual_value(mu[None], v.value, thresholds, multipliers, eta)

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

  def body(s: _SearchState) -> _SearchState:
    # Safeguarded: the model's maximiser, or the midpoint when the model failed to halve
    # the bracket last time (bisection's guarantee, Kelley's finite end on the kinks).
    (a_lo, y_lo), (a_hi, y_hi) = lines(s.v_lo), lines(s.v_hi)
    model = candidate(s.lo, s.hi, a_lo, y_lo, a_hi, y_hi)
    mu = jnp.where(s.stalls > 0, 0.5 * (s.lo + s.hi), model)
    v = oracle(mu)
    # The model is an upper bound of Phi built from two of its lines; where it meets Phi at
    # its own maximiser, that point maximises psi: stop (exact, up to rounding).
    upper = jnp.minimum(a_lo + mu * y_lo, a_hi + mu * y_hi)
    scale = 1.0 + jnp.abs(upper)
    done = (s.stalls == 0) & (v.value >= upper - tiny * scale)
    best_now = jnp.maximum(s.best, psi(mu, v))
    if tol is not None:  # the model's maximum bounds max psi from above
      model_max = dual_value(mu[None], upper, thresholds, multipliers, eta)
      done = done | ((s.stalls == 0) & (model_max - best_now <= tol * scale))
    up = slope(mu, v) > 0  # mu* >= mu
    new_lo, new_hi = jnp.where(up, mu, s.lo), jnp.where(up, s.hi, mu)
    halved = (new_hi - new_lo) <= 0.5 * (s.hi - s.lo)
    return _SearchState(
      it=s.it + 1,
      done=done,
      stalls=(~halved & (s.stalls == 0)).astype(jnp.int32),
      lo=new_lo,
      hi=new_hi,
      v_lo=loops.tree_where(up, v, s.v_lo),
      v_hi=loops.tree_where(up, s.v_hi, v),
      best=best_now,
    )

  early = tol is not None and not fixed_length
  start = _SearchState(
    it=jnp.zeros((), jnp.int32),
    done=jnp.zeros((), bool),
    stalls=jnp.zeros((), jnp.int32),
    lo=lo,
    hi=hi,
    v_lo=v_lo,
    v_hi=v_hi,
    best=best,
  )
  s = loops.iterate(
    body, start, num_iters=num_iters, running=lambda s: (s.it < num_iters) & ~s.done, early=early
  )
  v_lo, v_hi, best = s.v_lo, s.v_hi, s.best
  # Both bracketing vertices minimise the Lagrangian at mu*: the optimum lies on their
  # segment (the whole optimal face when the bracket holds a single kink of Phi).
  direction = v_lo.occupancy - v_hi.occupancy
  a = lam / eta + jnp.sum(d * v_hi.occupancy) - alpha
  step = exact_line_search(jnp.sum(cost * direction), a[None], jnp.sum(d * direction)[None], eta)
  q = v_hi.occupancy + step * direction
  mu_hat = dual_step(q, constraint_costs, thresholds, multipliers, eta)[0]
  best = jnp.maximum(best, psi(mu_hat, oracle(mu_hat)))
  objective = problem_lib.objective(problem, q, multipliers, eta)
  transitions = None
  if with_transitions:
    z = step * retrieve.vertex_z(v_lo, num_actions) + (1.0 - step) * retrieve.vertex_z(
      v_hi, num_actions
    )
    transitions = retrieve.transitions_from_z(
      z, problem.lower, problem.upper, fill, problem.next_states
    )
  return problem_lib.SolverResult(
    occupancy=q,
    transitions=transitions,
    gap=jnp.maximum(objective - best, 0.0),
    num_iters=s.it,
    dp_calls=(s.it if early else jnp.asarray(num_iters, jnp.int32)) + 3,
  )
