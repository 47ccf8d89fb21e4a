"""Command-line conventions of the experiment scripts: step-size flags, agent lists, number
types, `--help`, progress lines, and how a script ends (`main_guard`).

Every script takes step sizes with one flag convention (`parse_eta`: a positive float, or
`paper` for the paper's schedule) and agents by registry name (`agent_list`).

Exit statuses (`main_guard`): 0 done (or stopped by --max-chunks); 2 the command cannot run
as given (a flag or a combination of flags, --benchmark, a refused --resume: argparse's
status, one line `SCRIPT.py: error: ...`); 1 a fault of the environment (an output
directory that cannot be written, a full disk: one line naming the file and the fault);
130 interrupted (Ctrl-C: one line saying what was saved and how to continue). No
traceback for any of these; anything else is a bug and keeps its traceback. Set
OPTAUG_TRACEBACK=1 to see the traceback behind a one-line error too.
"""

from __future__ import annotations

import argparse
import contextvars
import errno
import functools
import os
import shlex
import signal
import sys
import time

import numpy as np

import optaug_jax as oj

from . import result_files


def parse_eta(text: str) -> float | None:
  """A step-size flag: `paper` (the paper's schedule: `None`) or a positive float."""
  if str(text).strip().lower() == "paper":
    return None
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(
      f"expected a positive number or 'paper', got {text!r}"
    ) from None
  if not np.isfinite(value) or value <= 0:
    raise argparse.ArgumentTypeError(f"expected a positive number or 'paper', got {text!r}")
  return value


def eta_flag(value: float | None) -> str:
  """The flag text of a parsed eta (inverse of `parse_eta`), for configs."""
  return "paper" if value is None else repr(value)


def agent_list(text: str) -> list[str]:
  """Comma-separated agents, each named once: registered names, or your own factories as
  `MODULE:FACTORY` / `path/to/file.py:FACTORY` (only their form is checked here;
  `arguments.check_args` imports and registers them: `problems.load_agent`)."""
  names = [a.strip() for a in text.split(",") if a.strip()]
  unknown = [n for n in names if n not in oj.agents.AGENTS and ":" not in n]
  if unknown or not names:
    raise argparse.ArgumentTypeError(
      f"unknown agents {unknown}; choose from {sorted(oj.agents.AGENTS)}, or give your own"
      " as path/to/file.py:FACTORY or MODULE:FACTORY"
    )
  twice = sorted({n for n in names if names.count(n) > 1})
  if twice:
    raise argparse.ArgumentTypeError(
      f"{', '.join(twice)} listed more than once; name each agent once"
    )
  return names


def benchmark_name(text: str) -> str:
  """A `--benchmark`: a registered name, or `MODULE:FUNCTION` / `path/to/file.py:FUNCTION`
  (only its form is checked here; `arguments.check_args` imports it)."""
  if text in oj.benchmarks.BENCHMARKS:
    return text
  where, colon, name = text.rpartition(":")
  if colon and where and name:
    return text
  raise argparse.ArgumentTypeError(
    f"expected one of {sorted(oj.benchmarks.BENCHMARKS)}, or MODULE:FUNCTION or"
    f" path/to/file.py:FUNCTION for your own CMDP, got {text!r}"
  )


def progress(name, done, total, started, seeds, stream=None, unit="episodes"):
  """Episodes done (or another `unit` of `seeds` seeds; `seeds=None`: no seeds), rate and
  time left: one overwritten line on a terminal, one line per report otherwise (a log
  file, a pipe)."""
  stream = sys.stdout if stream is None else stream
  elapsed = time.perf_counter() - started
  rate = done / max(elapsed, 1e-9)
  eta_s = (total - done) / max(rate, 1e-9)
  bar = "#" * int(30 * done / total)
  per = "" if seeds is None else f" x {seeds} seeds"
  line = (
    f"{name:18s} [{bar:30s}] {done}/{total} {unit}{per},"
    f" {rate:7.1f} {'ep' if unit == 'episodes' else unit}/s, ETA {eta_s:6.0f} s"
  )
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
      raise argparse.ArgumentTypeError(f"expected {words}, got {text!r}") from None
    if value < low:
      raise argparse.ArgumentTypeError(f"expected {words}, got {value}")
    return value

  return parse


positive_int = _int_at_least(1, "a positive integer")


non_negative_int = _int_at_least(0, "an integer >= 0")


