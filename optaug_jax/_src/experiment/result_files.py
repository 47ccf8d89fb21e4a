"""Result files of the experiment scripts: atomic writes, result directories, and the record
of what determined a run's numbers.

Every file a script writes goes through `write_atomic` (a temporary file in the same
directory, flushed, fsynced, then renamed over the target): a reader sees the old file or
the new one, never a part, and a failed write (a full disk) keeps the old file and leaves
no temporary file. A script that writes a directory of results does so through a
`ResultDir`, which keeps DIR/manifest.json (script, settings and their digest, the files
written, and a status: "running", "incomplete" or "complete"), refuses a directory of
another script or, with --resume, of other settings, and removes a previous run's outputs
before a fresh run of other settings writes anything. `load_results` reads a directory
back and refuses one whose run did not finish. `run_config` records the arguments, the
problem's real sizes, the package versions and the machine. (Checkpoints: `checkpoints`.)

Why one file: the manifest's format is written by `ResultDir` and read by `read_manifest`
and `load_results`, and both sides go through the same atomic writers; apart, a change of
the format would have to be made in two modules at once.
"""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import glob
import hashlib
import importlib.metadata
import json
import os
import platform
import tempfile
import warnings

import jax
import numpy as np

PACKAGES = ("jax", "jaxlib", "optax", "chex", "numpy", "scipy", "optaug-jax")


def versions() -> dict:
  """Installed versions of the packages that determine the numbers."""
  out: dict[str, str | None] = {}
  for p in PACKAGES:
    try:
      out[p] = importlib.metadata.version(p)
    except importlib.metadata.PackageNotFoundError:
      out[p] = None
  return out


def problem_record(benchmark, lp) -> dict:
  """The problem's real sizes, optimum and thresholds."""
  cmdp = benchmark.cmdp
  return {
    "states": cmdp.num_states,
    "actions": cmdp.num_actions,
    "horizon": cmdp.horizon,
    "constraints": cmdp.num_constraints,
    "lp_value": float(lp.value),
    "lp_multipliers": np.asarray(lp.multipliers).tolist(),
    "thresholds": np.asarray(cmdp.thresholds).tolist(),
    "safe_policy_slack": float(benchmark.slack),
    "dtype": str(cmdp.cost.dtype),
  }


def run_config(arguments: dict, benchmark, lp) -> dict:
  """What a saved result carries: arguments, problem, versions and machine."""
  return {
    "arguments": arguments,
    "problem": problem_record(benchmark, lp),
    "versions": versions(),
    "device": str(jax.devices()[0]),
    "machine": {"platform": platform.platform(), "processor": platform.processor()},
  }


def digest(arrays: dict) -> str:
  """SHA-256 of the arrays (names, dtypes, shapes and bytes), in sorted order."""
  h = hashlib.sha256()
  for key in sorted(arrays):
    x = np.ascontiguousarray(arrays[key])
    h.update(f"{key}|{x.dtype.str}|{x.shape}|".encode())
    h.update(x.tobytes())
  return h.hexdigest()


TEMP_SUFFIX = ".tmp"  # write_atomic's temporary files: NAME.<random>.tmp, next to NAME


MANIFEST = "manifest.json"


CHECKPOINTS = "checkpoint_*.npz"


STATUSES = ("running", "incomplete", "complete")


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


def write_json(path, obj, **kwargs):
  """`obj` as JSON (indent 2 unless told), atomically."""
  kwargs.setdefault("indent", 2)
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


class ResultDirError(ValueError):
  """A results directory that this run may not use, or that does not hold one finished run
  (the message says why and what to do)."""


def _now() -> str:
  return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _plain_name(name) -> bool:
  """A file name inside the directory (a hand-edited manifest cannot point elsewhere)."""
  return isinstance(name, str) and name not in ("", ".", "..") and os.path.basename(name) == name


def settings_digest(script: str, arguments: dict, package_versions: dict) -> str:
  """SHA-256 of what determines a run's numbers: the script, its arguments, the versions."""
  text = json.dumps(
    {"script": script, "arguments": arguments, "versions": package_versions},
    sort_keys=True,
    default=str,
  )
  return hashlib.sha256(text.encode()).hexdigest()


def read_manifest(directory):
  """DIR/manifest.json as a dict; None where there is none. Raises a ResultDirError for a
  manifest that cannot be read."""
  path = os.path.join(directory, MANIFEST)
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      manifest = json.load(f)
    if not isinstance(manifest, dict) or manifest.get("status") not in STATUSES:
      raise ValueError("not a manifest of these scripts")
  except (OSError, ValueError) as e:
    raise ResultDirError(
      f"{path}: unreadable manifest ({type(e).__name__}: {e}); delete the"
      " directory or choose another --out"
    ) from e
  return manifest


