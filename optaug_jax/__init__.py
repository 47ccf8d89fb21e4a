"""optaug-jax: OptAug-CMDP and Lagrangian baselines for constrained MDPs, in JAX.

The top level holds the algorithm's steps and the objects every user needs. More in the
namespaces: `inner` (the inner problem and its solvers, as values), `agents` (the
baselines, the registry `AGENTS`), `benchmarks` (problems, the registry `BENCHMARKS`),
`kernels` (lower-level DP kernels), `analysis` (known-model methods, sensitivities), `lp`
(host-side HiGHS / cvxpy references), `plotting`. The experiment scripts' run machinery
(chunked runs, checkpoints, result directories, the command line) is not loaded here:
import it by name, `from optaug_jax import experiment`. Every public name has one home:
each container lives in the namespace of the functions that make it.
"""

from optaug_jax import (
  agents,
  analysis,
  benchmarks,
  inner,
  kernels,
  linear,
  lp,
  plotting,
)
from optaug_jax._src.agents.base import Agent, AgentState
from optaug_jax._src.agents.optaug import optaug
from optaug_jax._src.agents.optdual import optdual
from optaug_jax._src.checking.kernels import checked
from optaug_jax._src.cmdp import (
  CMDP,
  merge_repeated_next_states,
  to_dense,
  to_sparse,
)
from optaug_jax._src.cmdp_checks import validate_cmdp
from optaug_jax._src.env import Trajectory, sample_episode
from optaug_jax._src.errors import ArgumentError
from optaug_jax._src.estimates import (
  Counts,
  OptimisticModel,
  init_counts,
  optimistic_model,
  update_counts,
)
from optaug_jax._src.inner import augmented_lagrangian, solve_inner
from optaug_jax._src.lp import solve_lp
from optaug_jax._src.metrics import EpisodeLog, Regrets, RunSummary, regrets
from optaug_jax._src.multiplier_updates import dual_step
from optaug_jax._src.numerics import MAX_EPISODES
from optaug_jax._src.off_support import support_violations
from optaug_jax._src.planning import (
  ExtendedSolution,
  LMOSolution,
  policy_from_occupancy,
)
from optaug_jax._src.policies import (
  check_safe_policy,
  policy_values,
  random_cmdp,
  safest_policy,
)
from optaug_jax._src.runner import episode_step, run, run_sharded
from optaug_jax._src.setting import SETTINGS, Setting, named_setting
from optaug_jax._src.transition_set import TransitionSet

__version__ = "0.2.0"

__all__ = (
  # namespaces
  "agents",
  "analysis",
  "benchmarks",
  "inner",
  "kernels",
  "linear",
  "lp",
  "plotting",
  # names
  "Agent",
  "ArgumentError",
  "AgentState",
  "CMDP",
  "Counts",
  "EpisodeLog",
  "ExtendedSolution",
  "LMOSolution",
  "MAX_EPISODES",
  "OptimisticModel",
  "Regrets",
  "RunSummary",
  "SETTINGS",
  "Setting",
  "Trajectory",
  "TransitionSet",
  "augmented_lagrangian",
  "check_safe_policy",
  "checked",
  "dual_step",
  "episode_step",
  "init_counts",
  "merge_repeated_next_states",
  "named_setting",
  "optaug",
  "optdual",
  "optimistic_model",
  "policy_from_occupancy",
  "policy_values",
  "random_cmdp",
  "regrets",
  "run",
  "run_sharded",
  "safest_policy",
  "sample_episode",
  "solve_inner",
  "solve_lp",
  "support_violations",
  "update_counts",
  "to_dense",
  "to_sparse",
  "validate_cmdp",
)

from optaug_jax._src.deprecation import second_doors as _second_doors  # noqa: E402

# One door per operation: the box's operations are `TransitionSet` methods. The free
# functions that did the same are deprecated (CHANGELOG) and still answer, with a warning.
_DEPRECATED = {
  "extended_lmo": "transitions.lmo(reward, initial_state)",
  "extended_value_iteration": "transitions.value_iteration(reward, initial_state)",
  "occupancy": "kernel.occupancy(policy, initial_state)",
}


__getattr__ = _second_doors("oj", "optaug_jax", _DEPRECATED)
