"""Analysis tools: the outer methods on a known CMDP, sensitivities of the inner optimum, and
the outlook before a long run (whether and when OptAug's per-episode advantage shows)."""

from optaug_jax._src.known_model import (
  KnownModelLog,
  alm_known_model,
  dual_descent_known_model,
  optimal_value_estimate,
)
from optaug_jax._src.outlook import (
  BIAS_FORMS,
  LAGRANGIAN,
  BiasFit,
  Measurements,
  Outlook,
  Prediction,
  fit_bias,
  measured_separation,
  outlook,
  predict,
)
from optaug_jax._src.outlook_runs import (
  Curve,
  FluidRun,
  PerfectModelLog,
  Pilot,
  exact_counts,
  expected_counts,
  fluid_run,
  perfect_model_run,
  pilot_run,
)
from optaug_jax._src.sensitivity import InnerSensitivities, inner_sensitivities

__all__ = (
  "BIAS_FORMS",
  "LAGRANGIAN",
  "BiasFit",
  "Curve",
  "FluidRun",
  "Measurements",
  "Outlook",
  "PerfectModelLog",
  "Pilot",
  "Prediction",
  "exact_counts",
  "expected_counts",
  "fit_bias",
  "fluid_run",
  "measured_separation",
  "outlook",
  "perfect_model_run",
  "pilot_run",
  "predict",
  "InnerSensitivities",
  "KnownModelLog",
  "alm_known_model",
  "dual_descent_known_model",
  "inner_sensitivities",
  "optimal_value_estimate",
)
