"""The exact inner solver: through the I-dimensional Fenchel dual (`dual_function`).

`min_Z f = max_{mu >= 0} psi(mu)`, `psi` strongly concave in `I` variables and each of its
values one extended DP. The dual is solved to the dtype's accuracy:

- I = 1: `dual_search.two_cut_search` (a safeguarded cutting-plane search, then an exact
  line search between the two bracketing vertices);
- I >= 2: `cutting_planes.cutting_planes` (cutting planes with an interior-point master,
  `master`, then an exact primal recovery, `recovery`).

The certificate is `f(q) - max psi(mu)` over every `mu` queried (weak duality), so
`objective - optimum <= gap` whatever the iteration budget, and the number of DPs does not
depend on `eta`. Accuracy and DP counts against Clarabel: docs/results/inner_exactness.
"""

from __future__ import annotations

import dataclasses

import jax

from ..checking import arguments
from . import problem as problem_lib
from .cutting_planes import cutting_planes
from .dual_function import default_num_iters
from .dual_search import two_cut_search


@dataclasses.dataclass(frozen=True)
class Exact:
  """The exact inner solver (build it with `exact`)."""

  num_iters: int | None = None
  tol: float | None = 0.0
  warm_cuts: bool = False

  def __post_init__(self):
    if self.num_iters is not None:
      arguments.check_int("num_iters", self.num_iters, low=0)
    arguments.check_real("tol", self.tol, low=0.0, allow_none=True)
    if not isinstance(self.warm_cuts, bool):
      raise TypeError(f"warm_cuts: expected a bool, got {self.warm_cuts!r}")

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
    """Solves `problem` at `(multipliers, eta)` (see `InnerSolver`). `warm`: the last
    solve's `WarmStart` (two vertices for I = 1, `I + 1` for I >= 2)."""
    num_constraints = problem.thresholds.shape[0]
    num_iters = self.num_iters
    if num_iters is None:
      num_iters = default_num_iters(problem.cost.dtype, num_constraints)
    if num_constraints == 1:
      return two_cut_search(
        problem,
        multipliers,
        eta,
        num_iters=int(num_iters),
        tol=self.tol,
        with_transitions=with_transitions,
        fixed_length=fixed_length,
        warm=warm,
      )
    return cutting_planes(
      problem,
      multipliers,
      eta,
      num_iters=max(int(num_iters), 1),
      tol=self.tol,
      with_transitions=with_transitions,
      fixed_length=fixed_length,
      warm=warm if self.warm_cuts else None,
    )


def exact(
  num_iters: int | None = None, tol: float | None = 0.0, *, warm_cuts: bool = False
) -> Exact:
  """The exact inner solver, as a value: the default of every agent and analysis function.

  Args:
    num_iters: the dual search's budget (static): steps of the I = 1 search (default 58 in
      float64, 30 in float32), cutting planes for I >= 2 (default 80 in float64, 50 in
      float32). `None`: those defaults. A solve pays at most `max_dp_calls(dtype, I,
      num_iters)` DPs (the budget and 3 or 4 outside it); in float32 with several binding
      constraints a few percent of solves use all of them (float32 rounds the stopping
      test's gap): use float64 (x64) for I >= 3 binding constraints.
    tol: `0.0` (default): stop as soon as the dual is solved to the dtype's accuracy: no
      new cut, or the model's bound on the dual maximum (I = 1: the two-cut model's; I >=
      2: the master's primal point) within `max(tol, 1e-12)` (float64) or, in float32,
      `max(tol, 5e-6)` for I = 1 and `max(tol, 5e-5)` for I >= 2 (a twentieth and half of
      what a certificate must prove) of the best dual value, relative to `1 + |bound|`
      (`dual_function.stop_tolerance`): a `lax.while_loop` that pays only the DPs it
      needs. `None`: I = 1 stops only at the search's exact end (every step of the budget
      traced); I >= 2 as with `0.0`. Under `solve_inner(gradient="unrolled")` the loops
      run their whole budget (a `lax.fori_loop`, reverse-differentiable; finished iterates
      stay put, so the numbers are the same).
    warm_cuts: I >= 2: start each solve from the last one's `I + 1` vertices, re-filled in
      this box as its first cuts (an agent's `warm_start`): often one DP proves the solve
      where a cold start takes three or more. Off by default: the solve then certifies
      another point of the inner problem's optimal face (within the certificate), and the
      learning statistics differ beyond their seed noise (a 10-state CMDP with I = 2 at eta
      100: final cost regret 2,400 against 1,900 cold; docs/results/statistics). I = 1's
      warm bracket keeps the statistics and is always used.

  Returns:
    An `Exact` solver for `solve_inner(..., solver=)` and the agents' `inner=`.
  """
  return Exact(num_iters=num_iters, tol=tol, warm_cuts=warm_cuts)
