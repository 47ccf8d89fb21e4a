"""The inner problem of OptAug-CMDP, the paper's eq. (primal-step), and what a solve returns.

    min_{q in Q(box)}  f(q) = c . q + ||[lambda + eta (D q - alpha)]_+||^2 / (2 eta)   (step1)

over the occupancy measures `q` of every policy and every transition function in the box
`[lower, upper]` (the extended MDP of the optimistic model). The objective depends on the
state-action-state occupancy `z` only through `q = sum_s' z` (eq. (retrieve-q)), and its
gradient (eq. (nabla)) is

    grad f(q) = c + D^T lambda+(q),   lambda+(q) = [lambda + eta (D q - alpha)]_+,

the weights `lambda+` being the paper's dual step (eq. (dual-step)) taken at `q`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import numerics
from ..multiplier_updates import dual_step
from ..transition_set import TransitionSet


class _InnerProblemFields(NamedTuple):
  cost: jax.Array  # [H, S, A] c (optimistic c~_k in an agent)
  constraint_costs: jax.Array  # [I, H, S, A] D
  thresholds: jax.Array  # [I] alpha
  transitions: TransitionSet  # the box of the extended MDP, its layout and its fill
  initial_state: jax.Array  # [] int


class InnerProblem(_InnerProblemFields):
  """The data of one inner problem, eq. (primal-step), without its outer-loop state.

  The multipliers `lambda` and the step size `eta` change every episode and are passed
  next to the problem (`solve_inner(problem, multipliers, eta)`). The box is a
  `TransitionSet` (`transitions`: its bounds, layout and fill); `lower`, `upper` and
  `next_states` read through to it, and `_replace` takes them too.
  """

  __slots__ = ()

  @property
  def lower(self) -> jax.Array:
    """`[H or 1, S, A, S' or N]` lower transition bounds (`transitions.lower`)."""
    return self.transitions.lower

  @property
  def upper(self) -> jax.Array:
    """`[H or 1, S, A, S' or N]` upper transition bounds (`transitions.upper`)."""
    return self.transitions.upper

  @property
  def next_states(self) -> jax.Array | None:
    """`[H or 1, S, A, N]` int: the sparse layout of the box; None: dense."""
    return self.transitions.next_states

  def _replace(self, **changes):
    """`NamedTuple._replace`, which also takes `lower`, `upper`, `next_states` (into the
    `TransitionSet`)."""
    box_changes = {k: changes.pop(k) for k in ("lower", "upper", "next_states") if k in changes}
    if box_changes:
      changes["transitions"] = changes.get("transitions", self.transitions).replace(**box_changes)
    return super()._replace(**changes)

  def lmo(self, reward: jax.Array):
    """One extended DP over the problem's box from its initial state (`TransitionSet.lmo`)."""
    return self.transitions.lmo(reward, self.initial_state)

  @classmethod
  def of_cmdp(cls, cmdp) -> InnerProblem:
    """The inner problem of a known CMDP: the box is the point `lower = upper = p`."""
    return cls(
      cost=cmdp.cost,
      constraint_costs=cmdp.constraint_costs,
      thresholds=cmdp.thresholds,
      transitions=cmdp.transition_set(),
      initial_state=cmdp.initial_state,
    )

  @classmethod
  def of_model(
    cls, model, thresholds, initial_state, transitions: TransitionSet | None = None
  ) -> InnerProblem:
    """The inner problem of an `OptimisticModel` (an agent's episode, eq. (opt-c)); the box
    is `transitions` if given (e.g. `model.transition_set(fill)`), else
    `model.transition_set()`."""
    return cls(
      cost=model.cost,
      constraint_costs=model.constraint_costs,
      thresholds=thresholds,
      transitions=model.transition_set() if transitions is None else transitions,
      initial_state=initial_state,
    )


