"""An agent's options, carried by its state: a resume under other options is refused.

A registered factory (`@register_agent`) stamps the agent it builds with a digest of every
argument it was called with, defaults included (`AgentState.options`, an int32 leaf set by
`init`; `Assumptions.options`, the readable form). `run`, `run_sharded` and `episode_step`
compare a resumed state's digest with the agent's (`run_checks.check_state`): an agent
built with another `pretrain_episodes` or `eta` would otherwise continue the state as if it
had made it (back into pre-training, or on another step size).

What enters the digest: numbers, strings, `None`, tuples and lists by value; arrays by
dtype, shape and bytes; frozen dataclasses (the inner solvers, `Setting`) field by field;
a callable (an eta schedule) by its module and qualified name, not its closure. An option
that is traced (an agent built inside a vmapped function, to sweep it) has no value on the
host: the agent is then stamped 0, "unknown", and its states are not compared.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..checking import arguments
from .base import Agent, Assumptions

UNKNOWN = 0  # the digest of an agent whose options are not all concrete (or not stamped)

# Every digest stamped in this process and the options it stands for: a refused resume
# names the options that differ when the state's agent was built here too.
_SEEN: dict[int, dict[str, str]] = {}


class _Traced(Exception):
  pass


def _token(value: Any) -> str:
  """A stable text for one option (`_Traced` if it has no value on the host)."""
  if value is None or isinstance(value, bool | int | float | complex | str):
    return repr(value)
  if isinstance(value, np.generic):
    return f"{value.dtype}:{value.item()!r}"
  if isinstance(value, jax.Array | np.ndarray):
    if arguments.traced(value):
      raise _Traced
    x = np.asarray(value)
    if x.size == 1:
      return f"{x.dtype}{list(x.shape)}:{x.reshape(()).item()!r}"
    return f"{x.dtype}{list(x.shape)}:sha256:{hashlib.sha256(x.tobytes()).hexdigest()[:16]}"
  if isinstance(value, tuple | list):
    return "(" + ", ".join(_token(v) for v in value) + ")"
  if isinstance(value, Mapping):
    return "{" + ", ".join(f"{k!r}: {_token(v)}" for k, v in sorted(value.items())) + "}"
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    fields = ", ".join(
      f"{f.name}={_token(getattr(value, f.name))}" for f in dataclasses.fields(value)
    )
    return f"{type(value).__qualname__}({fields})"
  if callable(value):
    name = getattr(value, "__qualname__", type(value).__qualname__)
    return f"<callable {getattr(value, '__module__', '?')}.{name}>"
  return f"<{type(value).__qualname__}>"


def describe(options: Mapping[str, Any]) -> tuple[int, dict[str, str] | None]:
  """`(digest, {option: text})` of a factory's arguments; `(UNKNOWN, None)` if any is
  traced."""
  try:
    tokens = {name: _token(value) for name, value in options.items()}
  except _Traced:
    return UNKNOWN, None
  text = "\n".join(f"{k}={v}" for k, v in sorted(tokens.items()))
  digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") & 0x7FFFFFFF
  digest = digest or 1  # never UNKNOWN
  _SEEN[digest] = tokens
  return digest, tokens


def stamp(agent: Agent, digest: int, tokens: dict[str, str] | None) -> Agent:
  """`agent` whose `init` writes `digest` into the state and whose assumptions carry the
  options (`Assumptions.options`, `Assumptions.options_digest`)."""
  init = agent.init

  def stamped_init(*args, **kwargs):
    state = init(*args, **kwargs)
    if not hasattr(state, "options"):
      return state  # a state of the agent's own that holds no AgentState
    return state._replace(options=jnp.asarray(digest, jnp.int32))

  assumptions = agent.assumptions if agent.assumptions is not None else Assumptions()
  assumptions = dataclasses.replace(assumptions, options=tokens, options_digest=digest)
  return agent._replace(init=stamped_init, assumptions=assumptions)


def stamped(factory: Callable[..., Agent]) -> Callable[..., Agent]:
  """`factory` whose agents carry a digest of the arguments it was called with (see the
  module docstring); its signature and docstring are the factory's."""
  signature = inspect.signature(factory)

  @functools.wraps(factory)
  def build(*args, **kwargs) -> Agent:
    agent = factory(*args, **kwargs)
    if not isinstance(agent, Agent):
      return agent
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    options = dict(bound.arguments)
    for name, param in signature.parameters.items():  # **kwargs spread out by name
      if param.kind is inspect.Parameter.VAR_KEYWORD:
        options.update(options.pop(name, {}))
      elif param.kind is inspect.Parameter.VAR_POSITIONAL:
        options[name] = tuple(options.get(name, ()))
    return stamp(agent, *describe(options))

  return build


def differences(digest: int, tokens: Mapping[str, str] | None) -> str:
  """What the options of the agent that stamped `digest` (when stamped in this process)
  and `tokens` differ in, as text; `""` when not known here."""
  theirs = _SEEN.get(int(digest))
  if theirs is None or tokens is None:
    return ""
  names = sorted(k for k in set(theirs) | set(tokens) if theirs.get(k) != tokens.get(k))
  return ", ".join(f"{k} {theirs.get(k, '(none)')} -> {tokens.get(k, '(none)')}" for k in names)
