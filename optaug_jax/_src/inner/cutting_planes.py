"""The exact solver for two or more constraints (I >= 2): cutting planes on the dual.

Fully-corrective Frank-Wolfe, i.e. a cutting-plane (proximal bundle) method on the
I-dimensional dual `psi(mu)` (see `dual_function`): each step queries the extended DP at the
maximiser of the master over the vertices collected so far (`master.master`) and adds the
vertex it returns as a cut. The loop stops only on a proof: the master's own primal point
(its cut weights: a point of Z) within the tolerance of the best dual value.

- The first DP is at the prox centre (a cold start), or, given the last solve's
  `WarmStart` (`exact(warm_cuts=True)`), at the maximiser of the master of its `I + 1`
  vertices re-filled in this box (`planning.policy_vertex`; valid cuts, as any feasible
  point's line bounds `Phi` from above). Where that model meets `psi` there, the one DP
  proves the solve.
- A cold solve ends on a final master of 40 steps (its weights polished), and one more DP
  at its maximiser only where the point is not certified without it. A warm one, proven,
  ends with its last master's weights and its best `mu`. `recover` (exact given `mu`)
  gives the primal point either way; its certificate is its objective minus the best dual
  value queried.
- Which point of the optimal face a solve returns moves OptAug's learning statistics (the
  tied vertices a solve mixes decide where the agent explores): the warm start certifies
  other points, so it is asked for (`exact(warm_cuts=True)`), not the default
  (docs/results/statistics, "Several constraints").
- The last DP, at the primal point's multiplier `[lambda + eta (D q - alpha)]_+`, is
  returned as `SolverResult.lmo`: `solve_inner` takes the greedy actions at unreached
  states from it.
- Under `vmap` the loop runs while some member cuts, and a member that has stopped keeps
  its state (one memory slot written per step, not the whole memory selected).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .. import batching, horizon, numerics, planning
from ..multiplier_updates import dual_step
from . import loops, recovery, retrieve
from . import master as master_lib
from . import problem as problem_lib
from .dual_function import dual_value, stop_tolerance

# Interior-point steps of each master inside the cutting-plane loop (the loop stops at the
# relative gap `dual_function.stop_tolerance`). Measured on a 60-state random CMDP with I =
# 2 (16 seeds, warm-started OptAug, docs/results/episode_cost "Several constraints"): 20
# steps left the master's weights too inexact to meet the stop (4% of solves ran the whole
# budget; DPs 14.8 per solve, the batch's maximum 42.6).
LOOP_MASTER_STEPS = 40


class _CutState(NamedTuple):
  it: jax.Array  # [] int, cuts added after the first DP
  done: jax.Array  # [] bool, the stop was proven
  memory: recovery.VertexMemory
  best: jax.Array  # [] the best dual value psi queried
  best_mu: jax.Array  # [I] where it was queried
  weights: jax.Array  # [slots] the last master's cut weights (its primal point)
  mu_last: jax.Array  # [I] the last query
  v_last: planning.LMOSolution  # the extended DP there


def _lagrangian_lmo(problem: problem_lib.InnerProblem, mu):
  """The extended DP at `c + mu . D` (the oracle; seven call sites: `horizon.rolled_scans`)."""
  size = problem.cost.shape[0] * math.prod(problem.transitions.lower.shape[1:])
  with horizon.rolled_scans(size):
    return problem.lmo(problem.cost + numerics.einsum("i,ihsa->hsa", mu, problem.constraint_costs))


def _warm_cuts(problem, memory: recovery.VertexMemory, warm: problem_lib.WarmStart):
  """`memory` with the hint's vertices re-filled in this box (`planning.policy_vertex`) in
  its first slots: points of this box's polytope, so their lines are valid cuts of this
  dual. One fill site in a loop over the hint's vertices; a vertex equal to an earlier one
  of the hint is not filled (under `vmap`, when no member needs it) and its slot stays
  empty, as every slot does without a hint."""
  num = warm.actions.shape[0]
  equal = jnp.all(warm.actions[:, None] == warm.actions[None], axis=(2, 3)) & jnp.all(
    warm.values[:, None] == warm.values[None], axis=(2, 3)
  )
  repeat = jnp.any(equal & jnp.tril(jnp.ones((num, num), bool), k=-1), axis=1)
  blank = jax.tree.map(
    lambda x: jnp.zeros(x.shape, x.dtype),
    jax.eval_shape(
      problem.transitions.vertex,
      problem.cost,
      warm.actions[0],
      warm.values[0],
      problem.initial_state,
    ),
  )

  def refill(j):
    def fill(_):
      return problem.transitions.vertex(
        problem.cost, warm.actions[j], warm.values[j], problem.initial_state
      )

    return batching.batch_cond(repeat[j], lambda _: blank, fill, None)

  filled = lax.map(refill, jnp.arange(num))
  for j in range(num):
    v = jax.tree.map(lambda x, j=j: x[j], filled)
    memory = recovery.store(problem, memory, j, v, keep=warm.valid & ~repeat[j])
  return memory


class _Solve(NamedTuple):
  """One solve's fixed data, as the loop's parts read it."""

  problem: problem_lib.InnerProblem
  multipliers: jax.Array  # [I] lambda, the prox centre
  eta: jax.Array
  early: bool  # the loop may stop on its proof (else every cut is paid)
  stop_tol: float  # the relative gap at which it stops
  num_warm: int  # the hint's slots at the memory's start

  def oracle(self, mu):
    return _lagrangian_lmo(self.problem, mu)

  def stopped(self, m: recovery.VertexMemory, w, best):
    """The proof: the master's primal point (weights `w`) within the tolerance of `best`."""
    p = self.problem
    primal = recovery.restricted_objective(
      m.values, m.images, w, p.thresholds, self.multipliers, self.eta
    )
    return primal - best <= self.stop_tol * (1.0 + jnp.abs(primal))

  def master(self, m: recovery.VertexMemory):
    """The loop's master over the memory's cuts: `(mu, weights)`."""
    return master_lib.master(
      m.values,
      m.images,
      m.mask,
      self.problem.thresholds,
      self.multipliers,
      self.eta,
      num_steps=LOOP_MASTER_STEPS,
      early=self.early,
      converge=self.early,
    )

  def dual(self, mu, v):
    return dual_value(mu, v.value, self.problem.thresholds, self.multipliers, self.eta)


