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
  "resolve_fill",
  "scan_horizon",
)

# Second doors to the box's operations: the `TransitionSet` methods are the doors
# (CHANGELOG, 0.2.0); these names warn and still answer.
_DEPRECATED = {
  "optimal_policy": "transitions.optimal_policy(reward)",
  "optimistic_policy_evaluation": "transitions.evaluate(reward, policy)",
}


def __getattr__(name: str):
  if name in _DEPRECATED:
    import warnings

    from optaug_jax._src import planning

    warnings.warn(
      f"oj.kernels.{name} is deprecated: use the TransitionSet method, {_DEPRECATED[name]}",
      DeprecationWarning,
      stacklevel=2,
    )
    return getattr(planning, name)
  raise AttributeError(f"module 'optaug_jax.kernels' has no attribute {name!r}")
