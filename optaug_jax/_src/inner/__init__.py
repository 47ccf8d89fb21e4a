"""The inner problem of OptAug-CMDP (eq. (primal-step)) and its solvers, one file a step.

- `problem`: the problem, the objective (eq. (step1)) and its gradient (eq. (nabla)), what a
  solve returns.
- `solve`: `solve_inner`, the entry point every agent and analysis function calls.
- `frank_wolfe`: the paper's Algorithm InnerOpt-FW, as a solver value.
- `exact`: the exact solver, through the Fenchel dual (`dual_function`):
  `dual_search` (I = 1), `cutting_planes` (I >= 2) with its `master` QP and its primal
  `recovery`.
- `line_search`: the exact line search on the objective; `retrieve`: eq. (subst) and
  eq. (retrieve-p); `loops`: early-stopping and fixed-length loops.

The solver factories `exact()` and `frank_wolfe()` are not re-exported here (they share
their modules' names); the public namespace is `optaug_jax.inner`.
"""

# What the rest of the package uses (the public namespace is `optaug_jax.inner`).
from .problem import InnerProblem as InnerProblem
from .problem import WarmStart as WarmStart
from .problem import augmented_lagrangian as augmented_lagrangian
from .solve import UNREACHED as UNREACHED
from .solve import InnerSolver as InnerSolver
from .solve import solve_inner as solve_inner
