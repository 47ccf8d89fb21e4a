"""Analysis tools: the outer methods on a known CMDP, and sensitivities of the inner optimum."""

from optaug_jax._src.known_model import (
  KnownModelLog,
  alm_known_model,
  dual_descent_known_model,
  optimal_value_estimate,
)
from optaug_jax._src.sensitivity import InnerSensitivities, inner_sensitivities

__all__ = (
  "InnerSensitivities",
  "KnownModelLog",
  "alm_known_model",
  "dual_descent_known_model",
  "inner_sensitivities",
  "optimal_value_estimate",
)
