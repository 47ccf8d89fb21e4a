"""The inner problem of OptAug-CMDP (eq. (primal-step)) and its solvers, as values.

An inner solver is a value, the way an optax optimiser is: build it once and pass it to
`solve_inner(problem, multipliers, eta, solver=...)`, to `optaug(inner=...)`, or to the
analysis functions (`inner=`). Every one of them defaults to `exact()`.

    import optaug_jax as oj
    problem = oj.inner.InnerProblem.of_cmdp(cmdp)       # or .of_model(model, alpha, s1)
    sol = oj.solve_inner(problem, multipliers, eta)     # exact: sol.gap ~ 1e-14
    sol = oj.solve_inner(problem, multipliers, eta,
                         solver=oj.inner.frank_wolfe(num_iters=100, step_rule="standard"))

`exact(num_iters=None, tol=0.0)`: through the I-dimensional Fenchel dual, certified by
weak duality. `frank_wolfe(num_iters=100, step_rule="linesearch", tol=None)`: the paper's
Algorithm InnerOpt-FW. A solver of your own is any hashable callable with the signature of
`InnerSolver` returning a `SolverResult`.
"""

from optaug_jax._src.inner.dual_function import max_dp_calls
from optaug_jax._src.inner.exact import Exact, exact
from optaug_jax._src.inner.frank_wolfe import STEP_RULES, FrankWolfe, frank_wolfe
from optaug_jax._src.inner.problem import (
  InnerProblem,
  InnerSolution,
  SolverResult,
  WarmStart,
  certified_tolerance,
)
from optaug_jax._src.inner.solve import GRADIENTS, UNREACHED, InnerSolver

__all__ = (
  "Exact",
  "FrankWolfe",
  "GRADIENTS",
  "InnerProblem",
  "InnerSolution",
  "InnerSolver",
  "STEP_RULES",
  "SolverResult",
  "UNREACHED",
  "WarmStart",
  "certified_tolerance",
  "exact",
  "frank_wolfe",
  "max_dp_calls",
)
