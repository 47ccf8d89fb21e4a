"""Agents: factories returning `Agent(init, plan, update)`, and their registry.

`AGENTS[name]` (an `AgentSpec`) builds each registered agent; `make_agent(name, benchmark,
num_episodes=K, **options)` is how experiments, notebooks and tests build them. To add an
agent, write one module in `optaug_jax/_src/agents/` whose factory is decorated with
`@register_agent(...)`; the helpers below (`init_state`, `update_state`, `plan_info`,
`as_schedule`, `model_fn`) and `optaug_jax._src.validation` are what the built-in agents use.
"""

from optaug_jax._src.agents.base import (Agent, AgentState, InitFn, PlanFn, PlanInfo,
                                         Schedule, UpdateFn, as_schedule, init_state,
                                         plan_info, update_state)
from optaug_jax._src.agents.optaug import optaug, paper_eta_schedule, pretrain_episodes_bound
from optaug_jax._src.agents.optcmdp import optcmdp
from optaug_jax._src.agents.optdual import DualOptimizerState, optdual
from optaug_jax._src.agents.optprimaldual import PrimalDualState, optprimaldual
from optaug_jax._src.agents.pessimistic import dope, dope_pretrain_episodes, optpess_lp
from optaug_jax._src.agents.safe_baseline import safe_baseline
from optaug_jax._src.agents.base import model_fn
from optaug_jax._src.dual_optimizers import NuPIState, PIDState, nupi, pid_lagrangian
from optaug_jax._src.agents.registry import (AGENTS, AgentSpec, agent_options, make_agent,
                                             register_agent)

__all__ = (
    "AGENTS",
    "Agent",
    "AgentSpec",
    "AgentState",
    "DualOptimizerState",
    "InitFn",
    "NuPIState",
    "PIDState",
    "PlanFn",
    "PlanInfo",
    "PrimalDualState",
    "Schedule",
    "UpdateFn",
    "agent_options",
    "as_schedule",
    "dope",
    "dope_pretrain_episodes",
    "init_state",
    "make_agent",
    "model_fn",
    "nupi",
    "optaug",
    "optcmdp",
    "optdual",
    "optpess_lp",
    "optprimaldual",
    "paper_eta_schedule",
    "pid_lagrangian",
    "plan_info",
    "pretrain_episodes_bound",
    "register_agent",
    "safe_baseline",
    "update_state",
)
