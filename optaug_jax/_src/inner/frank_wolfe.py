"""Frank-Wolfe on the inner problem: the paper's Algorithm InnerOpt-FW, as a solver value.

Eq. (convex-fw) is a convex problem over the state-action-state occupancies `z` of the
extended MDP; its linear minimisation oracle is the extended DP (`extended_lmo`). Since the
objective depends on `z` only through `q = sum_s' z` and its gradient is the same for every
`s'` (eq. (nabla)), Frank-Wolfe iterates on `z` map one-to-one onto iterates on `q`: the
loop runs on `q` `[H, S, A]`, and accumulates `z` only when the transitions are asked for.

    z^0 = the best response to c + D^T lambda (a vertex)
    for t = 0, 1, ...:  v^t = LMO(grad f(q^t));  gap^t = grad f(q^t) . (q^t - v^t)
                        q^{t+1} = q^t + gamma_t (v^t - q^t)

with `gamma_t = 2 / (t + 2)` (`"standard"`, the paper's) or the exact line search on the
piecewise-quadratic objective (`"linesearch"`). The Frank-Wolfe gap bounds
`f(q^t) - f*` and is the certificate. One extended DP per step, plus two at the start. Its
error at a fixed number of steps grows with eta; `exact` does not.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import numerics, planning
from ..checking import arguments
from . import loops, retrieve
from . import problem as problem_lib
from .line_search import exact_line_search

STEP_RULES = ("standard", "linesearch")


class _FWState(NamedTuple):
  t: jax.Array  # [] int
  q: jax.Array  # [H, S, A] current iterate
  z: jax.Array  # [H, S, A, S'] current iterate in z-space (or a dummy)
  lmo: planning.LMOSolution  # LMO at the current gradient
  grad: jax.Array  # [H, S, A]
  gap: jax.Array  # []


@dataclasses.dataclass(frozen=True)
class FrankWolfe:
  """Frank-Wolfe on the inner problem (build it with `frank_wolfe`)."""

  num_iters: int = 100
  step_rule: str = "linesearch"
  tol: float | None = None

  def __post_init__(self):
    arguments.check_int("num_iters", self.num_iters, low=0)
    arguments.check_choice("step_rule", self.step_rule, STEP_RULES)
    arguments.check_real("tol", self.tol, low=0.0, allow_none=True)

  def __call__(
    self,
    problem: problem_lib.InnerProblem,
    multipliers: jax.Array,
    eta,
    *,
    with_transitions: bool = True,
    fixed_length: bool = False,
    warm: problem_lib.WarmStart | None = None,
  ) -> problem_lib.SolverResult:
    """Solves `problem` at `(multipliers, eta)` (see `InnerSolver`); takes no hint
    (`warm` is accepted and not read) and leaves none."""
    del warm
    num_iters, tol = int(self.num_iters), self.tol
    cost, constraint_costs = problem.cost, problem.constraint_costs
    thresholds = problem.thresholds
    num_actions = cost.shape[-1]

    oracle = problem.lmo

    def probe(q, z, t):
      grad = problem_lib.gradient(problem, q, multipliers, eta)
      lmo = oracle(grad)
      gap = jnp.sum(grad * q) - lmo.value
      return _FWState(t=t, q=q, z=z, lmo=lmo, grad=grad, gap=gap)

    # z^0: the best response to the plain Lagrangian c + D^T lambda (a vertex of Z).
    start = oracle(cost + numerics.einsum("i,ihsa->hsa", multipliers, constraint_costs))
    z0 = retrieve.vertex_z(start, num_actions) if with_transitions else jnp.zeros(())
    state = probe(start.occupancy, z0, jnp.zeros((), jnp.int32))

    def body(state: _FWState) -> _FWState:
      direction = state.lmo.occupancy - state.q
      if self.step_rule == "standard":
        step = 2.0 / (state.t.astype(cost.dtype) + 2.0)
      else:
        violation = numerics.einsum("ihsa,hsa->i", constraint_costs, state.q) - thresholds
        a = multipliers / eta + violation
        b = numerics.einsum("ihsa,hsa->i", constraint_costs, direction)
        step = exact_line_search(jnp.sum(cost * direction), a, b, eta)
      q = state.q + step * direction
      z = state.z
      if with_transitions:
        z = z + step * (retrieve.vertex_z(state.lmo, num_actions) - z)
      return probe(q, z, state.t + 1)

    if tol is None:
      state = jax.lax.fori_loop(0, num_iters, lambda _, s: body(s), state)
    else:
      state = loops.iterate(
        body,
        state,
        num_iters=num_iters,
        running=lambda s: (s.t < num_iters) & (s.gap > tol),
        early=not fixed_length,
      )
    transitions = (
      retrieve.transitions_from_z(state.z, problem.transitions) if with_transitions else None
    )
    dp_calls = (
      state.t if tol is not None and not fixed_length else jnp.asarray(num_iters, jnp.int32)
    )
    return problem_lib.SolverResult(
      occupancy=state.q,
      transitions=transitions,
      gap=state.gap,
      num_iters=state.t,
      dp_calls=dp_calls + 2,
    )


def frank_wolfe(
  num_iters: int = 100, step_rule: str = "linesearch", tol: float | None = None
) -> FrankWolfe:
  """Frank-Wolfe on the inner problem (the paper's Algorithm InnerOpt-FW), as a value.

  Args:
    num_iters: Frank-Wolfe steps (static).
    step_rule: `"standard"` (the paper's `2 / (t + 2)`) or `"linesearch"` (exact line
      search on the piecewise-quadratic objective; keeps its accuracy at large `eta`).
    tol: `None` (default): run all `num_iters` steps. A number: stop once the Frank-Wolfe
      gap is `<= tol` (a `lax.while_loop`; under `vmap` every member runs until the
      slowest stops, each member's result stays its own).

  Returns:
    A `FrankWolfe` solver for `solve_inner(..., solver=)` and the agents' `inner=`.
  """
  return FrankWolfe(num_iters=num_iters, step_rule=step_rule, tol=tol)
