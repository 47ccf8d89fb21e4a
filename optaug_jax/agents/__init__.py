"""Agents: factories returning `Agent(init, plan, update)`."""

from optaug_jax.agents.base import Agent, AgentState, PlanInfo
from optaug_jax.agents.optaug import optaug, paper_eta_schedule, pretrain_episodes_bound
from optaug_jax.agents.optdual import optdual

__all__ = ["Agent", "AgentState", "PlanInfo", "optaug", "optdual", "paper_eta_schedule",
           "pretrain_episodes_bound"]
