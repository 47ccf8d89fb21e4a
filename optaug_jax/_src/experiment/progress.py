"""Progress of a measurement in phases (the outlook's perfect-model runs and pilots)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from . import cli, result_files


def phases(
  seeds: int, stream=None, timing_seeds: int | None = None
) -> Callable[[str, int, int], None]:
  """A `progress(phase, done, total)` callback (`oj.analysis.outlook(progress=)`): a
  `cli.progress` line per report on `stream` (default stderr): the phase, its episodes
  done of `total` x `seeds`, its rate and the time it has left, timed from its first
  report (the seeds of the phases that time the run's batch, "cost of ...": `timing_seeds`;
  the fluid run's plans, "fluid run of ...", have no seeds).
  Each report first raises a recorded Ctrl-C (`result_files.raise_if_interrupted`):
  one that Python dropped in a callback stops the measurement at its next chunk."""
  stream = sys.stderr if stream is None else stream
  started: dict[str, float] = {}

  def report(phase: str, done: int, total: int) -> None:
    result_files.raise_if_interrupted()  # between chunks: a Ctrl-C Python dropped
    start = started.setdefault(phase, time.perf_counter())
    if phase.startswith("fluid run"):  # plans on expected counts, in one call: no seeds
      if not done:  # said at its start: no report comes before its end
        after = "\n" if stream.isatty() else ""  # below a terminal's overwritten line
        stream.write(f"{after}{phase}: {total} plans in one jitted call\n")
        stream.flush()
      else:
        cli.progress(phase, done, total, start, None, stream=stream, unit="plans")
      return
    if not done:
      return
    timing = timing_seeds is not None and phase.startswith("cost of ")
    cli.progress(phase, done, total, start, timing_seeds if timing else seeds, stream=stream)

  return report
