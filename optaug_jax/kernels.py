"""Lower-level kernels: DP variants, the estimates' pieces, and batching.

Every kernel is written for one problem; batch with `jax.vmap`. The inner solvers are in
`optaug_jax.inner`.
"""

from optaug_jax._src.batching import batch_cond, for_active
from optaug_jax._src.box import (
  AUTO_BLOCKED_MIN_STATES,
  DEFAULT_FILL,
  FILL_METHODS,
  box_minimize,
  resolve_fill,
)
from optaug_jax._src.estimates import empirical_means
from optaug_jax._src.planning import (
  STATIONARY_ROLL_MIN_SLOTS,
  UNROLL_HORIZON,
  UNROLL_MAX_ELEMENTS,
  optimal_policy,
  optimistic_policy_evaluation,
  scan_horizon,
)

__all__ = (
  "AUTO_BLOCKED_MIN_STATES",
  "DEFAULT_FILL",
  "FILL_METHODS",
  "STATIONARY_ROLL_MIN_SLOTS",
  "UNROLL_HORIZON",
  "UNROLL_MAX_ELEMENTS",
  "batch_cond",
  "for_active",
  "box_minimize",
  "empirical_means",
  "optimal_policy",
  "optimistic_policy_evaluation",
  "resolve_fill",
  "scan_horizon",
)
