"""The implementation's tuning constants, read while tracing, and a block that sets them.

Four sizes decide how a program is written, not what it computes: the horizon scans are
unrolled up to `unroll_horizon` steps and `unroll_max_elements` elements
(`horizon.scan_horizon`), a sparse DP over a stationary box keeps its scan rolled from
`stationary_roll_min_slots` slots, and the dense greedy fill's `"auto"` takes `"blocked"`
from `auto_blocked_min_states` next states. Their values were measured on XLA:CPU
(docs/design.md, "Tuned constants"); another device may want others. They are read when
a function is traced, so a value set for a block reaches only the programs traced inside
it: `tuning` clears JAX's caches on entry and on exit, and a program compiled inside keeps
the values it was traced with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax

from . import box, horizon
from .checking import arguments
from .errors import ArgumentError
from .layouts import sparse

# name -> (module, attribute): where the implementation reads each constant.
_CONSTANTS = {
  "unroll_horizon": (horizon, "UNROLL_HORIZON"),
  "unroll_max_elements": (horizon, "UNROLL_MAX_ELEMENTS"),
  "stationary_roll_min_slots": (sparse, "STATIONARY_ROLL_MIN_SLOTS"),
  "auto_blocked_min_states": (box, "AUTO_BLOCKED_MIN_STATES"),
}


def tuning_constants() -> dict[str, int]:
  """The tuning constants in force: `unroll_horizon`, `unroll_max_elements`,
  `stationary_roll_min_slots`, `auto_blocked_min_states`."""
  return {name: getattr(module, attr) for name, (module, attr) in _CONSTANTS.items()}


@contextlib.contextmanager
def tuning(**values: int) -> Iterator[dict[str, int]]:
  """A block whose traces use the given tuning constants (names of `tuning_constants`).

  For measurements on a device of one's own: `with oj.kernels.tuning(unroll_horizon=8):
  compiled = jax.jit(f).lower(*args).compile()`; the compiled program keeps the values.
  JAX's caches are cleared on entry and on exit, so no trace made outside the block is
  reused inside it and none made inside is reused after it. Not for threads that trace at
  the same time: the values are the process's.

  Args:
    **values: each constant to set, a positive int.

  Yields:
    The constants in force inside the block.
  """
  for name, value in values.items():
    if name not in _CONSTANTS:
      raise ArgumentError(name, f"not a tuning constant; expected one of {sorted(_CONSTANTS)}")
    arguments.check_int(name, value, low=1)
  saved = tuning_constants()
  jax.clear_caches()
  try:
    for name, value in values.items():
      module, attr = _CONSTANTS[name]
      setattr(module, attr, int(value))
    yield tuning_constants()
  finally:
    for name, value in saved.items():
      module, attr = _CONSTANTS[name]
      setattr(module, attr, value)
    jax.clear_caches()
