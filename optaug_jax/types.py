"""Every container of the library (NamedTuples of arrays), in one place."""

from optaug_jax._src.agents.base import Agent, AgentState, PlanInfo
from optaug_jax._src.agents.optdual import DualOptimizerState
from optaug_jax._src.agents.optprimaldual import PrimalDualState
from optaug_jax._src.benchmarks import Benchmark
from optaug_jax._src.cmdp import CMDP
from optaug_jax._src.env import Trajectory
from optaug_jax._src.estimates import Counts, OptimisticModel
from optaug_jax._src.inner import InnerProblem, InnerSolution, MethodResult
from optaug_jax._src.known_model import KnownModelLog
from optaug_jax._src.lp import LPSolution
from optaug_jax._src.metrics import EpisodeLog, Regrets, RunSummary
from optaug_jax._src.planning import ExtendedSolution, LMOSolution
from optaug_jax._src.sensitivity import InnerSensitivities

__all__ = (
    "Agent",
    "AgentState",
    "Benchmark",
    "CMDP",
    "Counts",
    "DualOptimizerState",
    "EpisodeLog",
    "ExtendedSolution",
    "InnerProblem",
    "InnerSensitivities",
    "InnerSolution",
    "KnownModelLog",
    "LMOSolution",
    "LPSolution",
    "MethodResult",
    "OptimisticModel",
    "PlanInfo",
    "PrimalDualState",
    "Regrets",
    "RunSummary",
    "Trajectory",
)
