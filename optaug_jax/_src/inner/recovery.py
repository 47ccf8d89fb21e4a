"""Primal recovery of the exact solver (I >= 2): the weights of the collected vertices.

The cutting-plane loop ends with (nearly) the dual optimum `mu*`; the primal optimum is a
mix `q = sum_j w_j q_j` of the vertices that minimise the Lagrangian at `mu*`, whose
constraint values `y = D q` meet the optimality conditions

    y_i = alpha_i + (mu*_i - lambda_i) / eta   where mu*_i > 0,
    y_i <= alpha_i - lambda_i / eta            where mu*_i = 0.

`recover` finds it as an exact least-squares problem on the simplex
(`simplex_least_squares`, Lawson-Hanson), which does not scale with eta as the primal
objective does; `polish` (pairwise Frank-Wolfe on the master's primal) gives a fallback
candidate where `mu` is not accurate (float32 at large eta). The cutting planes keep their
vertices in a `VertexMemory` (`empty_memory`, `store`: one slot written at a time).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .. import numerics
from . import problem as problem_lib
from .line_search import exact_line_search


class VertexPaths(NamedTuple):
  """What eq. (retrieve-p) needs of each collected vertex besides its occupancy."""

  actions: jax.Array  # [slots, H, S] int
  greedy_transitions: jax.Array  # [slots, H, S, S' or N]
  state_occupancy: jax.Array  # [slots, H, S]


class VertexNames(NamedTuple):
  """What names each collected vertex in any box (`planning.policy_vertex`): a warm
  start's hint is made of them."""

  actions: jax.Array  # [slots, H, S] int
  order_values: jax.Array  # [slots, H, S] the keys of the vertex's fill (`next_values`)


class VertexMemory(NamedTuple):
  """The vertices collected so far: the hint's re-filled ones, then one slot per DP call."""

  occupancy: jax.Array  # [slots, H, S, A] q_j
  values: jax.Array  # [slots] c . q_j
  images: jax.Array  # [slots, I] D q_j
  mask: jax.Array  # [slots] bool, the slot holds a vertex
  paths: VertexPaths | None  # kept when the transitions are asked for; else None
  names: VertexNames | None = None  # kept when a warm start's hint is asked for; else None


def empty_memory(problem, v, slots: int, *, with_paths: bool, with_names: bool):
  """A `VertexMemory` of `slots` empty slots shaped like the vertex `v`."""
  dtype = problem.cost.dtype
  stacked = lambda x: jnp.zeros((slots,) + x.shape, x.dtype)
  paths = names = None
  if with_paths:
    paths = VertexPaths(
      actions=stacked(v.actions),
      greedy_transitions=stacked(v.greedy_transitions),
      state_occupancy=stacked(v.state_occupancy),
    )
  if with_names:
    names = VertexNames(actions=stacked(v.actions), order_values=stacked(v.next_values))
  return VertexMemory(
    occupancy=stacked(v.occupancy),
    values=jnp.zeros((slots,), dtype),
    images=jnp.zeros((slots, problem.thresholds.shape[0]), dtype),
    mask=jnp.zeros((slots,), bool),
    paths=paths,
    names=names,
  )


def store(problem, memory: VertexMemory, j, v, keep=True, write=None):
  """`memory` with the vertex `v` in slot `j` (its line: `c . q`, `D q`) and mask `keep`.
  `write`: whether to write at all (False: the slot stays as it is; one slot is read and
  written either way, never the whole memory)."""
  a = jnp.sum(problem.cost * v.occupancy)
  y = numerics.einsum("ihsa,hsa->i", problem.constraint_costs, v.occupancy)

  def put(x, new):
    return x.at[j].set(new if write is None else jnp.where(write, new, x[j]))

  paths, names = memory.paths, memory.names
  if paths is not None:
    paths = VertexPaths(
      actions=put(paths.actions, v.actions),
      greedy_transitions=put(paths.greedy_transitions, v.greedy_transitions),
      state_occupancy=put(paths.state_occupancy, v.state_occupancy),
    )
  if names is not None:
    names = VertexNames(
      actions=put(names.actions, v.actions), order_values=put(names.order_values, v.next_values)
    )
  return VertexMemory(
    occupancy=put(memory.occupancy, v.occupancy),
    values=put(memory.values, a),
    images=put(memory.images, y),
    mask=put(memory.mask, jnp.asarray(keep, bool)),
    paths=paths,
    names=names,
  )


def restricted_objective(values, images, w, thresholds, multipliers, eta):
  """The objective at the mix `w` of collected vertices: `values.w + (eta / 2)
  ||[lambda / eta + Y'w - alpha]_+||^2` (eq. (step1) at `q = sum_j w_j q_j`)."""
  scaled = jnp.maximum(multipliers / eta + numerics.matmul(images.T, w) - thresholds, 0.0)
  return numerics.dot(values, w) + 0.5 * eta * jnp.sum(scaled**2)


