"""Lower-level kernels: DP variants, the estimates' pieces, and batching.

Every kernel is written for one problem; batch with `jax.vmap`. The inner solvers are in
`optaug_jax.inner`.
"""

from optaug_jax._src.batching import batch_cond, for_active
from optaug_jax._src.box import DEFAULT_FILL, FILL_METHODS, box_minimize, resolve_fill
from optaug_jax._src.deprecation import second_doors as _second_doors
from optaug_jax._src.estimates import empirical_means
from optaug_jax._src.horizon import scan_horizon
from optaug_jax._src.tuning import tuning, tuning_constants

__all__ = (
  "DEFAULT_FILL",
  "FILL_METHODS",
  "batch_cond",
  "for_active",
  "box_minimize",
  "empirical_means",
  "resolve_fill",
  "scan_horizon",
  "tuning",
  "tuning_constants",
)

# Second doors to the box's operations: the `TransitionSet` methods are the doors
# (CHANGELOG, 0.2.0); these names warn and still answer.
_DEPRECATED = {
  "optimal_policy": "transitions.optimal_policy(reward)",
  "optimistic_policy_evaluation": "transitions.evaluate(reward, policy)",
}


# The tuning constants were exported as copies, which setting did not change (0.2.0):
# `tuning_constants()` reads them and `tuning(...)` sets them for a block.
_CONSTANTS = tuple(name.upper() for name in tuning_constants())

__getattr__ = _second_doors("oj.kernels", "optaug_jax.kernels", _DEPRECATED, _CONSTANTS)
