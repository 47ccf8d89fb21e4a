"""The exact solver for two or more constraints (I >= 2): cutting planes on the dual.

Fully-corrective Frank-Wolfe, i.e. a cutting-plane (proximal bundle) method on the
I-dimensional dual `psi(mu)` (see `dual_function`): each step queries the extended DP at the
maximiser of the master over the vertices collected so far (`master.master`) and adds the
vertex it returns as a cut. With a `tol`, the loop stops only on a proof: the master's own
primal point (its cut weights: a point of Z) within the tolerance of the best dual value.
A final master over the distinct vertices, then `recovery.recover` (exact given `mu`),
give the primal point; the certificate is its objective minus the best dual value queried.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import batching, planning
from ..multiplier_updates import dual_step
from . import loops, recovery, retrieve
from . import master as master_lib
from . import problem as problem_lib
from .dual_function import dual_value

# Interior-point steps of the master inside the cutting-plane loop (the final master takes
# 40), and the relative gap (restricted primal - best dual) at which the loop stops: in
# float64, and in float32 a tenth of what its certificate must prove (`certified_tolerance`,
# 1e-4): float32 rounds the gap at ~1e-6 of the objective, so 1e-12 was never met there
# and every float32 solve ran its whole budget (54 DPs at I = 5 where float64 takes 26).
LOOP_MASTER_STEPS = 20
STOP_RTOL = 1e-12
FLOAT32_STOP_RTOL = 1e-5


class _CutState(NamedTuple):
  it: jax.Array  # [] int, cuts added
  done: jax.Array  # [] bool, the stop was proven
  memory: recovery.VertexMemory
  best: jax.Array  # [] the best dual value psi queried
  best_mu: jax.Array  # [I] where it was queried


def _lagrangian_lmo(problem: problem_lib.InnerProblem, mu):
  """The extended DP at the Lagrangian costs `c + mu . D` (the cutting planes' oracle)."""
  return problem.lmo(problem.cost + jnp.einsum("i,ihsa->hsa", mu, problem.constraint_costs))


def cutting_planes(
  problem: problem_lib.InnerProblem,
  multipliers,
  eta,
  *,
  num_iters: int,
  tol: float | None,
  with_transitions: bool,
  fixed_length: bool,
) -> problem_lib.SolverResult:
  """The I >= 2 exact solve (module docstring); `num_iters` cuts."""
  cost, constraint_costs, thresholds = (problem.cost, problem.constraint_costs, problem.thresholds)
  num_constraints = thresholds.shape[0]
  num_actions = cost.shape[-1]
  slots = num_iters + 1

  def oracle(mu):
    return _lagrangian_lmo(problem, mu)

  def store(memory: recovery.VertexMemory, j, v) -> recovery.VertexMemory:
    a = jnp.sum(cost * v.occupancy)
    y = jnp.einsum("ihsa,hsa->i", constraint_costs, v.occupancy)
    paths = memory.paths
    if paths is not None:
      paths = recovery.VertexPaths(
        actions=paths.actions.at[j].set(v.actions),
        greedy_transitions=paths.greedy_transitions.at[j].set(v.greedy_transitions),
        state_occupancy=paths.state_occupancy.at[j].set(v.state_occupancy),
      )
    return recovery.VertexMemory(
      occupancy=memory.occupancy.at[j].set(v.occupancy),
      values=memory.values.at[j].set(a),
      images=memory.images.at[j].set(y),
      mask=memory.mask.at[j].set(True),
      paths=paths,
    )

  v0 = oracle(multipliers)
  shape = v0.occupancy.shape
  dtype = cost.dtype
  paths = None
  if with_transitions:
    paths = recovery.VertexPaths(
      actions=jnp.zeros((slots,) + v0.actions.shape, v0.actions.dtype),
      greedy_transitions=jnp.zeros((slots,) + v0.greedy_transitions.shape, dtype),
      state_occupancy=jnp.zeros((slots,) + v0.state_occupancy.shape, dtype),
    )
  memory = recovery.VertexMemory(
    occupancy=jnp.zeros((slots,) + shape, dtype),
    values=jnp.zeros((slots,), dtype),
    images=jnp.zeros((slots, num_constraints), dtype),
    mask=jnp.zeros((slots,), bool),
    paths=paths,
  )
  memory = store(memory, 0, v0)
  best = dual_value(multipliers, v0.value, thresholds, multipliers, eta)

  floor = STOP_RTOL if jnp.finfo(dtype).bits >= 64 else FLOAT32_STOP_RTOL
  early = tol is not None and not fixed_length

  def running(s: _CutState):
    return (s.it < num_iters) & ~s.done

  def body(s: _CutState) -> _CutState:
    m = s.memory
    mu, w = master_lib.master(
      m.values, m.images, m.mask, thresholds, multipliers, eta, num_steps=LOOP_MASTER_STEPS
    )
    if early:  # under vmap, the DP runs for the members still cutting alone
      v = batching.for_active(running(s), _lagrangian_lmo, problem, mu)
    else:
      v = oracle(mu)
    value = dual_value(mu, v.value, thresholds, multipliers, eta)
    best_now = jnp.maximum(s.best, value)
    # Stop on a proof only: the master's own primal point (its cut weights: a point of Z)
    # within the tolerance of the best dual value (weak duality). With an exact master,
    # "no new cut" (the DP finds nothing below the model at mu) is the same event; with an
    # inexact one it is not, and stopping on it ended solves far from the optimum.
    primal = recovery.restricted_objective(m.values, m.images, w, thresholds, multipliers, eta)
    stop_tol = floor if tol is None else max(floor, tol)
    done = primal - best_now <= stop_tol * (1.0 + jnp.abs(primal))
    better = value > s.best
    return _CutState(
      it=s.it + 1,
      done=done,
      memory=store(m, s.it + 1, v),
      best=best_now,
      best_mu=jnp.where(better, mu, s.best_mu),
    )

  start = _CutState(
    it=jnp.zeros((), jnp.int32),
    done=jnp.zeros((), bool),
    memory=memory,
    best=best,
    best_mu=multipliers,
  )
  s = loops.iterate(body, start, num_iters=num_iters, running=running, early=early)
  m, best, best_mu = s.memory, s.best, s.best_mu
  values, images, occ = m.values, m.images, m.occupancy
  # The final master over distinct vertices only: repeated cuts (the LMO returning a known
  # vertex near the optimum) leave its multipliers, i.e. the primal weights, degenerate.
  # Its weights, polished, are one candidate; `recover` (exact given mu) gives the others.
  points = jnp.concatenate([values[:, None], images], axis=1)
  same_tol = 16 * jnp.finfo(cost.dtype).eps * (1.0 + jnp.max(jnp.abs(points)))
  same = jnp.all(jnp.abs(points[:, None] - points[None]) <= same_tol, axis=-1)
  earlier = jnp.tril(jnp.ones((slots, slots), bool), k=-1)
  mask = m.mask & ~jnp.any(same & earlier & m.mask[None, :], axis=1)
  mu_final, w = master_lib.master(values, images, mask, thresholds, multipliers, eta)
  # The loop's masters take LOOP_MASTER_STEPS interior-point steps; this one takes 40: its
  # mu can beat the best queried one, and a better mu tightens the recovery and certificate.
  value = dual_value(mu_final, oracle(mu_final).value, thresholds, multipliers, eta)
  best_mu = jnp.where(value > best, mu_final, best_mu)
  best = jnp.maximum(best, value)
  distinct = m._replace(mask=mask)
  w = recovery.polish(distinct, w, thresholds, multipliers, eta, num_steps=100)
  w = recovery.recover(distinct, w, best_mu, problem, multipliers, eta)
  q = jnp.tensordot(w, occ, axes=1)
  mu_hat = dual_step(q, constraint_costs, thresholds, multipliers, eta)
  best = jnp.maximum(best, dual_value(mu_hat, oracle(mu_hat).value, thresholds, multipliers, eta))
  objective = problem_lib.objective(problem, q, multipliers, eta)
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
    dp_calls=(s.it if early else jnp.asarray(num_iters, jnp.int32)) + 3,
  )
