"""The exact solver for one constraint (I = 1): a warm-started, safeguarded cutting-plane
search on the one-dimensional dual `psi(mu)` (see `dual_function`).

`psi` is maximised at `mu* = lambda + eta (D q* - alpha)`, and `D q(mu)` does not increase
with `mu`. The first DP is at a start point `m0`: the prox centre `lambda` (a cold start),
or, given the last solve's `WarmStart`, the maximiser of the model of its two vertices
re-filled in this box (`planning.policy_vertex`; their lines bound `Phi` from above, so
where the DP at `m0` meets that model, `m0 = mu*` and the optimum lies on the two vertices'
segment: one DP in all). The DP at `m0`, with supergradient `g = D q(m0) - alpha - (m0 -
lambda) / eta`, brackets `mu*` in `[m0, lambda + eta (D q(m0) - alpha)]` when `g > 0` and in
`[max(0, lambda + eta (D q(m0) - alpha)), m0]` otherwise (the one-cut model's maximiser is
the far end); with a warm start, the re-filled line on the far side is the bracket's partner
there. Cheap exact ends come first:

- `g <= 0` at `m0 = 0`: `mu* = 0` (one DP in all; the plan meets the constraint);
- (cold) a probe `PROBE_FRACTION` of the way to the far end: late in a run `mu*` moves
  little, so the probe usually passes it and holds the other vertex of its kink (a bracket
  of two queried vertices, then one model step); a probe that falls short moves the near
  end to it and the far end to the one-cut step from it (`D q` does not increase), at one
  DP's cost;
- (cold) the DP at the far end: where the vertex has not changed in between, the
  supergradient there is 0 and that end is `mu*`.

Otherwise each step queries the maximiser of the model built from the two bracketing
vertices' Lagrangian lines (a kink of `Phi` or the stationary point of one quadratic
piece); after `STALLS_BEFORE_BISECTION` model steps in a row that did not halve the
bracket, a safeguard step (twice the last move from the end that moved, or the midpoint if
nearer). The search ends when the DP finds nothing below the model at its maximiser
(Kelley's finite end: the optimum lies on the two bracketing vertices' segment), or when
the model's maximum is within `dual_function.stop_tolerance` of the best dual value. An
exact line search on that segment gives the primal point (its objective, the two-cut
model's maximum, is below the last model's: the stop's gap certifies it), and the two
vertices are the next solve's `WarmStart`. The last DP, at the search's final dual point,
is `SolverResult.lmo`: `solve_inner` takes the greedy actions at unreached states from it
instead of one more DP. Only a search out of steps pays a last DP at the primal point's
multiplier (to tighten its certificate).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import batching, planning
from ..multiplier_updates import dual_step
from . import loops, retrieve
from . import problem as problem_lib
from .dual_function import dual_value, stop_tolerance
from .line_search import exact_line_search

# The first query after the prox centre: this fraction of the way to the one-cut step's end.
# Late in a run `mu*` moves little while the one-cut step jumps by `eta |g|` (a vertex's
# constraint value is off alpha by a finite amount), beyond several kinks; the probe usually
# lands just past `mu*`, on its kink's other vertex, and one model step then finds `mu*`.
PROBE_FRACTION = 0.01
# Model steps in a row that may fail to halve the bracket before a bisection step. One is
# common and harmless: with one end's line exact at `mu*`, model steps converge fast while
# the bracket's other, loose end moves little. Bisecting after one threw that away.
STALLS_BEFORE_BISECTION = 2


class _SearchState(NamedTuple):
  it: jax.Array  # [] int, DPs taken in the loop
  done: jax.Array  # [] bool, the dual is solved
  probing: jax.Array  # [] bool, the next end query is the probe near the prox centre
  stalls: jax.Array  # [] int, consecutive model steps that did not halve the bracket
  move: jax.Array  # [] the last step's move of an end (> 0: lo rose, < 0: hi fell)
  lo: jax.Array  # [] bracket's left end (mu* >= lo)
  hi: jax.Array  # [] bracket's right end (mu* <= hi)
  has_lo: jax.Array  # [] bool, v_lo is the vertex at lo (False: lo not queried yet)
  has_hi: jax.Array  # [] bool, v_hi is the vertex at hi
  v_lo: planning.LMOSolution  # the extended DP's vertex at lo
  v_hi: planning.LMOSolution  # the extended DP's vertex at hi
  best: jax.Array  # [] the best dual value psi queried (a lower bound of f*)
  mu_last: jax.Array  # [] the last query
  v_last: planning.LMOSolution  # the extended DP at mu_last


def _shifted_lmo(problem: problem_lib.InnerProblem, mu):
  """The extended DP at the costs `c + mu D` of the one constraint (the search's oracle)."""
  return problem.lmo(problem.cost + mu * problem.constraint_costs[0])


class _Dual(NamedTuple):
  """The one-dimensional dual `psi` of one solve and the search's arithmetic on it."""

  cost: jax.Array  # [H, S, A] c
  d: jax.Array  # [H, S, A] the constraint's costs D
  alpha: jax.Array  # [] its threshold
  lam: jax.Array  # [] its multiplier, the prox centre
  eta: jax.Array  # []
  thresholds: jax.Array  # [1]
  multipliers: jax.Array  # [1]
  tiny: Any  # the rounding unit of the comparisons (16 eps, a NumPy scalar of the dtype)

  @classmethod
  def of(cls, problem: problem_lib.InnerProblem, multipliers, eta) -> _Dual:
    cost, thresholds = problem.cost, problem.thresholds
    return cls(
      cost=cost,
      d=problem.constraint_costs[0],
      alpha=thresholds[0],
      lam=multipliers[0],
      eta=eta,
      thresholds=thresholds,
      multipliers=multipliers,
      tiny=16 * jnp.finfo(cost.dtype).eps,
    )

  def psi(self, mu, v):
    return dual_value(mu[None], v.value, self.thresholds, self.multipliers, self.eta)

  def constraint(self, v):
    return jnp.sum(self.d * v.occupancy)

  def slope(self, mu, v):  # a supergradient of psi at mu: D q(mu) - alpha - (mu - lambda) / eta
    return self.constraint(v) - self.alpha - (mu - self.lam) / self.eta

  def slope_noise(self, mu, v):  # the rounding of `slope`
    scale = 1.0 + jnp.abs(self.constraint(v)) + jnp.abs(self.alpha)
    return self.tiny * (scale + jnp.abs(mu - self.lam) / self.eta)

  def lines(self, v):  # the Lagrangian of vertex v as a line in mu: a + mu y
    return jnp.sum(self.cost * v.occupancy), self.constraint(v)

  def peak(self, a_lo, y_lo, a_hi, y_hi, parallel):
    """Maximiser of the two-cut model `min(a_lo + mu y_lo, a_hi + mu y_hi) - mu alpha -
    (mu - lambda)^2 / (2 eta)` (`y_lo >= y_hi`: D q(mu) does not increase in mu): the
    stationary point of the piece that holds it, or the lines' crossing (`parallel` for
    lines of one slope)."""
    gap = y_lo - y_hi
    kink = jnp.where(gap > 0, (a_hi - a_lo) / jnp.where(gap > 0, gap, 1.0), parallel)
    lam, eta, alpha = self.lam, self.eta, self.alpha
    top_lo, top_hi = lam + eta * (y_lo - alpha), lam + eta * (y_hi - alpha)
    return jnp.where(top_lo <= kink, top_lo, jnp.where(top_hi >= kink, top_hi, kink))

  def candidate(self, lo, hi, a_lo, y_lo, a_hi, y_hi):
    """The two-cut model's maximiser on [lo, hi] (`peak`)."""
    return jnp.clip(self.peak(a_lo, y_lo, a_hi, y_hi, 0.5 * (lo + hi)), lo, hi)


class _Hint(NamedTuple):  # the last solve's two vertices re-filled in this box
  valid: jax.Array  # [] bool, False: no hint (a cold start)
  v_lo: planning.LMOSolution  # the vertex of the larger D q (the model's left piece)
  v_hi: planning.LMOSolution
  lo_line: tuple[jax.Array, jax.Array]  # its Lagrangian line (a, y)
  hi_line: tuple[jax.Array, jax.Array]
  start: jax.Array  # [] the model's maximiser (>= 0): the first query


def _refilled_hint(problem: problem_lib.InnerProblem, dual: _Dual, warm) -> _Hint:
  """The hint of `warm` in this box (`planning.policy_vertex`). Two equal vertices (a last
  solve that ended on one vertex, e.g. at `mu* = 0`) are re-filled once (under `vmap`, when
  every member's are)."""

  def refill(i):
    return problem.transitions.vertex(
      dual.cost, warm.actions[i], warm.values[i], problem.initial_state
    )

  first = refill(0)
  same = jnp.all(warm.actions[0] == warm.actions[1]) & jnp.all(warm.values[0] == warm.values[1])
  second = batching.batch_cond(same, lambda _: first, lambda _: refill(1), None)
  pair = jax.tree.map(lambda x, y: jnp.stack([x, y]), first, second)
  # The line of the larger D q holds the model left of the lines' crossing.
  steeper = jnp.argmax(jnp.sum(dual.d * pair.occupancy, axis=(1, 2, 3)))
  w_lo = jax.tree.map(lambda x: x[steeper], pair)
  w_hi = jax.tree.map(lambda x: x[1 - steeper], pair)
  (wa_lo, wy_lo), (wa_hi, wy_hi) = dual.lines(w_lo), dual.lines(w_hi)
  start = jnp.where(
    warm.valid, jnp.maximum(dual.peak(wa_lo, wy_lo, wa_hi, wy_hi, jnp.inf), 0.0), dual.lam
  )
  return _Hint(warm.valid, w_lo, w_hi, (wa_lo, wy_lo), (wa_hi, wy_hi), start)


def _first_bracket(dual: _Dual, m0, v0, hint: _Hint | None) -> _SearchState:
  """The state after the DP `v0` at the first query `m0`: the bracket its supergradient
  gives, the cheap exact ends, and the hint's lines as partners."""
  g0 = dual.slope(m0, v0)
  up = g0 > 0
  far = jnp.maximum(dual.lam + dual.eta * (dual.constraint(v0) - dual.alpha), 0.0)  # one cut
  at_zero = ~up & (m0 <= 0)  # g <= 0 at mu = 0: mu* = 0
  flat = jnp.abs(g0) <= dual.slope_noise(m0, v0)  # mu* = m0 (to rounding)
  solved = at_zero | flat
  lo = jnp.where(up | solved, m0, far)
  hi = jnp.where(up & ~solved, far, m0)
  v_lo = v_hi = v0
  has_lo, has_hi = up | solved, ~up | solved
  if hint is not None:
    (wa_lo, wy_lo), (wa_hi, wy_hi) = hint.lo_line, hint.hi_line
    # The DP at the model's maximiser meets the model: that point maximises psi (the model
    # bounds Phi from above), and the optimum lies on the segment of the two vertices.
    model_at = jnp.minimum(wa_lo + m0 * wy_lo, wa_hi + m0 * wy_hi)
    on_model = hint.valid & ~solved & (v0.value >= model_at - dual.tiny * (1.0 + jnp.abs(model_at)))
    # Otherwise the hint's line on the far side of m0 is the search's partner there: the
    # first step is a model step, not an end query.
    partner_hi = hint.valid & up & ~solved
    partner_lo = hint.valid & ~up & ~solved
    v_lo = loops.tree_where(on_model | partner_lo, hint.v_lo, v0)
    v_hi = loops.tree_where(on_model | partner_hi, hint.v_hi, v0)
    has_lo, has_hi = has_lo | on_model | partner_lo, has_hi | on_model | partner_hi
    lo, hi = jnp.where(on_model, m0, lo), jnp.where(on_model, m0, hi)
    solved = solved | on_model
  return _SearchState(
    it=jnp.zeros((), jnp.int32),
    done=solved,
    probing=~solved,
    stalls=jnp.zeros((), jnp.int32),
    move=jnp.zeros((), dual.cost.dtype),
    lo=lo,
    hi=hi,
    has_lo=has_lo,
    has_hi=has_hi,
    v_lo=v_lo,
    v_hi=v_hi,
    best=dual.psi(m0, v0),
    mu_last=m0,
    v_last=v0,
  )


def _next_query(dual: _Dual, m0, s: _SearchState, lines):
  """Where the step queries: an end of the bracket not queried yet first (the probe near
  the first query while probing); then the model's maximiser (Kelley's finite end on the
  kinks), or a safeguard step after stalled model steps. `lines`: the two vertices'
  (`_Dual.lines`). Also returns whether it bisects."""
  (a_lo, y_lo), (a_hi, y_hi) = lines
  model = dual.candidate(s.lo, s.hi, a_lo, y_lo, a_hi, y_hi)
  # The safeguard after stalled model steps: twice the last move from the end that moved,
  # or the midpoint if nearer (a far end may be loose: its midpoint would waste progress).
  bisect = s.stalls >= STALLS_BEFORE_BISECTION
  mid = 0.5 * (s.lo + s.hi)
  safeguard = jnp.where(
    s.move > 0,
    jnp.minimum(s.lo + 2.0 * s.move, mid),
    jnp.where(s.move < 0, jnp.maximum(s.hi + 2.0 * s.move, mid), mid),
  )
  searched = jnp.where(bisect, safeguard, model)
  # The probe: a point near the first query on the side of the unqueried end.
  probe_hi = m0 + PROBE_FRACTION * (s.hi - m0)
  probe_lo = m0 - PROBE_FRACTION * (m0 - s.lo)
  end_hi = jnp.where(s.probing, probe_hi, s.hi)
  end_lo = jnp.where(s.probing, probe_lo, s.lo)
  return jnp.where(~s.has_hi, end_hi, jnp.where(~s.has_lo, end_lo, searched)), bisect


def _update(dual: _Dual, s: _SearchState, lines, mu, v, bisect, tol) -> _SearchState:
  """The state after the DP `v` at `mu`: the bracket's new ends, its vertices, `done`."""
  need_hi, need_lo = ~s.has_hi, ~s.has_lo
  (a_lo, y_lo), (a_hi, y_hi) = lines
  best_now = jnp.maximum(s.best, dual.psi(mu, v))
  g, noise = dual.slope(mu, v), dual.slope_noise(mu, v)
  # A probe short of mu* moves the queried end to it; the far end, still to be queried,
  # to the one-cut step from it (D q does not increase). One past mu* is the far end.
  probed = s.probing & (need_hi | need_lo)
  short = probed & jnp.where(need_hi, g > noise, g < -noise)
  one_cut = dual.lam + dual.eta * (dual.constraint(v) - dual.alpha)
  # An end query: the bracket's end is mu* when the supergradient there points out of it.
  end_solved = ~short & ((need_hi & (g >= -noise)) | (need_lo & (g <= noise)))
  # A model step: the model is an upper bound of Phi built from two of its lines; where it
  # meets Phi at its own maximiser, that point maximises psi: stop (exact, up to rounding).
  upper = jnp.minimum(a_lo + mu * y_lo, a_hi + mu * y_hi)
  model_solved = ~bisect & (v.value >= upper - dual.tiny * (1.0 + jnp.abs(upper)))
  if tol is not None:
    # Where `mu` is the model's own maximiser (not clipped), the next segment's optimum
    # (the primal point) lies below the model's maximum: a gap within `tol` certifies it.
    model_max = dual_value(mu[None], upper, dual.thresholds, dual.multipliers, dual.eta)
    peak = dual.peak(a_lo, y_lo, a_hi, y_hi, 0.5 * (s.lo + s.hi))
    unclipped = (peak >= s.lo) & (peak <= s.hi)
    close = model_max - best_now <= tol * (1.0 + jnp.abs(model_max))
    model_solved = model_solved | (~bisect & unclipped & close)
  is_end = need_hi | need_lo
  done = jnp.where(is_end, end_solved, model_solved)
  step_up = jnp.where(need_hi, short, jnp.where(need_lo, ~short, g > 0))  # mu* >= mu
  # The queried end moves to mu (a probe's; an end query's mu is that end), and so does the
  # other end of a short probe's side.
  new_lo = jnp.where(end_solved | (~is_end & step_up) | (need_lo ^ short), mu, s.lo)
  new_hi = jnp.where(end_solved | (~is_end & ~step_up) | (need_hi ^ short), mu, s.hi)
  new_hi = jnp.where(short & need_hi, jnp.maximum(jnp.minimum(s.hi, one_cut), mu), new_hi)
  new_lo = jnp.where(short & need_lo, jnp.minimum(jnp.maximum(s.lo, one_cut), mu), new_lo)
  halved = (new_hi - new_lo) <= 0.5 * (s.hi - s.lo)
  take_lo = end_solved | step_up
  take_hi = end_solved | ~step_up
  return _SearchState(
    it=s.it + 1,
    done=done,
    probing=jnp.zeros((), bool),
    stalls=jnp.where(is_end | bisect | halved, 0, s.stalls + 1).astype(jnp.int32),
    move=jnp.where(is_end, 0.0, (new_lo - s.lo) + (new_hi - s.hi)),
    lo=new_lo,
    hi=new_hi,
    has_lo=s.has_lo | take_lo,
    has_hi=s.has_hi | take_hi,
    v_lo=loops.tree_where(take_lo, v, s.v_lo),
    v_hi=loops.tree_where(take_hi, v, s.v_hi),
    best=best_now,
    mu_last=mu,
    v_last=v,
  )


def two_cut_search(
  problem: problem_lib.InnerProblem,
  multipliers,
  eta,
  *,
  num_iters: int,
  tol: float | None,
  with_transitions: bool,
  fixed_length: bool,
  warm: problem_lib.WarmStart | None = None,
) -> problem_lib.SolverResult:
  """The I = 1 exact solve (module docstring); `num_iters` loop steps at most. `warm`: the
  last solve's two vertices (`WarmStart`), re-evaluated here; `None`: a cold start."""
  dual = _Dual.of(problem, multipliers, eta)
  stop_tol = None if tol is None else stop_tolerance(dual.cost.dtype, tol, 1)
  # The first query: the prox centre, or the maximiser of the model that the last solve's
  # two vertices, re-filled in this box, give (`WarmStart`); one DP there.
  hint = None if warm is None else _refilled_hint(problem, dual, warm)
  m0 = dual.lam if hint is None else hint.start
  v0 = _shifted_lmo(problem, m0)
  start = _first_bracket(dual, m0, v0, hint)
  early = tol is not None and not fixed_length

  def running(s: _SearchState):
    return (s.it < num_iters) & ~s.done

  def step(s: _SearchState) -> _SearchState:
    lines = dual.lines(s.v_lo), dual.lines(s.v_hi)
    mu, bisect = _next_query(dual, m0, s, lines)
    if early:  # under vmap, the DP runs for the members still searching alone
      v = batching.for_active(running(s), _shifted_lmo, problem, mu)
    else:
      v = _shifted_lmo(problem, mu)
    return _update(dual, s, lines, mu, v, bisect, stop_tol)

  s = loops.iterate(step, start, num_iters=num_iters, running=running, early=early)
  return _primal_point(
    problem, dual, s, num_iters=num_iters, early=early, with_transitions=with_transitions
  )


def _primal_point(
  problem: problem_lib.InnerProblem,
  dual: _Dual,
  s: _SearchState,
  *,
  num_iters: int,
  early: bool,
  with_transitions: bool,
) -> problem_lib.SolverResult:
  """The search's result: the primal point on the two bracketing vertices' segment (both
  minimise the Lagrangian at `mu*`), its certificate, and the next solve's hint."""
  cost, d, lam, eta = dual.cost, dual.d, dual.lam, dual.eta
  v_lo, v_hi, best = s.v_lo, s.v_hi, s.best
  # The primal point lies on the two vertices' segment. An end never queried (a search
  # out of steps) has no vertex: its segment is the other end.
  v_lo = loops.tree_where(s.has_lo, v_lo, v_hi)
  v_hi = loops.tree_where(s.has_hi, v_hi, v_lo)
  direction = v_lo.occupancy - v_hi.occupancy
  a = lam / eta + jnp.sum(d * v_hi.occupancy) - dual.alpha
  step = exact_line_search(jnp.sum(cost * direction), a[None], jnp.sum(d * direction)[None], eta)
  q = v_hi.occupancy + step * direction
  objective = problem_lib.objective(problem, q, dual.multipliers, eta)
  mu_last, v_last, extra = s.mu_last, s.v_last, jnp.zeros((), jnp.int32)

  def certify(_):  # one more DP, at the primal point's multiplier: a tighter certificate
    mu_hat = dual_step(q, problem.constraint_costs, dual.thresholds, dual.multipliers, eta)[0]
    return mu_hat, _shifted_lmo(problem, mu_hat), jnp.ones((), jnp.int32)

  if early:  # only a search out of steps pays it (skipped when the whole batch finished)
    mu_last, v_last, extra = batching.batch_cond(
      s.done, lambda _: (mu_last, v_last, extra), certify, None
    )
  else:  # every step is paid anyway
    mu_last, v_last, extra = certify(None)
  best = jnp.maximum(best, dual.psi(mu_last, v_last))
  transitions = None
  if with_transitions:
    num_actions = cost.shape[-1]
    z = step * retrieve.vertex_z(v_lo, num_actions) + (1.0 - step) * retrieve.vertex_z(
      v_hi, num_actions
    )
    transitions = retrieve.transitions_from_z(z, problem.transitions)
  return problem_lib.SolverResult(
    occupancy=q,
    transitions=transitions,
    gap=jnp.maximum(objective - best, 0.0),
    num_iters=s.it,
    dp_calls=(s.it if early else jnp.asarray(num_iters, jnp.int32)) + 1 + extra,
    lmo=v_last,
    lmo_multipliers=mu_last[None],
    warm=problem_lib.WarmStart(
      actions=jnp.stack([v_lo.actions, v_hi.actions]).astype(jnp.int32),
      values=jnp.stack([v_lo.next_values, v_hi.next_values]),
      valid=jnp.ones((), bool),
    ),
  )