def cutting_planes(
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
  """The I >= 2 exact solve (module docstring); `num_iters` cuts after the first DP. `warm`:
  the last solve's `I + 1` vertices (`WarmStart`), re-filled here as the first cuts; `None`:
  a cold start at the prox centre."""
  dtype = problem.cost.dtype
  num_warm = 0 if warm is None else warm.actions.shape[0]
  slots = num_warm + num_iters + 1
  stop_tol = stop_tolerance(dtype, tol, problem.thresholds.shape[0])
  cuts = _Solve(problem, multipliers, eta, tol is not None and not fixed_length, stop_tol, num_warm)
  shape_of = jax.eval_shape(cuts.oracle, multipliers)
  memory = recovery.empty_memory(
    problem, shape_of, slots, with_paths=with_transitions, with_names=warm is not None
  )
  start = _first_query(cuts, memory, warm, slots)

  def running(s: _CutState):
    return (s.it < num_iters) & ~s.done

  s = loops.iterate(
    _cut_step(cuts, running),
    start,
    num_iters=num_iters,
    running=running,
    early=cuts.early,
    frozen_by_body=True,
  )
  w, q, best, best_mu, objective, mu_last, v_last, extra = _ending(cuts, s, warm is not None)
  m = s.memory
  return problem_lib.SolverResult(
    occupancy=q,
    transitions=_transitions(problem, m, w) if with_transitions else None,
    gap=jnp.maximum(objective - best, 0.0),
    num_iters=s.it,
    dp_calls=(s.it if cuts.early else jnp.asarray(num_iters, jnp.int32)) + 1 + extra,
    lmo=v_last,
    lmo_multipliers=mu_last,
    warm=None if warm is None else _next_hint(m, w, best_mu, num_warm),
  )


def _first_query(cuts: _Solve, memory, warm, slots: int) -> _CutState:
  """The loop's start: the first DP at the prox centre, or at the maximiser of the master of
  the hint's re-filled cuts (where that model meets `psi` there, the one DP proves the
  solve)."""
  no_weights = jnp.zeros((slots,), cuts.problem.cost.dtype)
  if warm is None:
    m0, w0 = cuts.multipliers, no_weights
  else:
    memory = _warm_cuts(cuts.problem, memory, warm)
    m0, w0 = batching.batch_cond(
      ~warm.valid,
      lambda _: (cuts.multipliers, no_weights),
      lambda _: cuts.master(memory),
      None,
    )
  v0 = cuts.oracle(m0)
  best = cuts.dual(m0, v0)
  done0 = jnp.zeros((), bool) if warm is None else warm.valid & cuts.stopped(memory, w0, best)
  memory = recovery.store(cuts.problem, memory, cuts.num_warm, v0)
  return _CutState(
    it=jnp.zeros((), jnp.int32),
    done=done0,
    memory=memory,
    best=best,
    best_mu=m0,
    weights=w0,
    mu_last=m0,
    v_last=v0,
  )


def _cut_step(cuts: _Solve, running):
  """The loop's body: the master's maximiser queried, its vertex stored as a cut."""

  def body(s: _CutState) -> _CutState:
    # A member that has stopped keeps its state: the loop runs while some member of a
    # vmapped batch runs (`loops.iterate(frozen_by_body=True)`), and the vertex memory is
    # written one slot at a time, never copied whole per step as a batched loop's select
    # would (most of a step's time at S = 60 with 54 slots).
    act = running(s)
    m = s.memory
    mu, w = cuts.master(m)
    if cuts.early:  # under vmap, the DP runs for the members still cutting alone
      v = batching.for_active(act, _lagrangian_lmo, cuts.problem, mu)
    else:
      v = cuts.oracle(mu)
    value = cuts.dual(mu, v)
    best_now = jnp.maximum(s.best, value)
    # Stop on a proof only: the master's own primal point (its cut weights: a point of Z)
    # within the tolerance of the best dual value (weak duality). With an exact master,
    # "no new cut" (the DP finds nothing below the model at mu) is the same event; with an
    # inexact one it is not, and stopping on it ended solves far from the optimum.
    keep = lambda new, old: jnp.where(act, new, old)
    return _CutState(
      it=s.it + act.astype(jnp.int32),
      done=keep(cuts.stopped(m, w, best_now), s.done),
      memory=recovery.store(cuts.problem, m, cuts.num_warm + s.it + 1, v, write=act),
      best=keep(best_now, s.best),
      best_mu=jnp.where(act & (value > s.best), mu, s.best_mu),
      weights=keep(w, s.weights),
      mu_last=keep(mu, s.mu_last),
      v_last=loops.tree_where(act, v, s.v_last),
    )

  return body


def _distinct(m: recovery.VertexMemory) -> recovery.VertexMemory:
  """The memory with repeated cuts masked (the LMO returning a known vertex near the
  optimum): the final master over them would have degenerate multipliers (the primal
  weights)."""
  points = jnp.concatenate([m.values[:, None], m.images], axis=1)
  same_tol = 16 * jnp.finfo(m.values.dtype).eps * (1.0 + jnp.max(jnp.abs(points)))
  same = jnp.all(jnp.abs(points[:, None] - points[None]) <= same_tol, axis=-1)
  slots = m.values.shape[0]
  earlier = jnp.tril(jnp.ones((slots, slots), bool), k=-1)
  return m._replace(mask=m.mask & ~jnp.any(same & earlier & m.mask[None, :], axis=1))


class _End(NamedTuple):
  """The ending's loop state (`_ending`)."""

  stage: jax.Array  # [] int, DPs made
  finished: jax.Array  # [] bool, the DP at the primal point's multiplier is done
  best: jax.Array
  best_mu: jax.Array
  w: jax.Array
  q: jax.Array
  objective: jax.Array
  mu_last: jax.Array
  v_last: planning.LMOSolution


def _ending(cuts: _Solve, s: _CutState, warm_started: bool):
  """The primal point (`recover`) and the last DP, at its multiplier (module docstring):
  `(w, q, best, best_mu, objective, mu_last, v_last, extra DPs)`. `recover` starts from
  the loop's last master's weights where a warm start proved the solve; else from the
  final master's over the distinct cuts (40 steps, polished; under `gradient="unrolled"`
  too: the loop's masters hold repeated cuts, whose degenerate KKT systems blow the
  derivative up to 1e22). The DP at its maximiser `mu_final` is paid only where the point
  is not certified without it (always in a fixed-length loop), and the point is then
  recovered from the new best `mu`. Both DPs are one call site, in a loop of two steps
  (under `vmap` the second gathers its members: `batching.for_active`)."""
  problem, multipliers, eta = cuts.problem, cuts.multipliers, cuts.eta
  m = s.memory
  distinct = _distinct(m)

  def finish(w, best_mu):
    w = recovery.recover(distinct, w, best_mu, problem, multipliers, eta)
    q = numerics.tensordot(w, m.occupancy, axes=1)
    return w, q, problem_lib.objective(problem, q, multipliers, eta)

  def certified(objective, best):
    tol = problem_lib.certified_tolerance(problem.cost.dtype)
    return objective - best <= tol * (1.0 + jnp.abs(objective))

  def final_master(_):
    mu_final, w = master_lib.master(
      m.values, m.images, distinct.mask, problem.thresholds, multipliers, eta, early=cuts.early
    )
    w = recovery.polish(distinct, w, problem.thresholds, multipliers, eta, num_steps=100)
    return mu_final, w

  if cuts.early and warm_started:  # proven by the loop's own weights: no final master
    proven = certified(finish(s.weights, s.best_mu)[2], s.best) & s.done
    mu_final, w_start = batching.batch_cond(
      proven, lambda _: (s.best_mu, s.weights), final_master, None
    )
  else:
    mu_final, w_start = final_master(None)

  def step(e: _End) -> _End:
    w, q, objective = finish(w_start, e.best_mu)
    final = (e.stage == 0) & ~(cuts.early & certified(objective, e.best))
    # mu_hat, not the last query (within the stop's tolerance in value, not in `mu`).
    mu_hat = dual_step(q, problem.constraint_costs, problem.thresholds, multipliers, eta)
    query = jnp.where(final, mu_final, mu_hat)
    if cuts.early:  # under vmap, a second step's DP for its members alone
      v = batching.for_active(~e.finished, _lagrangian_lmo, problem, query)
    else:
      v = cuts.oracle(query)
    value = cuts.dual(query, v)
    return _End(
      stage=e.stage + 1,
      finished=~final,
      best=jnp.maximum(e.best, value),
      best_mu=jnp.where(final & (value > e.best), mu_final, e.best_mu),
      w=w,
      q=q,
      objective=objective,
      mu_last=query,
      v_last=v,
    )

  start = _End(
    stage=jnp.zeros((), jnp.int32),
    finished=jnp.zeros((), bool),
    best=s.best,
    best_mu=s.best_mu,
    w=w_start,
    q=jnp.zeros_like(m.occupancy[0]),
    objective=jnp.zeros((), problem.cost.dtype),
    mu_last=s.mu_last,
    v_last=jax.tree.map(jnp.zeros_like, s.v_last),
  )
  e = loops.iterate(
    step, start, num_iters=2, running=lambda e: ~e.finished, early=cuts.early, can_stop=cuts.early
  )
  return e.w, e.q, e.best, e.best_mu, e.objective, e.mu_last, e.v_last, e.stage


def _transitions(problem, m: recovery.VertexMemory, w):
  """The transitions of the primal point: its vertices' `z` mixed by `w` (eq. (retrieve-p))."""
  paths = m.paths
  assert paths is not None  # kept when the transitions are asked for
  vertices = planning.LMOSolution(
    m.values, m.occupancy, paths.actions, paths.greedy_transitions, paths.state_occupancy
  )
  num_actions = problem.cost.shape[-1]
  z = numerics.tensordot(w, jax.vmap(lambda v: retrieve.vertex_z(v, num_actions))(vertices), axes=1)
  return retrieve.transitions_from_z(z, problem.transitions)


def _next_hint(memory: recovery.VertexMemory, w, mu, num: int) -> problem_lib.WarmStart:
  """The next solve's hint: the `num` collected vertices that matter most at the optimum:
  those of the primal point's mix (largest weight first), then those of lowest Lagrangian
  at `mu` (the model's pieces nearest the optimum). An empty slot is never taken (where
  fewer are collected: the first one again)."""
  names = memory.names
  assert names is not None  # kept when a hint is asked for
  lagrangian = memory.values + numerics.matmul(memory.images, mu)
  low = jnp.min(jnp.where(memory.mask, lagrangian, jnp.inf))
  excess = jnp.where(memory.mask, lagrangian - low, jnp.inf)
  rank = jnp.where(memory.mask & (w > 0), -1.0 - w, excess)  # the mix first
  _, index = lax.top_k(-rank, num)
  index = jnp.where(memory.mask[index], index, index[0])
  return problem_lib.WarmStart(
    actions=names.actions[index].astype(jnp.int32),
    values=names.order_values[index],
    valid=jnp.ones((), bool),
  )
