"""The registry of agents: `AGENTS[name]` builds an agent for a benchmark problem.

An agent module registers its factory with `@register_agent(name, problem_args=...)`;
`optaug_jax/_src/agents/__init__.py` lists the built-in agent modules, so adding an agent
is one new file, one line in that list, and its test. Experiments, notebooks and tests
build agents through `make_agent(name, benchmark, num_episodes=K, **options)`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .. import cmdp_checks as cmdps
from .. import setting as setting_lib
from ..errors import ArgumentError
from . import options as options_lib
from .base import Agent


class AgentSpec(NamedTuple):
  """How to build one registered agent."""

  factory: Callable[..., Agent]  # the agent's factory, e.g. `optaug`
  problem_args: Callable[[Any], dict[str, Any]]  # arguments taken from a `Benchmark`
  summary: str  # one line for `--help` and tables


AGENTS: dict[str, AgentSpec] = {}


def register_agent(
  name: str, *, problem_args: Callable[[Any], dict] | None = None, summary: str = ""
) -> Callable:
  """Decorator registering an agent factory under `name` (names are unique).

  Args:
    name: the registry key (used by `make_agent` and the experiments' `--agents`).
    problem_args: `benchmark -> dict` of the factory arguments that depend on the problem
      (e.g. the safe policy and its slack); default none.
    summary: one-line description.

  Returns the decorator; it returns the factory wrapped so that its agents' states carry
  a digest of the arguments it was called with (`agents.options`: a resume under an agent
  built with other options is refused), with the factory's signature and docstring.
  """

  def register(factory):
    if name in AGENTS:
      raise ArgumentError("name", f"agent {name!r} is already registered")
    factory = options_lib.stamped(factory)  # its agents' states carry their options
    AGENTS[name] = AgentSpec(
      factory=factory,
      problem_args=problem_args or (lambda b: {}),
      summary=summary or (factory.__doc__ or "").strip().split("\n")[0],
    )
    return factory

  return register


def agent_options(name: str) -> tuple[str, ...]:
  """The keyword arguments the factory of agent `name` names in its signature (a factory
  that also takes `**kwargs` accepts any option: `accepts_any_option`)."""
  parameters = inspect.signature(_spec(name).factory).parameters.values()
  named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
  return tuple(p.name for p in parameters if p.kind in named)


def accepts_any_option(name: str) -> bool:
  """Whether the factory of agent `name` takes `**kwargs` (then every option reaches it:
  `make_agent` and `make_agents` never drop one silently)."""
  parameters = inspect.signature(_spec(name).factory).parameters.values()
  return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _accepts(name: str, option: str) -> bool:
  return accepts_any_option(name) or option in agent_options(name)


def _spec(name: str) -> AgentSpec:
  if name not in AGENTS:
    raise ArgumentError("name", f"unknown agent {name!r}; known: {sorted(AGENTS)}")
  return AGENTS[name]


def make_agent(name: str, benchmark, *, num_episodes: int, **options) -> Agent:
  """Builds agent `name` for `benchmark` (a `Benchmark`: cmdp, safe_policy, slack).

  Args:
    name: a key of `AGENTS`.
    benchmark: the problem; the agent takes from it only what its `problem_args` say (a
      safe baseline and its slack), never the true model.
    num_episodes: `K` (for a factory that takes it).
    **options: factory arguments (override the problem's). Options the factory does not
      accept raise a `ValueError` naming them; use `agent_options(name)` to list them, or
      filter with it when one set of options serves several agents. A `setting` given by
      name (`"paper"`, `"bura2022"`) is built for `benchmark.cmdp` (`named_setting`).

  Returns:
    The `Agent`.
  """
  spec = _spec(name)
  if not hasattr(benchmark, "cmdp"):
    raise ArgumentError(
      "benchmark",
      f"expected a Benchmark (cmdp, safe_policy, slack), got"
      f" {type(benchmark).__name__}; oj.benchmarks.make_benchmark(name) builds"
      " one, oj.benchmarks.Benchmark(cmdp, *oj.safest_policy(cmdp)) wraps a CMDP",
    )
  cmdps.check_cmdp(benchmark.cmdp, "make_agent")
  accepted = set(agent_options(name))
  unknown = sorted(k for k in options if not _accepts(name, k))
  if unknown:
    raise ArgumentError(
      "options", f"agent {name!r} does not accept {unknown}; it accepts {sorted(accepted)}"
    )
  kwargs = {k: v for k, v in spec.problem_args(benchmark).items() if _accepts(name, k)}
  kwargs.update(options)
  if isinstance(kwargs.get("setting"), str):
    kwargs["setting"] = setting_lib.named_setting(kwargs["setting"], benchmark.cmdp)
  if _accepts(name, "num_episodes"):  # the linear agents' factories do not need K
    kwargs["num_episodes"] = num_episodes
  return spec.factory(**kwargs)


def make_agents(names, benchmark, *, num_episodes: int, options: Mapping[str, Any]) -> dict:
  """`{name: make_agent(name, ...)}`; each agent takes the options its factory accepts.

  `options` maps an option name to a value for every agent that accepts it (names it in
  its factory's signature, or takes `**kwargs`: then it receives every such option), or to
  a dict `{agent name: value}` for agent-specific values.
  """
  agents = {}
  for name in names:
    mine = {}
    for key, value in options.items():
      if isinstance(value, dict):
        if name in value:
          mine[key] = value[name]
      elif _accepts(name, key):  # a factory with **kwargs takes every option
        mine[key] = value
    agents[name] = make_agent(name, benchmark, num_episodes=num_episodes, **mine)
  return agents
