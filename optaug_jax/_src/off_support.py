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
from .errors import ArgumentError
from .estimates import Counts, known_array


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
    `SupportViolations(indices [M, 4], counts [M])`, empty when the data agree.
  """
  arguments.check_choice("on_violation", on_violation, _ON_VIOLATION)
  setting = setting_lib.resolve(setting)
  if setting.sparse:
    return _sparse_violations(counts, on_violation)
  transitions = np.asarray(counts.transitions)
  if transitions.ndim < 4:
    raise ArgumentError(
      "counts.transitions", f"expected [..., H, S, A, S'], got shape {transitions.shape}"
    )
  observed = transitions.reshape((-1,) + transitions.shape[-4:]).sum(0, dtype=np.int64)
  if setting.support is None:
    return SupportViolations(np.zeros((0, 4), np.int64), np.zeros((0,), np.int64))
  support = np.asarray(
    known_array(
      setting.support,
      "support",
      (
        transitions.shape[-4]
        if transitions.shape[-4] > 1
        else np.shape(setting.support)[0]
        if np.ndim(setting.support) == 4
        else 1,
      )
      + observed.shape[1:],
      bool,
    )
  )
  if observed.shape[0] == 1:
    support = np.asarray(support.any(0, keepdims=True))
  indices = np.argwhere((observed > 0) & ~support)
  found = SupportViolations(indices, observed[tuple(indices.T)])
  if indices.shape[0] and on_violation != "ignore":
    named = ", ".join(
      f"(h={h}, s={s}, a={a}, s'={t}) x{n}"
      for (h, s, a, t), n in zip(indices[:max_named].tolist(), found.counts[:max_named].tolist())
    )
    more = indices.shape[0] - min(max_named, indices.shape[0])
    message = (
      f"setting.support: {indices.shape[0]} observed transition(s) (h, s, a, s')"
      f" have s' outside the declared support: {named}"
      + (f" and {more} more" if more else "")
      + "; their boxes are points at 0 there, so the support is wrong"
    )
    _report(message, on_violation)
  return found


def _sparse_violations(counts: Counts, on_violation: str) -> SupportViolations:
  """`support_violations` in the sparse layout, which has no slot for an observed `s'`
  outside the support: only their number is kept (`Counts.off_support`)."""
  total = int(
    np.sum(np.asarray(counts.off_support if counts.off_support is not None else 0, np.int64))
  )
  if total and on_violation != "ignore":
    _report(
      f"setting.support: {total} observed transition(s) had a next state outside"
      " the declared sparse support (next_states); the sparse layout keeps no"
      " slot for them, so the support is wrong",
      on_violation,
      depth=2,
    )
  return SupportViolations(
    np.zeros((0, 4), np.int64), np.full((1 if total else 0,), total, np.int64)
  )


def _report(message: str, on_violation: str, depth: int = 1) -> None:
  """`support_violations`' finding: raised (`"raise"`) or warned at its caller's line
  (`depth`: the calls between `support_violations` and here)."""
  if on_violation == "raise":
    raise ValueError(message)
  warnings.warn(message, stacklevel=2 + depth)