SEED_MAX = 2**32 - 1  # jax.random.PRNGKey: larger seeds wrap onto smaller ones


def seed(text: str) -> int:
  """An argparse type: a PRNG seed, an integer in [0, 2^32 - 1] (each gives its own keys)."""
  value = non_negative_int(text)
  if value > SEED_MAX:
    raise argparse.ArgumentTypeError(
      f"expected an integer in [0, {SEED_MAX}], got {value}"
      " (larger seeds repeat smaller ones' keys)"
    )
  return value


def _real_in(words: str, ok):
  """An argparse type: a finite float with `ok(value)` (`words` names the range)."""

  def parse(text: str) -> float:
    try:
      value = float(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected {words}, got {text!r}") from None
    if not np.isfinite(value) or not ok(value):
      raise argparse.ArgumentTypeError(f"expected {words}, got {text!r}")
    return value

  return parse


non_negative_float = _real_in("a number >= 0", lambda x: x >= 0)


positive_float = _real_in("a number > 0", lambda x: x > 0)


open_unit_float = _real_in("a number strictly between 0 and 1", lambda x: 0 < x < 1)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
  """The scripts' `--help`: the module docstring as written, every option's default."""


# How a script ends: one line, not a traceback, for what the user or the machine can fix.


class UsageError(ValueError):
  """A run that cannot start as asked; the message names the flag(s) and what to do.
  `main_guard` prints it as `SCRIPT.py: error: MESSAGE` with exit status 2 (argparse's),
  after the parser's usage line when it came from the parser (`usage`)."""

  usage: str | None = None  # the parser's usage, for a mistake in the flags


_RAISING = contextvars.ContextVar("raising_usage_errors", default=False)


class ArgumentParser(argparse.ArgumentParser):
  """The scripts' parser: argparse's, except that within `raises_usage_errors` (a script's
  `main(argv)`) a mistake in the flags raises `UsageError` (its `usage` set) instead of
  printing and exiting; `main_guard` prints it as argparse would (usage, then one line,
  exit status 2). `parse_args` called on its own keeps argparse's exit."""

  def error(self, message):
    if _RAISING.get():
      error = UsageError(message)
      error.usage = self.format_usage()
      raise error
    super().error(message)


def raises_usage_errors(main):
  """Decorates a script's `main(argv)`: a mistake in its flags raises the one-line
  `UsageError` that the command line prints (not argparse's `SystemExit`), so that a
  caller in Python sees the same error as a user at the shell (`--help` still exits)."""

  @functools.wraps(main)
  def wrapped(*args, **kwargs):
    token = _RAISING.set(True)
    try:
      return main(*args, **kwargs)
    finally:
      _RAISING.reset(token)

  return wrapped


EXIT_FAULT = 1  # the environment: an output directory that cannot be written, a full disk
EXIT_USAGE = 2  # the command as given: flags, --benchmark, a refused --resume (argparse's)
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, what a shell reports for a killed command


class RunRecord:
  """What a running script has saved, for the line printed when it is interrupted or fails.

  `runs.setup` sets `out` (the run's directory, whose checkpoints `--resume` continues);
  `runs.run_chunks` and `runs.started_agents` record each agent's last checkpoint.
  """

  def __init__(self):
    self.start(None)

  def start(self, out):
    """A new run writing into `out` (None: nothing resumable)."""
    self.out = out
    self.saved = {}  # {agent: (episodes in its checkpoint, episodes of the run)}
    self.kept = None  # a script without checkpoints: what it has written so far

  def checkpoint(self, name: str, done: int, total: int):
    self.saved[name] = (int(done), int(total))

  def keep(self, what: str):
    """What a script without checkpoints has written so far (e.g. `rows of 2 problems in
    results/cost.json`), said instead of its checkpoints when it is interrupted."""
    self.kept = what

  def what_was_saved(self) -> str:
    if self.kept:
      return self.kept
    if self.out is None:
      return "nothing resumable was saved"
    if not self.saved:
      return f"no checkpoint written yet in {self.out}"
    agents = ", ".join(f"{n} at episode {d} of {t}" for n, (d, t) in self.saved.items())
    return f"checkpoints in {self.out}: {agents}"


RUN = RunRecord()


def _user_errors() -> tuple:
  from optaug_jax._src.experiment import checkpoints, result_files  # they import this module

  return UsageError, result_files.ResultDirError, checkpoints.CheckpointError


def _command(script: str, argv, *extra) -> str:
  """The command line that ran this script, with `extra` flags it does not already have."""
  program = sys.argv[0] if argv is None else f"experiments/{script}.py"
  args = list(sys.argv[1:] if argv is None else argv)
  args += [flag for flag in extra if flag not in args]
  return " ".join(shlex.quote(a) for a in ["python", program, *args])


_FAULT_HINTS = {
  errno.ENOSPC: "the disk is full",
  errno.EDQUOT: "the disk quota is used up",
  errno.EACCES: "not writable: choose another --out or change its permissions",
  errno.EPERM: "not writable: choose another --out or change its permissions",
  errno.EROFS: "a read-only file system: choose another --out",
  errno.ENOTDIR: "a part of the path is a file, not a directory: choose another --out",
  errno.EEXIST: "a file is in the way: choose another --out",
}


def fault_line(error: OSError) -> str:
  """One line for an OSError of the run's files: the file, the fault, what to do."""
  where = error.filename or RUN.out or "the output directory"
  if isinstance(where, str) and where.endswith(".tmp"):  # write_atomic's NAME.<random>.tmp
    where = where.rsplit(".", 2)[0]  # the file it was writing
  if error.filename2:
    where = f"{where} -> {error.filename2}"
  line = f"{where}: {error.strerror or error}"
  hint = _FAULT_HINTS.get(error.errno) if error.errno is not None else None
  if hint:
    line += f" ({hint})"
  if error.errno in (errno.ENOSPC, errno.EDQUOT):
    line += (
      f"; {RUN.what_was_saved()}: free some space, then rerun with --resume"
      if RUN.saved
      else "; free some space, then rerun"
    )
  return line


def run_guarded(script: str, main, argv=None) -> int:
  """Runs `main(argv)` and returns the exit status, printing one line to stderr for a
  usage error (2), a fault of the environment (1) or an interruption (130); see the
  module docstring. Other exceptions propagate (a bug: its traceback is the report).
  `argv=None` reads sys.argv, as a script does."""
  prefix = f"{script}.py: error:"
  debug = os.environ.get("OPTAUG_TRACEBACK", "") not in ("", "0")
  try:
    with result_files.recording_interrupts():
      main(argv)
      result_files.raise_if_interrupted()  # a Ctrl-C that Python dropped on the way
    return 0
  except SystemExit as e:  # argparse's errors and --help
    return e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_USAGE)
  except KeyboardInterrupt:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: same end
    try:
      _stop_progress_line()
      resume = (
        f"; continue with: {_command(script, argv, '--resume')}"
        if RUN.saved
        else f"; rerun: {_command(script, argv)}"
        if RUN.out
        else ""
      )
      sys.stderr.write(f"{script}.py: interrupted; {RUN.what_was_saved()}{resume}\n")
      sys.stderr.flush()
    finally:
      signal.signal(signal.SIGINT, previous)
    return EXIT_INTERRUPTED
  except OSError as e:
    if debug:
      raise
    _stop_progress_line()
    sys.stderr.write(f"{prefix} {fault_line(e)}\n")
    return EXIT_FAULT
  except _user_errors() as e:
    if debug:
      raise
    _stop_progress_line()
    usage = getattr(e, "usage", None)
    sys.stderr.write(f"{usage or ''}{prefix} {' '.join(str(e).split())}\n")
    return EXIT_USAGE


def _stop_progress_line():
  """Ends an overwritten progress line on a terminal, so that the message starts a line."""
  try:
    if sys.stdout.isatty():
      sys.stdout.write("\n")
    sys.stdout.flush()
  except (OSError, ValueError):
    pass


def main_guard(script: str, main):
  """The scripts' `if __name__ == "__main__":`: `run_guarded`, then exit with its status.

  After Ctrl-C the process leaves with `os._exit(130)` once stdout and stderr are flushed,
  skipping the interpreter's teardown. Why: the interrupt can land while XLA's threads
  still run a dispatched computation (or compile one); tearing down the interpreter and
  JAX's backend under them ended in a segmentation fault in 2 of 7 interrupted runs under
  load. Nothing is lost by skipping it: every result file and checkpoint is written
  whole by `result_files.write_atomic` (closed and fsynced before it returns), and the
  manifest was marked "incomplete" while the exception unwound. Other endings keep the
  normal exit.
  """
  status = run_guarded(script, main)
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):
      pass
  if status == EXIT_INTERRUPTED:
    os._exit(status)
  sys.exit(status)
