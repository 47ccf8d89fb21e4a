"""Agents: factories returning `Agent(init, plan, update)`."""

from optaug_jax.agents.base import Agent, AgentState, PlanInfo
from optaug_jax.agents.optaug import optaug, paper_eta_schedule, pretrain_episodes_bound
from optaug_jax.agents.optcmdp import optcmdp
from optaug_jax.agents.optdual import optdual
from optaug_jax.agents.optprimaldual import PrimalDualState, optprimaldual

__all__ = ["Agent", "AgentState", "PlanInfo", "PrimalDualState", "optaug", "optcmdp",
           "optdual", "optprimaldual", "paper_eta_schedule", "pretrain_episodes_bound"]