class ResultDir:
  """The output directory of one run of `script` with `arguments`, kept free of other runs.

  `arguments` is what determines the numbers (not the output path, not --resume);
  `outputs` names the files the script writes there. In a run of several processes only
  process 0 is the `writer`; the others check the directory like it and write nothing.
  DIR/manifest.json records the
  script, the arguments, the package versions, their digest, the files written and a
  status: "running" while the run goes on (or its process died), "incomplete" when it
  stopped early (--max-chunks) or failed, "complete" once every output is written.

  The life of a run:
  1. `check()`, before anything is written: refuses (ResultDirError) a directory that holds
     another script's outputs (its manifest, or for a directory written before manifests
     its config.json or result files that this script does not write), and with `resume` a
     directory of other settings (naming them).
  2. The caller verifies all its checkpoints (still nothing written: a refused --resume
     leaves the directory exactly as it was).
  3. `with run_dir.running():` creates the directory and marks it "running". A fresh run
     first removes the checkpoints and, unless the previous run had the same settings, the
     previous run's outputs (those its manifest lists, and this script's own names). The
     `write_*` methods and `save_figure` list each output in the manifest, then write it
     atomically; `complete()` marks the run "complete". Leaving the block before
     `complete()` (an error, --max-chunks) marks it "incomplete".
  """

  def __init__(
    self, path, script: str, arguments: dict, outputs, *, resume: bool = False, writer: bool = True
  ):
    self.path = os.fspath(path)
    self.writer = writer
    self.script = script
    self.arguments = arguments
    self.outputs = tuple(outputs)
    self.resume = resume
    self.versions = versions()
    self.digest = settings_digest(script, arguments, self.versions)
    self.previous: dict | None = None
    self.manifest: dict | None = None  # set when the run's block is entered

  def file(self, name: str) -> str:
    return os.path.join(self.path, name)

  def check(self) -> ResultDir:
    """Refuses a directory this run may not use; reads only. Returns self."""
    if os.path.exists(self.path) and not os.path.isdir(self.path):
      raise ResultDirError(f"{self.path}: not a directory; choose another --out")
    fix = f"choose another --out, or delete {self.path}"
    previous = read_manifest(self.path) if os.path.isdir(self.path) else None
    if previous is None:
      self._check_unlisted(fix)
    elif previous.get("script") != self.script:
      raise ResultDirError(
        f"{self.path}: holds the outputs of {previous.get('script')}.py (status"
        f" {previous.get('status')}); {self.script}.py does not write into another"
        f" script's directory; {fix}"
      )
    elif self.resume and previous.get("digest") != self.digest:
      saved = {**(previous.get("arguments") or {}), "versions": previous.get("versions")}
      now = {**self.arguments, "versions": self.versions}
      diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
      details = {k: (saved.get(k), now.get(k)) for k in diff}
      raise ResultDirError(
        f"{self.path}: belongs to another run; differing settings (saved, now):"
        f" {details}; --resume continues only the"
        " same settings: run without --resume to start afresh (this removes the"
        f" directory's previous outputs), or {fix}"
      )
    self.previous = previous
    return self

  def _check_unlisted(self, fix):
    """A directory without a manifest (written before manifests, or by hand): refused when
    its config.json names another script, or when next to a config.json it holds result
    files this script does not write (another run's: they would be left mixed in)."""
    config = self.file("config.json")
    if not os.path.exists(config):
      return
    try:
      with open(config, encoding="utf-8") as f:
        script = json.load(f).get("script")
    except (OSError, ValueError, AttributeError):
      script = None
    foreign = sorted(
      n
      for n in os.listdir(self.path)
      if n.endswith((".json", ".npz", ".png", ".pdf", ".csv"))
      and n not in self.outputs
      and not fnmatch.fnmatch(n, CHECKPOINTS)
    )
    if script not in (None, self.script) or foreign:
      owner = f"{script}.py's config.json" if script else "a config.json"
      others = f", and {', '.join(foreign)}" if foreign else ""
      raise ResultDirError(
        f"{self.path}: holds another run's files and no {MANIFEST} ({owner}{others});"
        f" {self.script}.py does not mix its files with them; {fix}"
      )

  def _save_manifest(self, **changes):
    assert self.manifest is not None  # inside the run's block
    self.manifest.update(changes, updated=_now())
    write_json(self.file(MANIFEST), self.manifest, default=str)

  def _start(self):
    os.makedirs(self.path, exist_ok=True)
    previous = self.previous or {}
    same = previous.get("digest") == self.digest
    listed = [n for n in previous.get("files", []) if _plain_name(n)]
    stale = []
    if not self.resume:  # a fresh run never leaves another run's checkpoints behind
      stale += glob.glob(self.file(CHECKPOINTS))
      if not same:  # nor another run's outputs
        stale += [self.file(n) for n in {*listed, *self.outputs}]
        listed = []
    names = {*listed, *self.outputs, MANIFEST, CHECKPOINTS}
    stale += [t for n in names for t in glob.glob(self.file(f"{n}.*{TEMP_SUFFIX}"))]
    for path in stale:
      with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    self.manifest = {
      "format": 1,
      "script": self.script,
      "status": "running",
      "digest": self.digest,
      "arguments": self.arguments,
      "versions": self.versions,
      "files": listed,
      "started": _now(),
    }
    self._save_manifest()

  @contextlib.contextmanager
  def running(self):
    """The run's block: "running" inside, "incomplete" unless `complete()` was called."""
    if self.manifest is not None:
      raise RuntimeError("ResultDir.running() is entered once per run")
    if not self.writer:
      self.manifest = {"files": [], "status": "running"}
      yield self
      return
    self._start()
    try:
      yield self
    except BaseException as e:
      note = (
        f"failed: {type(e).__name__}: {e}"
        if not isinstance(e, KeyboardInterrupt)
        else "interrupted (Ctrl-C); continue with --resume"
      )
      with contextlib.suppress(OSError):  # best effort: a full disk leaves "running"
        self._save_manifest(status="incomplete", note=note)
      raise
    assert self.manifest is not None  # set by _start
    if self.manifest["status"] != "complete":
      self._save_manifest(
        status="incomplete", note="stopped before its final outputs; continue with --resume"
      )

  def _writing(self, name: str) -> str | None:
    if self.manifest is None:
      raise RuntimeError("ResultDir: write inside `with run_dir.running():`")
    if not self.writer:
      return None
    if name not in self.manifest["files"]:
      self._save_manifest(files=[*self.manifest["files"], name])
    return self.file(name)

  def write_json(self, name, obj, **kwargs):
    if path := self._writing(name):
      write_json(path, obj, **kwargs)

  def write_text(self, name, text):
    if path := self._writing(name):
      write_text(path, text)

  def write_npz(self, name, arrays, *, compressed=True):
    if path := self._writing(name):
      write_npz(path, arrays, compressed=compressed)

  def save_figure(self, fig, name, **kwargs):
    if path := self._writing(name):
      save_figure(fig, path, **kwargs)

  def complete(self):
    """Marks the run finished: every output written. After a Ctrl-C (even one Python
    dropped) it raises `KeyboardInterrupt` instead: the run ends "incomplete"."""
    raise_if_interrupted()
    if not self.writer:
      return
    if self.manifest is None:
      raise RuntimeError("ResultDir: complete() inside `with run_dir.running():`")
    self.manifest.pop("note", None)
    self._save_manifest(status="complete", finished=_now())


