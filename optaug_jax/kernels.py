"""Lower-level kernels: DP variants, the estimates' pieces, and the inner-solver slot.

Every kernel is written for one problem; batch with `jax.vmap`. `INNER_METHODS` maps a
method name to a function `(problem: InnerProblem, *, num_iters, step_rule, tol,
with_transitions, fill) -> MethodResult`; `solve_inner(method=...)` dispatches to it and
also accepts such a function directly.
"""

from optaug_jax._src.batching import batch_cond
from optaug_jax._src.estimates import empirical_means, log_factors
from optaug_jax._src.inner import (GRADIENTS, INNER_METHODS, STEP_RULES, UNREACHED,
                                   InnerProblem, MethodResult, certified_tolerance, dual, frank_wolfe)
from optaug_jax._src.planning import (AUTO_BLOCKED_MIN_STATES, DEFAULT_FILL, FILL_METHODS,
                                      UNROLL_HORIZON, UNROLL_MAX_ELEMENTS, box_minimize,
                                      optimal_policy, optimistic_policy_evaluation,
                                      resolve_fill, scan_horizon)

__all__ = (
    "AUTO_BLOCKED_MIN_STATES",
    "DEFAULT_FILL",
    "FILL_METHODS",
    "GRADIENTS",
    "INNER_METHODS",
    "STEP_RULES",
    "UNREACHED",
    "UNROLL_HORIZON",
    "UNROLL_MAX_ELEMENTS",
    "InnerProblem",
    "MethodResult",
    "batch_cond",
    "box_minimize",
    "certified_tolerance",
    "dual",
    "empirical_means",
    "frank_wolfe",
    "log_factors",
    "optimal_policy",
    "optimistic_policy_evaluation",
    "resolve_fill",
    "scan_horizon",
)
