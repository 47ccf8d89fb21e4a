"""Host-side reference solvers (never jitted): exact LPs by HiGHS, the inner problem by cvxpy.

`oj.solve_lp` (at the top level) gives a CMDP's exact optimum and multipliers as an
`LPSolution`; `least_excess` says by how much the closest policy misses (or clears) every
threshold at once;
`solve_extended_lp` is OptCMDP's episode problem (its box rows first made feasible where
only rounding emptied them, `repair_box`); `solve_inner_reference` solves the inner
problem eq. (primal-step) with Clarabel (needs the `reference` extra).
"""

from optaug_jax._src.lp import (
  LPSolution,
  extended_polytope,
  flow_constraints,
  least_excess,
  repair_box,
  solve_extended_lp,
  solve_inner_reference,
)

__all__ = (
  "LPSolution",
  "extended_polytope",
  "flow_constraints",
  "least_excess",
  "repair_box",
  "solve_extended_lp",
  "solve_inner_reference",
)
