"""Agents: factories returning `Agent(init, plan, update)`, registered in `registry.AGENTS`.

Every module of this package is imported here, so a new agent module registers itself
(`@register_agent`) without touching any other file. The public names are re-exported by
`optaug_jax.agents`.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
  importlib.import_module(f"{__name__}.{_module.name}")