def polish(memory: VertexMemory, w, thresholds, multipliers, eta, *, num_steps: int = 100):
  """Pairwise Frank-Wolfe steps (exact line search) on the master's primal,
  `min_{w in simplex} values.w + (eta/2) ||[lambda/eta + images' w - alpha]_+||^2`, from the
  interior-point weights: cheap (no DP), a fallback candidate for `recover` where the best
  `mu` is not accurate (float32 at large eta). `num_steps`: see docs/design.md, "Tuned
  constants". Over the vertices of `memory` that its `mask` keeps."""
  values, images, mask = memory.values, memory.images, memory.mask
  base = multipliers / eta - thresholds

  def step(_, w):
    y = numerics.matmul(images.T, w)
    mu = jnp.maximum(multipliers + eta * (y - thresholds), 0.0)
    score = values + numerics.matmul(images, mu)  # gradient of the primal in w
    best = jnp.argmin(jnp.where(mask, score, jnp.inf))
    worst = jnp.argmax(jnp.where(mask & (w > 0), score, -jnp.inf))
    amount = w[worst]
    move = amount * (images[best] - images[worst])
    t = exact_line_search(amount * (values[best] - values[worst]), base + y, move, eta)
    t = jnp.where(best == worst, 0.0, t)
    return w.at[worst].add(-t * amount).at[best].add(t * amount)

  return lax.fori_loop(0, num_steps, step, w)


def simplex_least_squares(c, allowed, *, num_iters: int):
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
  gram = numerics.matmul(c.T, c)
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
    residual = numerics.matmul(c, z)
    score = numerics.matmul(c.T, residual)
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


def recover(
  memory: VertexMemory,
  w,
  mu,
  problem: problem_lib.InnerProblem,
  multipliers,
  eta,
  *,
  num_candidates: int | None = None,
):
  """Primal weights from the dual optimum `mu` (exact by then): among the vertices that
  minimise the Lagrangian at `mu`, the mix whose `y = Y w` meets `y_i = alpha_i +
  (mu_i - lambda_i)/eta` where `mu_i > 0` and `y_i <= alpha_i - lambda_i/eta` where
  `mu_i = 0` (the optimality conditions), as an exact least-squares problem on the simplex
  (`simplex_least_squares`): unlike the primal objective, it does not scale with eta.

  - Inequality rows (`mu_i = 0`) start out dropped; the ones the mix violates become
    equalities, for up to `I` passes (by convexity, a violated row can be met with
    equality when it can be met at all).
  - Which vertices minimise the Lagrangian is decided up to a tolerance, and no single one
    fits every instance: too tight drops a vertex of the optimal face, too loose admits a
    near-twin off the face (its Lagrangian excess enters the objective). The search runs
    for three tolerances (relative `16 eps`, `sqrt(eps)`, `100 sqrt(eps)`) at once over the
    `num_candidates` (default `4 (I + 1)`) vertices of lowest Lagrangian, and the weights
    with the lowest primal objective win (`w` included).

  Over the vertices of `memory` that its `mask` keeps; `w`: the master's weights.
  """
  values, images, mask = memory.values, memory.images, memory.mask
  thresholds = problem.thresholds
  dtype = values.dtype
  eps = jnp.finfo(dtype).eps
  slots, num_constraints = images.shape
  k = min(slots, num_candidates or 4 * (num_constraints + 1))
  lagrangian = jnp.where(mask, values + numerics.matmul(images, mu), jnp.inf)
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
      v = simplex_least_squares(c, allowed, num_iters=3 * k)
      over = (numerics.matmul(pts.T, v) - target) > jnp.sqrt(eps) * scale
      return rows | over, v

    _, tries = lax.scan(one_pass, free, None, length=num_constraints)
    return tries

  ladder = jnp.asarray([16 * eps, jnp.sqrt(eps), 1e2 * jnp.sqrt(eps)], dtype)
  tries = jax.vmap(search)(ladder).reshape(-1, k)
  candidates = jnp.zeros((tries.shape[0], slots), dtype).at[:, index].set(tries)
  candidates = jnp.concatenate([w[None], candidates])

  # Each candidate's objective from the vertices' lines (`c . q_j`, `D q_j`): the objective
  # depends on `q` only through them, so no candidate's `[H, S, A]` mix is formed.
  scores = jax.vmap(
    lambda v: restricted_objective(values, images, v, thresholds, multipliers, eta)
  )(candidates)
  return candidates[jnp.argmin(jnp.where(jnp.isfinite(scores), scores, jnp.inf))]
