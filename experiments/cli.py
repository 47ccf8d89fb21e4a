"""Command-line conventions of the experiment scripts: step-size flags, agent lists, integer
types, `--help` and progress lines.

Every script takes step sizes with one flag convention (`parse_eta`: a positive float, or
`paper` for the paper's schedule) and agents by registry name (`agent_list`).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import optaug_jax as oj


def parse_eta(text: str) -> float | None:
  """A step-size flag: `paper` (the paper's schedule: `None`) or a positive float."""
  if str(text).strip().lower() == "paper":
    return None
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a positive number or 'paper', got {text!r}")
  if not np.isfinite(value) or value <= 0:
    raise argparse.ArgumentTypeError(f"expected a positive number or 'paper', got {text!r}")
  return value


def eta_flag(value: float | None) -> str:
  """The flag text of a parsed eta (inverse of `parse_eta`), for configs."""
  return "paper" if value is None else repr(value)


def agent_list(text: str) -> list[str]:
  """Comma-separated agent names, checked against the registry."""
  names = [a.strip() for a in text.split(",") if a.strip()]
  unknown = [n for n in names if n not in oj.agents.AGENTS]
  if unknown or not names:
    raise argparse.ArgumentTypeError(
        f"unknown agents {unknown}; choose from {sorted(oj.agents.AGENTS)}")
  return names


def progress(name, done, total, started, seeds, stream=None):
  """Episodes done, rate and time left: one overwritten line on a terminal, one line per
  report otherwise (a log file, a pipe)."""
  stream = sys.stdout if stream is None else stream
  elapsed = time.perf_counter() - started
  rate = done / max(elapsed, 1e-9)
  eta_s = (total - done) / max(rate, 1e-9)
  bar = "#" * int(30 * done / total)
  line = (f"{name:18s} [{bar:30s}] {done}/{total} episodes x {seeds} seeds,"
          f" {rate:7.1f} ep/s, ETA {eta_s:6.0f} s")
  if stream.isatty():
    stream.write(f"\r{line} ")
  else:
    stream.write(line + "\n")
  stream.flush()


def _int_at_least(low: int, words: str):
  """An argparse type: an integer >= `low` (`words` names the range in the error)."""

  def parse(text: str) -> int:
    try:
      value = int(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected {words}, got {text!r}")
    if value < low:
      raise argparse.ArgumentTypeError(f"expected {words}, got {value}")
    return value

  return parse


positive_int = _int_at_least(1, "a positive integer")


non_negative_int = _int_at_least(0, "an integer >= 0")


class HelpFormatter(argparse.RawDescriptionHelpFormatter,
                    argparse.ArgumentDefaultsHelpFormatter):
  """The scripts' `--help`: the module docstring as written, every option's default."""