class WarmStart(NamedTuple):
  """What one exact solve leaves to the next (`solve_inner(warm=)`, `InnerSolution.warm`).

  The I = 1 search ends with two vertices of the extended MDP that bracket `mu*` and
  minimise the Lagrangian there; the I >= 2 cutting planes with the `I + 1` vertices of
  largest weight in the primal point, whose re-filled lines are the next master's first
  cuts. A vertex is a deterministic policy and, at each step, the
  order in which the greedy fill poured its rows' free mass (the order of the next step's
  values): two vertices of one kink often share the policy and differ in that order. In an
  agent, the next episode's prox centre is that `mu*` and its model differs by one
  episode's counts, so the same two vertices, filled again in the new box
  (`planning.policy_vertex`), usually bracket the new `mu*` too: their Lagrangian lines are
  valid cuts of the new dual (any feasible point's line bounds `Phi` from above), whose
  model maximiser is where the search queries first. A warm start is a hint: it never
  changes what is solved, only where the search starts, and every solve keeps its
  certificate.
  """

  actions: jax.Array  # [V, H, S] int32, the vertices' actions (V = `warm_vertices(I)`)
  values: jax.Array  # [V, H, S] the keys of each vertex's fill at each step (`next_values`)
  valid: jax.Array  # [] bool, False: no hint (a cold start)

  @classmethod
  def cold(
    cls, horizon: int, num_states: int, dtype=None, *, num_constraints: int = 1
  ) -> WarmStart:
    """No hint: the search starts at the prox centre. Its `warm_vertices(num_constraints)`
    vertex slots are what a solve of that many constraints leaves."""
    num = warm_vertices(num_constraints)
    return cls(
      actions=jnp.zeros((num, horizon, num_states), jnp.int32),
      values=jnp.zeros((num, horizon, num_states), dtype),
      valid=jnp.zeros((), bool),
    )


def warm_vertices(num_constraints: int) -> int:
  """The vertices a `WarmStart` of `I` constraints holds: 2 for I = 1 (the two bracketing
  vertices of the search's kink), `I + 1` for I >= 2 (the largest weights of the primal
  point's mix: a point of the `I`-dimensional image `D q` is a mix of `I + 1` vertices)."""
  return max(2, int(num_constraints) + 1)


class SolverResult(NamedTuple):
  """What an inner solver returns to `solve_inner` (see `oj.inner.InnerSolver`)."""

  occupancy: jax.Array  # [H, S, A]
  transitions: jax.Array | None  # [H, S, A, S'] or None when `with_transitions=False`
  gap: jax.Array  # [] certificate: objective - optimum <= gap
  num_iters: jax.Array  # [] int
  dp_calls: jax.Array  # [] int
  lmo: Any = None  # planning.LMOSolution | None: the extended DP at the costs
  #   `c + D^T lmo_multipliers`, multipliers that are the solution's `lambda+` to the
  #   solver's accuracy (`solve_inner` takes the greedy actions at unreached states from it
  #   instead of one more DP); None: the solver has none
  lmo_multipliers: jax.Array | None = None  # [I]
  warm: WarmStart | None = None  # the hint for the next solve; None: the solver has none


class InnerSolution(NamedTuple):
  """Approximate minimiser of eq. (primal-step) and its certificate."""

  occupancy: jax.Array  # [H, S, A] q = sum_s' z
  policy: jax.Array  # [H, S, A] eq. (retrieve-pi); where q_h(s) = 0 see `unreached`
  transitions: jax.Array | None  # [H, S, A, S'] eq. (retrieve-p), in the box (None if not asked)
  objective: jax.Array  # [] augmented Lagrangian at the returned point
  gap: jax.Array  # [] certificate: objective - optimum <= gap (the solver's own bound)
  num_iters: jax.Array  # [] int, iterations the solver took
  dp_calls: jax.Array  # [] int, extended DPs (LMO calls) the solve made
  certified: jax.Array  # [] bool, gap <= certified_tolerance(dtype) * (1 + |objective|)
  warm: WarmStart  # the hint for the next solve (`solve_inner(warm=)`); `valid` False when
  #   the solver leaves none (Frank-Wolfe)


def certified_tolerance(dtype) -> float:
  """The relative accuracy a solve must prove to count as certified (`InnerSolution.certified`):
  `gap <= tol * (1 + |objective|)` with tol 1e-8 in float64 and 1e-4 in float32."""
  return 1e-8 if jnp.finfo(dtype).bits >= 64 else 1e-4


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
  violation = numerics.einsum("ihsa,hsa->i", constraint_costs, occupancy) - thresholds
  scaled = jnp.maximum(multipliers / eta + violation, 0.0)
  return jnp.sum(cost * occupancy) + 0.5 * eta * jnp.sum(scaled**2)


def objective(problem: InnerProblem, occupancy, multipliers, eta) -> jax.Array:
  """`augmented_lagrangian` of `problem` at `occupancy`."""
  return augmented_lagrangian(
    occupancy, problem.cost, problem.constraint_costs, problem.thresholds, multipliers, eta
  )


def gradient(problem: InnerProblem, occupancy, multipliers, eta) -> jax.Array:
  """Eq. (nabla): `c + D^T lambda+(q)`, `[H, S, A]` (the same for every next state)."""
  weights = dual_step(occupancy, problem.constraint_costs, problem.thresholds, multipliers, eta)
  return problem.cost + numerics.einsum("i,ihsa->hsa", weights, problem.constraint_costs)