def result_dir(args, script: str, outputs) -> ResultDir:
  """The checked `ResultDir` of a script without checkpoints: `args.out`, with every other
  argument as the run's settings. Call it before the work, write inside `running()`."""
  arguments = {k: v for k, v in vars(args).items() if k != "out"}
  return ResultDir(args.out, script, arguments, outputs).check()


def load_results(directory, script=None, *, files=None, allow_incomplete=False) -> dict:
  """The outputs of one finished run: `{file name: content}` for its JSON files (parsed)
  and .npz archives (dicts of arrays), or only those named in `files`, with
  "manifest.json" (None where there is none).

  Refuses with a ResultDirError a directory whose run did not finish (status "running":
  being written, or its process died; "incomplete": stopped early or failed) unless
  `allow_incomplete` (then it warns and reads what is there), one written by another
  script than `script` (when given), and a finished run with a listed file missing. A
  directory without a manifest (written before manifests) is read with a warning: nothing
  says whether its files come from one finished run.
  """
  directory = os.fspath(directory)
  manifest = read_manifest(directory)
  if manifest is None:
    if not os.path.isdir(directory):
      raise ResultDirError(f"{directory}: no such directory")
    warnings.warn(
      f"{directory}: no {MANIFEST} (written before manifests, or by hand): its"
      " files may not come from one finished run",
      stacklevel=2,
    )
    names = sorted(
      n
      for n in os.listdir(directory)
      if n.endswith((".json", ".npz"))
      and not n.endswith(TEMP_SUFFIX)
      and not fnmatch.fnmatch(n, CHECKPOINTS)
    )
  else:
    if script is not None and manifest.get("script") != script:
      raise ResultDirError(
        f"{directory}: holds the outputs of {manifest.get('script')}.py, not {script}.py"
      )
    names = [n for n in manifest.get("files", []) if _plain_name(n)]
    missing = [n for n in names if not os.path.exists(os.path.join(directory, n))]
    if manifest["status"] != "complete":
      note = manifest.get("note", "its process is running, or died")
      problem = (
        f"{directory}: the run of {manifest.get('script')}.py is"
        f" {manifest['status']} ({note}): its files are not one finished run's"
      )
      if not allow_incomplete:
        raise ResultDirError(problem + "; finish it (--resume) or pass allow_incomplete=True")
      warnings.warn(problem, stacklevel=2)
      names = [n for n in names if n not in missing]
    elif missing:
      raise ResultDirError(f"{directory}: files listed in {MANIFEST} are missing: {missing}")
    names = [n for n in names if n.endswith((".json", ".npz"))]
  if files is not None:
    unknown = sorted(set(files) - set(names))
    if unknown:
      raise ResultDirError(f"{directory}: no {unknown} among the run's files {names}")
    names = [n for n in names if n in files]
  out = {MANIFEST: manifest}
  for name in names:
    path = os.path.join(directory, name)
    if name.endswith(".json"):
      with open(path, encoding="utf-8") as f:
        out[name] = json.load(f)
    else:
      with np.load(path) as f:
        out[name] = {k: f[k] for k in f.files}
  return out
