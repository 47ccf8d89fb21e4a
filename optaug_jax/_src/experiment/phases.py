"""XLA:CPU op time of a compiled program by the phase of the episode that emitted each op.

The library names an episode's phases with `jax.named_scope` (the runner's episode: "plan",
"play", "update", "evaluate"; inside them "optimistic_model", "inner_solve",
"extended_dp", "refill"); the scopes end up in the `op_name` metadata of the compiled
HLO's instructions. `phase_profile` runs the compiled program under `jax.profiler.trace`,
reads the Perfetto trace's op events (each named after the instruction it runs) and adds
their durations to the innermost phase in the instruction's `op_name`. Control-flow
instructions (`while`, `conditional`, `call`) are containers whose events span their
bodies' ops and are not counted.

Op time is summed over the threads that ran ops (on a 2-core machine it can exceed the
wall time) and the profiler inflates the many tiny ops: read phases against each other
and against the other agent's, in the same run.
"""

from __future__ import annotations

import collections
import re

from . import timing as common

# Innermost first: an op is attributed to the first of these found in its scope path.
PHASES = (
  "extended_dp",
  "refill",
  "inner_solve",
  "optimistic_model",
  "plan",
  "play",
  "update",
  "evaluate",
)
OTHER = "other"
_CONTAINERS = ("while", "conditional", "call")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([\w\-]+)\(")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_TRANSFORMED = re.compile(r"^\w+\((.*)\)$")  # `vmap(extended_dp)`: a scope under a transform


def _scope(part: str) -> str:
  while (m := _TRANSFORMED.match(part)) is not None:
    part = m.group(1)
  return part


def phase_of(op_name: str) -> str:
  """The innermost of `PHASES` in an instruction's `op_name` path (`OTHER`: none)."""
  parts = [_scope(p) for p in op_name.split("/")]
  for phase in PHASES:
    if phase in parts:
      return phase
  return OTHER


def instruction_phases(hlo_text: str) -> dict[str, str | None]:
  """Each instruction of an optimised HLO module's text: its phase, or `None` for a
  control-flow container (not counted)."""
  phases: dict[str, str | None] = {}
  for line in hlo_text.splitlines():
    m = _INSTRUCTION.match(line)
    if m is None:
      continue
    name, opcode = m.groups()
    op = _OP_NAME.search(line)
    phases[name] = None if opcode in _CONTAINERS else phase_of(op.group(1) if op else "")
  return phases


def phase_profile(compiled, args, calls: int = 3) -> dict[str, float]:
  """Op time per call of `compiled(*args)`, in seconds, by phase (`PHASES`, `OTHER`: ops
  in no phase, e.g. the copies XLA adds around loops, which carry no op name). Events that
  name no instruction of the module (the runtime's own) are left out."""
  phases = instruction_phases(compiled.as_text())
  total: collections.Counter = collections.Counter()
  for e in common.trace_events(compiled, args, calls):
    if e.get("ph") != "X" or "dur" not in e:
      continue
    name = e.get("name", "")
    if name not in phases:
      continue
    phase = phases[name]
    if phase is not None:
      total[phase] += e["dur"] * 1e-6
  return {k: total[k] / calls for k in PHASES + (OTHER,)}


def fitted_phase_profile(compile_for, args, episodes: int, calls: int = 2, log=None):
  """`phase_profile` of `compile_for(episodes)(*args)`, within the profiler's event cap.

  A trace that reaches the cap (`timing.TraceTruncatedError`: the profiler kept its first
  events and dropped the rest) is taken again with one call, then with half the episodes
  (`compile_for` compiles the program of that many), down to one.

  Returns:
    `(op seconds per call by phase, episodes, calls, compiled)`: what was profiled.
  """
  compiled = compile_for(episodes)
  while True:
    try:
      return phase_profile(compiled, args, calls=calls), episodes, calls, compiled
    except common.TraceTruncatedError:
      if calls > 1:
        calls = 1
      elif episodes > 1:
        episodes //= 2
        compiled = compile_for(episodes)
      else:
        raise
      if log is not None:
        log(f"the trace reached the profiler's event cap; again: {episodes} episodes, {calls} call")
