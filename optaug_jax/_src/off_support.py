"""The observed transitions that a declared support excludes, named on the host.

A declared support (`Setting.support`) that the data contradict makes the box a point at 0
there, as if that probability were known. The agents count such tuples in their run
(`EpisodeLog.off_support_transitions`); `support_violations` names them afterwards from a
state's counts.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from . import setting as setting_lib
from .checking import arguments
from .estimates import Counts


class SupportViolations(NamedTuple):
  """Observed transitions that a declared support excludes (`support_violations`)."""

  indices: np.ndarray  # [M, 4] int, the (h, s, a, s') of each, in index order
  counts: np.ndarray  # [M] int, times each was observed (summed over leading batch axes)


_ON_VIOLATION = ("warn", "raise", "ignore")


def support_violations(
  counts: Counts, setting: setting_lib.Setting, *, on_violation: str = "warn", max_named: int = 5
) -> SupportViolations:
  """The observed `(h, s, a, s')` whose next state `s'` the setting's support excludes.

  Host side (never jitted). A declared support (`Setting.support`) that the data contradict
  makes the box a point at 0 there, as if that probability were known: the agents log the
  number of such tuples (`EpisodeLog.off_support_transitions`, inside the jitted run); this
  function names them, from the counts of a returned state (`state.counts`).

  Args:
    counts: `Counts` `[H, S, A, S']`, possibly with leading batch axes (seeds), whose
      observations are summed.
    setting: the `Setting` whose `support` is checked (`None` support: nothing to check).
    on_violation: `"warn"` (default: a `UserWarning` naming the first tuples), `"raise"`
      (a `ValueError` naming them) or `"ignore"`.
    max_named: how many tuples the message names.

  Returns:
    `SupportViolations(indices [M, 4], counts [M])`, empty when the data agree. The
    sparse layout keeps no slot for an `s'` outside the support, so there `indices` is
    empty and `counts` holds their number (`[1]`, or `[0]` when there are none).
  """
  arguments.check_choice("on_violation", on_violation, _ON_VIOLATION)
  setting = setting_lib.resolve(setting)
  indices, observed = setting.layout.off_support_observations(counts, setting.support)
  found = SupportViolations(indices, observed)
  if on_violation == "ignore":
    return found
  if indices.shape[0]:
    named = ", ".join(
      f"(h={h}, s={s}, a={a}, s'={t}) x{n}"
      for (h, s, a, t), n in zip(indices[:max_named].tolist(), observed[:max_named].tolist())
    )
    more = indices.shape[0] - min(max_named, indices.shape[0])
    _report(
      f"setting.support: {indices.shape[0]} observed transition(s) (h, s, a, s')"
      f" have s' outside the declared support: {named}"
      + (f" and {more} more" if more else "")
      + "; their boxes are points at 0 there, so the support is wrong",
      on_violation,
    )
  elif observed.shape[0]:  # the sparse layout: a number, no tuples
    _report(
      f"setting.support: {int(observed[0])} observed transition(s) had a next state outside"
      " the declared sparse support (next_states); the sparse layout keeps no"
      " slot for them, so the support is wrong",
      on_violation,
    )
  return found


def _report(message: str, on_violation: str) -> None:
  """`support_violations`' finding: raised (`"raise"`) or warned at its caller's line."""
  if on_violation == "raise":
    raise ValueError(message)
  warnings.warn(message, stacklevel=3)
