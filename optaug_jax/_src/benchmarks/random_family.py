"""One member of `random_cmdp`'s documented family, with `safe_policy` as its baseline."""

from __future__ import annotations

import jax

from ..cmdp_checks import validate_cmdp
from ..policies import (
  check_safe_policy,
  random_cmdp,
  safest_policy,
)
from ._common import (
  Benchmark,
)


def random_family(
  *,
  seed: int = 0,
  num_states: int = 10,
  num_actions: int = 4,
  horizon: int = 10,
  num_constraints: int = 1,
  concentration: float = 1.0,
  threshold_fraction: float = 0.5,
  dtype=None,
) -> Benchmark:
  """Member `seed` of the default random family of `random_cmdp`, with its safe policy.

  The CMDP is `random_cmdp(PRNGKey(seed), ...)`: transitions `Dirichlet(concentration)`,
  objective and constraint costs uniform on `[0, 1]`, thresholds at `threshold_fraction`
  of the way from the safe policy's constraint values to the unconstrained optimum's (so
  the constraints bind). The baseline is `safe_policy` (minimises the summed constraint
  costs by DP); its slack is checked on the host.

  Args:
    seed: which member of the family (the PRNG seed).
    num_states: `S`.
    num_actions: `A`.
    horizon: `H`.
    num_constraints: `I`.
    concentration: Dirichlet parameter of every transition row.
    threshold_fraction: see `random_cmdp`.
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    A `Benchmark`.
  """
  cmdp = validate_cmdp(
    random_cmdp(
      jax.random.PRNGKey(seed),
      num_states=num_states,
      num_actions=num_actions,
      horizon=horizon,
      num_constraints=num_constraints,
      concentration=concentration,
      threshold_fraction=threshold_fraction,
      dtype=dtype,
    )
  )
  policy, _ = safest_policy(cmdp)
  return Benchmark(cmdp=cmdp, safe_policy=policy, slack=check_safe_policy(cmdp, policy))
