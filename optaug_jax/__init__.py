"""optaug-jax: OptAug-CMDP and Lagrangian baselines for constrained MDPs, in JAX."""

from optaug_jax.agents import (Agent, AgentState, PlanInfo, PrimalDualState, optaug, optcmdp,
                               optdual, optprimaldual, paper_eta_schedule,
                               pretrain_episodes_bound)
from optaug_jax.benchmarks import (BENCHMARKS, Benchmark, factored, gridworld,
                                   make_benchmark, media_streaming, plot_gridworld,
                                   random_family)
from optaug_jax.cmdp import CMDP, check_safe_policy, random_cmdp, safe_policy, validate_cmdp
from optaug_jax.env import Trajectory, sample_episode
from optaug_jax.estimates import Counts, OptimisticModel, optimistic_model
from optaug_jax.inner import InnerSolution, augmented_lagrangian, solve_inner
from optaug_jax.known_model import (KnownModelLog, alm_known_model,
                                    dual_descent_known_model)
from optaug_jax.metrics import EpisodeLog, Regrets, RunSummary, regrets
from optaug_jax.planning import (ExtendedSolution, box_minimize, extended_value_iteration,
                                 occupancy, optimal_policy, optimistic_policy_evaluation,
                                 policy_values)
from optaug_jax.reference import LPSolution, solve_extended_lp, solve_lp
from optaug_jax.runner import episode_step, run, run_sharded
from optaug_jax.sensitivity import InnerSensitivities, inner_sensitivities

__version__ = "0.1.0"

__all__ = [
    "BENCHMARKS", "Benchmark", "factored", "gridworld", "make_benchmark", "media_streaming",
    "plot_gridworld", "random_family",
    "Agent", "AgentState", "CMDP", "Counts", "EpisodeLog", "ExtendedSolution",
    "InnerSensitivities", "InnerSolution", "KnownModelLog", "PrimalDualState", "LPSolution", "OptimisticModel", "PlanInfo", "Regrets", "RunSummary", "Trajectory",
    "alm_known_model", "augmented_lagrangian", "box_minimize", "dual_descent_known_model", "check_safe_policy", "episode_step",
    "extended_value_iteration", "inner_sensitivities", "occupancy", "optaug", "optcmdp", "optdual", "optimal_policy",
    "optimistic_policy_evaluation", "optprimaldual",
    "optimistic_model", "paper_eta_schedule", "policy_values", "pretrain_episodes_bound",
    "random_cmdp", "regrets", "run", "run_sharded", "safe_policy", "sample_episode", "solve_extended_lp",
    "solve_inner", "solve_lp", "validate_cmdp", "__version__",
]
