"""Second doors to the box's operations: a public module's `__getattr__` that still answers
for a free function deprecated for its `TransitionSet` method, with a warning."""

from __future__ import annotations

import warnings

from . import planning, tuning

# The version in which the second doors go (the CHANGELOG's "Deprecated" says so too).
REMOVED_IN = "0.3.0"


def second_doors(shown: str, module: str, doors: dict[str, str], constants: tuple[str, ...] = ()):
  """A module `__getattr__`: `planning.NAME` for each name of `doors` (with a
  `DeprecationWarning` that names the method, `doors[NAME]`), the value of each tuning
  constant named in `constants` (upper case; `tuning_constants()`'s key in lower case),
  with a `DeprecationWarning`, an `AttributeError` otherwise. `shown`: how users write
  the module (`oj`, `oj.kernels`); `module`: its import name."""

  def __getattr__(name: str):
    if name in constants:
      key = name.lower()
      warnings.warn(
        f"{shown}.{name} is a read-only copy of a tuning constant and goes in {REMOVED_IN}:"
        f" read {shown}.tuning_constants()[{key!r}], set it for a block with"
        f" {shown}.tuning({key}=...)",
        DeprecationWarning,
        stacklevel=2,
      )
      return tuning.tuning_constants()[key]
    if name in doors:
      warnings.warn(
        f"{shown}.{name} is deprecated and goes in {REMOVED_IN}: use the TransitionSet"
        f" method, {doors[name]}",
        DeprecationWarning,
        stacklevel=2,
      )
      return getattr(planning, name)
    raise AttributeError(f"module {module!r} has no attribute {name!r}")

  return __getattr__
