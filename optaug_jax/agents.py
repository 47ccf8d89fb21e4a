"""The baselines (OptAug and OptDual are at the top level), their registry, and the helpers
agents are built from.

`AGENTS[name]` (an `AgentSpec`) builds each registered agent; `make_agent(name, benchmark,
num_episodes=K, **options)` is how experiments, notebooks and tests build them. To add an
agent, write one module in `optaug_jax/_src/agents/` whose factory is decorated with
`@register_agent(...)` and list it in that package's `__init__.py` (your own script can
call `register_agent` directly); the helpers below (`init_state`, `update_state`,
`plan_info`, `as_schedule`, `model_fn`) and `optaug_jax._src.checking.arguments` are what
the built-in agents use.
"""

from optaug_jax._src.agents.base import (
  Assumptions,
  ComposedAgentState,
  InitFn,
  PlanFn,
  PlanInfo,
  Schedule,
  UpdateFn,
  as_schedule,
  init_agent,
  init_state,
  model_fn,
  plan_info,
  update_state,
)
from optaug_jax._src.agents.base import (  # deprecated: state._replace; not in __all__
  replace_agent_state as replace_agent_state,
)
from optaug_jax._src.agents.optaug import (
  OptAugState,
  paper_eta_schedule,
  pretrain_episodes_bound,
)
from optaug_jax._src.agents.optcmdp import optcmdp
from optaug_jax._src.agents.optdual import DualOptimizerState, paper_step_size
from optaug_jax._src.agents.optprimaldual import PrimalDualState, optprimaldual
from optaug_jax._src.agents.pessimistic import dope, dope_pretrain_episodes, optpess_lp
from optaug_jax._src.agents.registry import (
  AGENTS,
  AgentSpec,
  accepts_any_option,
  agent_options,
  make_agent,
  make_agents,
  register_agent,
)
from optaug_jax._src.agents.safe_baseline import safe_baseline
from optaug_jax._src.multiplier_updates import NuPIState, PIDState, nupi, pid_lagrangian

__all__ = (
  "AGENTS",
  "AgentSpec",
  "Assumptions",
  "ComposedAgentState",
  "DualOptimizerState",
  "InitFn",
  "NuPIState",
  "OptAugState",
  "PIDState",
  "PlanFn",
  "PlanInfo",
  "PrimalDualState",
  "Schedule",
  "UpdateFn",
  "accepts_any_option",
  "agent_options",
  "as_schedule",
  "dope",
  "dope_pretrain_episodes",
  "init_agent",
  "init_state",
  "make_agent",
  "make_agents",
  "model_fn",
  "nupi",
  "optcmdp",
  "optpess_lp",
  "optprimaldual",
  "paper_eta_schedule",
  "paper_step_size",
  "pid_lagrangian",
  "plan_info",
  "pretrain_episodes_bound",
  "register_agent",
  "safe_baseline",
  "update_state",
)
