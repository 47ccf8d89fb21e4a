"""Linear CMDPs (the paper's open question 4): features `phi(s, a)`, ridge estimates, and
OptAug-CMDP and OptDual-CMDP with softmax policies on them.

    import optaug_jax as oj
    bench = oj.linear.kitamura_linear(seed=0)          # S = 100, A = 3, d = 5, H = 4
    agent = oj.linear.optaug_linear(bench.model, bench.safe_policy, eta=10.0)
    state, logs = oj.run(agent, key, bench.model.cmdp, num_episodes=1000)

A `LinearCMDP` is a tabular `CMDP` (the true model: `oj.run` samples it and evaluates the
policies exactly) with the features the agents learn through; `from_tabular` gives any
CMDP its one-hot features. The agents read the features and the costs, never the kernel:
`Ridge` keeps per-step ridge regressions (`Lambda_h` from exact visit counts, the targets
by a compensated sum), `estimate` factors them and computes the elliptical bonus, and
`composite_softmax` is the clipped optimistic backup of the objective and the constraints
under one softmax policy. The peers' agents, `opse` (Kitamura et al. 2025) and
`ghosh_softmax` (Ghosh et al. 2024 as Kitamura et al. run it), are written from their
definitions beside them. `latent_factors` draws a linear CMDP of `10^4` states (sparse rows)
where a tabular agent cannot go, and `dual_optimum` gives its exact optimum by the
Lagrangian dual where an LP would be too large.
"""

from optaug_jax._src.linear.agents import LinearAgentState, optaug_linear, optdual_linear
from optaug_jax._src.linear.benchmarks import (
  BENCHMARKS,
  PUBLISHED_CONSTANTS,
  LinearBenchmark,
  kitamura_linear,
  kitamura_random,
  kitamura_streaming,
)
from optaug_jax._src.linear.large import DualOptimum, dual_optimum, latent_factors
from optaug_jax._src.linear.model import (
  LinearCMDP,
  from_tabular,
  linear_residual,
  validate_linear_cmdp,
)
from optaug_jax._src.linear.peers import ghosh_softmax, opse
from optaug_jax._src.linear.planning import (
  Backup,
  Components,
  composite_softmax,
  lagrangian_components,
)
from optaug_jax._src.linear.ridge import Estimate, Ridge, estimate, expected_next, gram, update

__all__ = [
  "BENCHMARKS",
  "Backup",
  "Components",
  "DualOptimum",
  "Estimate",
  "LinearAgentState",
  "PUBLISHED_CONSTANTS",
  "LinearBenchmark",
  "LinearCMDP",
  "Ridge",
  "composite_softmax",
  "dual_optimum",
  "estimate",
  "expected_next",
  "from_tabular",
  "ghosh_softmax",
  "gram",
  "kitamura_linear",
  "kitamura_random",
  "kitamura_streaming",
  "lagrangian_components",
  "latent_factors",
  "linear_residual",
  "optaug_linear",
  "opse",
  "optdual_linear",
  "update",
  "validate_linear_cmdp",
]
