"""Agents: factories returning `Agent(init, plan, update)`, registered in `AGENTS`.

Every module of this package is imported here, so a new agent module registers itself
(`@register_agent`) without touching any other file.
"""

import importlib
import pkgutil

from .base import Agent, AgentState, PlanInfo
from .registry import AGENTS, AgentSpec, agent_options, make_agent, register_agent

for _module in pkgutil.iter_modules(__path__):
  importlib.import_module(f"{__name__}.{_module.name}")
