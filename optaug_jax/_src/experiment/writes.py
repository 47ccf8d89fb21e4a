"""How the experiment scripts write their files: whole or not at all (`write_atomic`, and
the writers over it), JSON without NaN or Infinity (`finite_json`), the digest of arrays,
and the record of a Ctrl-C (`recording_interrupts`, the guarded run's SIGINT handler), kept
for one that Python dropped (so that a run never completes after one).
`result_files` re-exports those the scripts use: it is their one module of files."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import signal
import sys
import tempfile
import threading

import numpy as np


def digest(arrays: dict) -> str:
  """SHA-256 of the arrays (names, dtypes, shapes and bytes), in sorted order."""
  h = hashlib.sha256()
  for key in sorted(arrays):
    x = np.ascontiguousarray(arrays[key])
    h.update(f"{key}|{x.dtype.str}|{x.shape}|".encode())
    h.update(x.tobytes())
  return h.hexdigest()


TEMP_SUFFIX = ".tmp"  # write_atomic's temporary files: NAME.<random>.tmp, next to NAME


class _Interrupt:
  """Whether Ctrl-C was pressed during this script's run (set by the SIGINT handler of
  `cli.run_guarded`). The handler also raises `KeyboardInterrupt`, but Python drops an
  exception raised inside a garbage-collection callback ("Exception ignored in
  `_xla_gc_callback`"): the run then went on and ended with status 0. The flag survives:
  `raise_if_interrupted` (between chunks, and in `ResultDir.complete`) raises again."""

  pending = False


def note_interrupt() -> None:
  """Records a Ctrl-C (the SIGINT handler's first step)."""
  _Interrupt.pending = True


def clear_interrupt() -> None:
  _Interrupt.pending = False


def interrupted() -> bool:
  return _Interrupt.pending


def raise_if_interrupted() -> None:
  """`KeyboardInterrupt` if a Ctrl-C was recorded (one that Python may have dropped)."""
  if _Interrupt.pending:
    raise KeyboardInterrupt


def _on_sigint(signum, frame):
  note_interrupt()
  raise KeyboardInterrupt


@contextlib.contextmanager
def recording_interrupts():
  """Within the block, Ctrl-C is recorded (`note_interrupt`) as well as
  raised, so that one dropped inside a callback is raised again (between chunks, at the
  end). Only in the main thread (where signal handlers live); the record is cleared after."""
  clear_interrupt()
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  previous = signal.signal(signal.SIGINT, _on_sigint)
  unraisable = sys.unraisablehook
  sys.unraisablehook = functools.partial(_quiet_dropped_interrupt, unraisable)
  try:
    yield
  finally:
    sys.unraisablehook = unraisable
    signal.signal(signal.SIGINT, previous)
    clear_interrupt()


def _quiet_dropped_interrupt(hook, unraisable) -> None:
  """`sys.unraisablehook` within a guarded run: a recorded Ctrl-C that Python drops (raised
  inside a finaliser such as XLA's `_xla_gc_callback`) is not printed ("Exception ignored
  in ... Traceback ... KeyboardInterrupt" on stderr, CI run of 2026-11-28); the record
  raises it again at the next check. Everything else goes to `hook`."""
  if isinstance(unraisable.exc_value, KeyboardInterrupt) and interrupted():
    return
  hook(unraisable)


def _umask() -> int:
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


_FILE_MODE = 0o666 & ~_umask()  # what open(path, "w") would give (mkstemp gives 0o600)


def _fsync_directory(directory):
  """Makes a rename durable where directories can be opened (POSIX); otherwise nothing."""
  try:
    fd = os.open(directory, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


def write_atomic(path, write, *, text=False):
  """The one way the experiments write a file: whole or not at all.

  `write(f)` fills a temporary file in `path`'s directory (NAME.<random>.tmp: the same file
  system, so the rename is atomic), which is flushed, fsynced and renamed over `path`
  (`os.replace`). A reader sees the old file or the new one, never a part. On any error (a
  full disk, an exception in `write`, an interruption) the temporary file is removed, a
  previous `path` is left as it was, and the error is raised.
  """
  path = os.fspath(path)
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=TEMP_SUFFIX)
  try:
    with os.fdopen(fd, "w", encoding="utf-8") if text else os.fdopen(fd, "wb") as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, _FILE_MODE)
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise
  _fsync_directory(directory)


def finite_json(obj):
  """`obj` with every float that is not finite (NaN, inf) replaced by None (JSON's null),
  through dicts, lists and tuples (tuples become lists). JSON has no NaN or Infinity:
  Python's `json` writes them as bare words that strict readers (JavaScript's JSON.parse,
  jq, other languages) refuse."""
  if isinstance(obj, float):
    return obj if math.isfinite(obj) else None
  if isinstance(obj, dict):
    return {k: finite_json(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [finite_json(v) for v in obj]
  return obj


def write_json(path, obj, **kwargs):
  """`obj` as JSON (indent 2 unless told), atomically; a float that is not finite is
  written as null (`finite_json`), and `allow_nan=False` makes sure none is left."""
  kwargs.setdefault("indent", 2)
  kwargs["allow_nan"] = False
  obj = finite_json(obj)
  write_atomic(path, lambda f: json.dump(obj, f, **kwargs), text=True)


def write_report(path, results):
  """A benchmark's results as one JSON file (its directory made), written whole or not at
  all; prints where."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  write_json(path, results, default=str)
  print(f"wrote {path}")


def write_text(path, text: str):
  """A text file (a table, a log), atomically."""
  write_atomic(path, lambda f: f.write(text), text=True)


def write_npz(path, arrays: dict, *, compressed=True):
  """`arrays` as an .npz archive (compressed unless told), atomically."""
  save = np.savez_compressed if compressed else np.savez
  write_atomic(path, lambda f: save(f, **arrays))


def save_figure(fig, path, **kwargs):
  """A matplotlib figure in the format of `path`'s extension (png, pdf, svg), atomically."""
  fmt = os.path.splitext(os.fspath(path))[1].lstrip(".").lower() or None
  write_atomic(path, lambda f: fig.savefig(f, format=fmt, **kwargs))
