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
- A cold solve ends on a final master of 40 steps (its weights polished) and one more DP
  (at its maximiser) to tighten the certificate. A warm one, proven, ends with its last
  master's weights and its best `mu`; only a warm loop out of cuts pays the final master.
  `recover` (exact given `mu`) gives the primal point either way; its certificate is its
  objective minus the best dual value queried.
- Which point of the optimal face (or of the certificate's tolerance) a solve returns moves
  OptAug's learning statistics: the optimistic costs tie wherever the bonus exceeds the
  cost, and the tied vertices a solve mixes decide where the agent explores. On a 10-state
  CMDP with I = 2 (eta 100, 5,000 episodes, 32 seeds), the final cost regret was 1,905
  with the cold solve, 1,803 with it ending on the proven loop's own point, and 2,400
  warm-started (8 seeds; 3,090 with the greedy actions at unreached states taken at the
  last query instead of the primal point's multiplier; docs/results/statistics). Hence
  the warm start is asked for (`exact(warm_cuts=True)`), not the default.
- The last DP, at the primal point's multiplier `[lambda + eta (D q - alpha)]_+`, is
  returned as `SolverResult.lmo`: `solve_inner` takes the greedy actions at unreached
  states from it.
- Under `vmap` the loop runs while some member cuts, and a member that has stopped keeps
  its state (one memory slot written per step, not the whole memory selected).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .. import batching, planning
from ..multiplier_updates import dual_step
from . import loops, recovery, retrieve
from . import master as master_lib
from . import problem as problem_lib
from .dual_function import dual_value

# Interior-point steps of each master inside the cutting-plane loop, and the relative gap
# (restricted primal - best dual) at which the loop stops: in float64 1e-12; in float32
# half of what its certificate must prove (`certified_tolerance`, 1e-4): float32 rounds
# the gap at ~1e-6 of the objective. Measured on a 60-state random CMDP with I = 2 (16
# seeds, warm-started OptAug, docs/results/episode_cost "Several constraints"): 20 steps
# left the master's weights too inexact to meet the stop (4% of solves ran the whole
# budget; DPs 14.8 per solve, the batch's maximum 42.6); a stop at a tenth of the
# certificate's tolerance took 14.8 DPs, at half 8.6 (every solve certified either way).
LOOP_MASTER_STEPS = 40
STOP_RTOL = 1e-12
FLOAT32_STOP_RTOL = 5e-5


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
  """The extended DP at the Lagrangian costs `c + mu . D` (the cutting planes' oracle)."""
  return problem.lmo(problem.cost + jnp.einsum("i,ihsa->hsa", mu, problem.constraint_costs))


def _empty_memory(problem, v, slots: int, *, with_paths: bool, with_names: bool):
  """A `VertexMemory` of `slots` empty slots shaped like the vertex `v`."""
  dtype = problem.cost.dtype
  stacked = lambda x: jnp.zeros((slots,) + x.shape, x.dtype)
  paths = names = None
  if with_paths:
    paths = recovery.VertexPaths(
      actions=stacked(v.actions),
      greedy_transitions=stacked(v.greedy_transitions),
      state_occupancy=stacked(v.state_occupancy),
    )
  if with_names:
    names = recovery.VertexNames(actions=stacked(v.actions), order_values=stacked(v.next_values))
  return recovery.VertexMemory(
    occupancy=stacked(v.occupancy),
    values=jnp.zeros((slots,), dtype),
    images=jnp.zeros((slots, problem.thresholds.shape[0]), dtype),
    mask=jnp.zeros((slots,), bool),
    paths=paths,
    names=names,
  )


def _store(problem, memory: recovery.VertexMemory, j, v, keep=True, write=None):
  """`memory` with the vertex `v` in slot `j` (its line: `c . q`, `D q`) and mask `keep`.
  `write`: whether to write at all (False: the slot stays as it is; one slot is read and
  written either way, never the whole memory)."""
  a = jnp.sum(problem.cost * v.occupancy)
  y = jnp.einsum("ihsa,hsa->i", problem.constraint_costs, v.occupancy)

  def put(x, new):
    return x.at[j].set(new if write is None else jnp.where(write, new, x[j]))

  paths, names = memory.paths, memory.names
  if paths is not None:
    paths = recovery.VertexPaths(
      actions=put(paths.actions, v.actions),
      greedy_transitions=put(paths.greedy_transitions, v.greedy_transitions),
      state_occupancy=put(paths.state_occupancy, v.state_occupancy),
    )
  if names is not None:
    names = recovery.VertexNames(
      actions=put(names.actions, v.actions), order_values=put(names.order_values, v.next_values)
    )
  return recovery.VertexMemory(
    occupancy=put(memory.occupancy, v.occupancy),
    values=put(memory.values, a),
    images=put(memory.images, y),
    mask=put(memory.mask, jnp.asarray(keep, bool)),
    paths=paths,
    names=names,
  )


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
    memory = _store(problem, memory, j, v, keep=warm.valid & ~repeat[j])
  return memory


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
  cost, constraint_costs, thresholds = (problem.cost, problem.constraint_costs, problem.thresholds)
  num_actions = cost.shape[-1]
  num_warm = 0 if warm is None else warm.actions.shape[0]
  slots = num_warm + num_iters + 1
  dtype = cost.dtype
  floor = STOP_RTOL if jnp.finfo(dtype).bits >= 64 else FLOAT32_STOP_RTOL
  stop_tol = floor if tol is None else max(floor, tol)
  early = tol is not None and not fixed_length

  def oracle(mu):
    return _lagrangian_lmo(problem, mu)

  shape_of = jax.eval_shape(oracle, multipliers)
  memory = _empty_memory(
    problem, shape_of, slots, with_paths=with_transitions, with_names=warm is not None
  )

  def stopped(m: recovery.VertexMemory, w, best):
    primal = recovery.restricted_objective(m.values, m.images, w, thresholds, multipliers, eta)
    return primal - best <= stop_tol * (1.0 + jnp.abs(primal))

  # The first DP: at the prox centre, or at the maximiser of the master of the hint's cuts.
  no_weights = jnp.zeros((slots,), dtype)
  if warm is None:
    m0, w0 = multipliers, no_weights
  else:
    memory = _warm_cuts(problem, memory, warm)

    def warm_master(_):
      return master_lib.master(
        memory.values,
        memory.images,
        memory.mask,
        thresholds,
        multipliers,
        eta,
        num_steps=LOOP_MASTER_STEPS,
        early=early,
        converge=early,
      )

    m0, w0 = batching.batch_cond(
      ~warm.valid, lambda _: (multipliers, no_weights), warm_master, None
    )
  v0 = oracle(m0)
  best = dual_value(m0, v0.value, thresholds, multipliers, eta)
  # Where the hint's model meets psi at its maximiser, that one DP proves the solve.
  done0 = jnp.zeros((), bool) if warm is None else warm.valid & stopped(memory, w0, best)
  memory = _store(problem, memory, num_warm, v0)

  def running(s: _CutState):
    return (s.it < num_iters) & ~s.done

  def body(s: _CutState) -> _CutState:
    # A member that has stopped keeps its state: the loop runs while some member of a
    # vmapped batch runs (`loops.iterate(frozen_by_body=True)`), and the vertex memory is
    # written one slot at a time, never copied whole per step as a batched loop's select
    # would (most of a step's time at S = 60 with 54 slots).
    act = running(s)
    m = s.memory
    mu, w = master_lib.master(
      m.values,
      m.images,
      m.mask,
      thresholds,
      multipliers,
      eta,
      num_steps=LOOP_MASTER_STEPS,
      early=early,
      converge=early,
    )
    if early:  # under vmap, the DP runs for the members still cutting alone
      v = batching.for_active(act, _lagrangian_lmo, problem, mu)
    else:
      v = oracle(mu)
    value = dual_value(mu, v.value, thresholds, multipliers, eta)
    best_now = jnp.maximum(s.best, value)
    # Stop on a proof only: the master's own primal point (its cut weights: a point of Z)
    # within the tolerance of the best dual value (weak duality). With an exact master,
    # "no new cut" (the DP finds nothing below the model at mu) is the same event; with an
    # inexact one it is not, and stopping on it ended solves far from the optimum.
    keep = lambda new, old: jnp.where(act, new, old)
    return _CutState(
      it=s.it + act.astype(jnp.int32),
      done=keep(stopped(m, w, best_now), s.done),
      memory=_store(problem, m, num_warm + s.it + 1, v, write=act),
      best=keep(best_now, s.best),
      best_mu=jnp.where(act & (value > s.best), mu, s.best_mu),
      weights=keep(w, s.weights),
      mu_last=keep(mu, s.mu_last),
      v_last=loops.tree_where(act, v, s.v_last),
    )

  start = _CutState(
    it=jnp.zeros((), jnp.int32),
    done=done0,
    memory=memory,
    best=best,
    best_mu=m0,
    weights=w0,
    mu_last=m0,
    v_last=v0,
  )
  s = loops.iterate(
    body, start, num_iters=num_iters, running=running, early=early, frozen_by_body=True
  )
  m = s.memory
  values, images, occ = m.values, m.images, m.occupancy
  # The final master over distinct vertices only: repeated cuts (the LMO returning a known
  # vertex near the optimum) leave its multipliers, i.e. the primal weights, degenerate.
  points = jnp.concatenate([values[:, None], images], axis=1)
  same_tol = 16 * jnp.finfo(cost.dtype).eps * (1.0 + jnp.max(jnp.abs(points)))
  same = jnp.all(jnp.abs(points[:, None] - points[None]) <= same_tol, axis=-1)
  earlier = jnp.tril(jnp.ones((slots, slots), bool), k=-1)
  mask = m.mask & ~jnp.any(same & earlier & m.mask[None, :], axis=1)
  distinct = m._replace(mask=mask)

  def finish(w, best, best_mu):
    w = recovery.recover(distinct, w, best_mu, problem, multipliers, eta)
    q = jnp.tensordot(w, occ, axes=1)
    return w, q, best, best_mu, problem_lib.objective(problem, q, multipliers, eta)

  proven = finish(s.weights, s.best, s.best_mu)  # the loop's proof: its last master's weights

  def proven_end(_):
    # One DP at the primal point's multiplier, not the last query's: `solve_inner`'s greedy
    # actions at unreached states are that DP's. The last query is within the stop's
    # tolerance in value, not in `mu` (the dual is flat to 1/eta): its greedy actions
    # differed, and the learning statistics with them (docs/results/statistics).
    w, q, best, best_mu, objective = proven
    mu_hat = dual_step(q, constraint_costs, thresholds, multipliers, eta)
    v = oracle(mu_hat)
    best = jnp.maximum(best, dual_value(mu_hat, v.value, thresholds, multipliers, eta))
    return w, q, best, best_mu, objective, mu_hat, v, jnp.ones((), jnp.int32)

  def tightened_end(_):
    # A loop out of cuts (or a proven one whose point rounds outside the certificate, e.g.
    # float32 at a large eta): a final master of 40 interior-point steps, whose mu can beat
    # the best queried one, its weights polished (`recover`'s fallback candidate where `mu`
    # is not accurate), and one more DP at the primal point's multiplier.
    mu_final, w = master_lib.master(values, images, mask, thresholds, multipliers, eta, early=early)
    value = dual_value(mu_final, oracle(mu_final).value, thresholds, multipliers, eta)
    w = recovery.polish(distinct, w, thresholds, multipliers, eta, num_steps=100)
    best = jnp.maximum(s.best, value)
    w, q, best, best_mu, _ = finish(w, best, jnp.where(value > s.best, mu_final, s.best_mu))
    mu_hat = dual_step(q, constraint_costs, thresholds, multipliers, eta)
    v = oracle(mu_hat)
    best = jnp.maximum(best, dual_value(mu_hat, v.value, thresholds, multipliers, eta))
    objective = problem_lib.objective(problem, q, multipliers, eta)
    return w, q, best, best_mu, objective, mu_hat, v, jnp.full((), 2, jnp.int32)

  # Warm-started, only a loop out of cuts, or a proof whose point does not certify, pays the
  # rest. Cold, every solve ends on the final master: its point is the one the learning
  # statistics were recorded with (the proven loop's own point is another one the
  # certificate accepts, and moved a 10-state CMDP's final cost regret by 5%: module
  # docstring).
  certified = problem_lib.certified_tolerance(dtype) * (1.0 + jnp.abs(proven[4]))
  cheap = s.done & (proven[4] - proven[2] <= certified)
  if early and warm is not None:
    out = batching.batch_cond(cheap, proven_end, tightened_end, None)
  else:  # the unrolled derivative: through the final master over distinct vertices (the
    # loop's masters hold repeated cuts, whose degenerate KKT systems blow the derivative up
    # to 1e22); the point agrees with the early loop's to the recovery's accuracy
    out = tightened_end(None)
  w, q, best, best_mu, objective, mu_last, v_last, extra = out
  transitions = None
  if with_transitions:
    paths = m.paths
    assert paths is not None  # kept when the transitions are asked for
    vertices = planning.LMOSolution(
      values, occ, paths.actions, paths.greedy_transitions, paths.state_occupancy
    )
    z = jnp.tensordot(w, jax.vmap(lambda v: retrieve.vertex_z(v, num_actions))(vertices), axes=1)
    transitions = retrieve.transitions_from_z(z, problem.transitions)
  return problem_lib.SolverResult(
    occupancy=q,
    transitions=transitions,
    gap=jnp.maximum(objective - best, 0.0),
    num_iters=s.it,
    dp_calls=(s.it if early else jnp.asarray(num_iters, jnp.int32)) + 1 + extra,
    lmo=v_last,
    lmo_multipliers=mu_last,
    warm=None if warm is None else _next_hint(m, w, best_mu, num_warm),
  )


def _next_hint(memory: recovery.VertexMemory, w, mu, num: int) -> problem_lib.WarmStart:
  """The next solve's hint: the `num` collected vertices that matter most at the optimum:
  those of the primal point's mix (largest weight first), then those of lowest Lagrangian
  at `mu` (the model's pieces nearest the optimum). An empty slot is never taken (where
  fewer are collected: the first one again)."""
  names = memory.names
  assert names is not None  # kept when a hint is asked for
  lagrangian = memory.values + memory.images @ mu
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
