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
from optaug_jax._src.deprecation import second_doors as _second_doors
from optaug_jax._src.estimates import empirical_means
from optaug_jax._src.horizon import UNROLL_HORIZON, UNROLL_MAX_ELEMENTS, scan_horizon
from optaug_jax._src.layouts.sparse import STATIONARY_ROLL_MIN_SLOTS

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
  "resolve_fill",
  "scan_horizon",
)

# Second doors to the box's operations: the `TransitionSet` methods are the doors
# (CHANGELOG, 0.2.0); these names warn and still answer.
_DEPRECATED = {
  "optimal_policy": "transitions.optimal_policy(reward)",
  "optimistic_policy_evaluation": "transitions.evaluate(reward, policy)",
}


__getattr__ = _second_doors("oj.kernels", "optaug_jax.kernels", _DEPRECATED)
