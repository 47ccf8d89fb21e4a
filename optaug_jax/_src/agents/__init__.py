"""Agents: factories returning `Agent(init, plan, update, assumptions)`.

The built-in agents are the modules listed here; importing them registers their factories
in `registry.AGENTS` (`@register_agent`). A new agent is one module, added to this list.
The public names are re-exported by `optaug_jax.agents`.
"""

from . import (  # noqa: F401  (imported to register their agents)
  optaug,
  optcmdp,
  optdual,
  optprimaldual,
  pessimistic,
  safe_baseline,
)
