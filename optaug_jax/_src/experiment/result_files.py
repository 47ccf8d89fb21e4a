"""Result files of the experiment scripts: atomic writes, result directories, and the record
of what determined a run's numbers.

Every file a script writes goes through `write_atomic` (in `writes`, re-exported here: a
temporary file in the same directory, flushed, fsynced, renamed over the target): a reader
sees the old file or the new one, never a part, and a failed write (a full disk) keeps the
old file and leaves no temporary file. A script that writes a directory of results does so through a
`ResultDir`, which keeps DIR/manifest.json (script, settings and their digest, the files
written, and a status: "running", "incomplete" or "complete"), refuses a directory of
another script or, with --resume, of other settings, and removes a previous run's outputs
before a fresh run of other settings writes anything; a script whose output is one file
(`result_file`) keeps that file's manifest beside it. `load_results` reads a directory
back and refuses one whose run did not finish, and `read_file` refuses a damaged file in
one line. JSON is written without NaN or Infinity (`writes.finite_json`: null). `run_config`
records the arguments, the problem's real sizes, the package versions and the machine.
(Checkpoints: `checkpoints`.)

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
import warnings

import jax
import numpy as np

from optaug_jax._src.experiment.writes import (  # noqa: F401  (re-exported: one module of files)
  TEMP_SUFFIX,
  clear_interrupt,
  digest,
  interrupted,
  note_interrupt,
  raise_if_interrupted,
  recording_interrupts,
  save_figure,
  write_atomic,
  write_json,
  write_npz,
  write_report,
  write_text,
)

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


MANIFEST = "manifest.json"


CHECKPOINTS = "checkpoint_*.npz"


STATUSES = ("running", "incomplete", "complete")


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


def read_manifest(directory, name: str = MANIFEST):
  """DIR/manifest.json (or DIR/`name`) as a dict; None where there is none. Raises a
  ResultDirError for a manifest that cannot be read."""
  path = os.path.join(directory, name)
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

  A run made of runs of its own (a sweep, each cell a headline.py run in DIR/CELL) names
  them in `parts`: its manifest lists them, and a run of any script into DIR/CELL is then
  refused unless this run is writing it (in this process, inside its `running()` block):
  the sweep's table and manifest would describe a cell that is no longer there.

  A script whose one output is a file in a directory shared with other files
  (`result_file`) keeps its manifest beside it (`manifest`: PATH.manifest.json), refuses a
  run's directory (DIR/manifest.json) and removes no checkpoints. `resumable=False`: a
  script without --resume (the manifest's notes then do not suggest it).
  """

  def __init__(
    self,
    path,
    script: str,
    arguments: dict,
    outputs,
    *,
    resume: bool = False,
    writer: bool = True,
    parts=(),
    manifest: str = MANIFEST,
    resumable: bool = True,
  ):
    self.path = os.fspath(path)
    self.writer = writer
    self.script = script
    self.arguments = arguments
    self.outputs = tuple(outputs)
    self.resume = resume
    self.parts = list(parts)
    self.manifest_name = manifest
    self.resumable = resumable
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
    self._check_not_a_part()
    here = os.path.isdir(self.path)
    owner = read_manifest(self.path) if here and self.manifest_name != MANIFEST else None
    if owner is not None:
      raise ResultDirError(
        f"{self.path}: holds the outputs of a {owner.get('script')}.py run ({MANIFEST});"
        f" {self.script}.py does not write into another run's directory; choose another --out"
      )
    previous = read_manifest(self.path, self.manifest_name) if here else None
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

  def _check_not_a_part(self):
    """Refuses a directory that a run in the directory above names as one of its parts
    (a sweep's cell), unless that run is the one writing here now (`_Active`)."""
    path = os.path.abspath(self.path)
    parent = os.path.dirname(path)
    if parent == path or parent in _Active.paths:
      return
    try:
      owner = read_manifest(parent)
    except ResultDirError:  # not this run's to judge: the directory above is not its own
      return
    if owner is None or os.path.basename(path) not in (owner.get("parts") or []):
      return
    script = owner.get("script")
    raise ResultDirError(
      f"{self.path}: a part of the {script}.py run in {parent} (its {MANIFEST} lists it,"
      f" status {owner.get('status')}); a run of its own here would leave that run's"
      f" table describing the part it replaced: choose another --out, or run {script}.py"
      f" there (--resume continues it, --restart replaces it)"
    )

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
    write_json(self.file(self.manifest_name), self.manifest, default=str)

  def _start(self):
    os.makedirs(self.path, exist_ok=True)
    previous = self.previous or {}
    same = previous.get("digest") == self.digest
    listed = [n for n in previous.get("files", []) if _plain_name(n)]
    stale = []
    shared = self.manifest_name != MANIFEST  # a directory of other files: not the run's own
    if not self.resume:  # a fresh run never leaves another run's checkpoints behind
      stale += [] if shared else glob.glob(self.file(CHECKPOINTS))
      if not same:  # nor another run's outputs
        stale += [self.file(n) for n in {*listed, *self.outputs}]
        listed = []
    names = {*listed, *self.outputs, self.manifest_name, *([] if shared else [CHECKPOINTS])}
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
    if self.parts:
      self.manifest["parts"] = self.parts
    self._save_manifest()

  @contextlib.contextmanager
  def running(self):
    """The run's block: "running" inside, "incomplete" unless `complete()` was called."""
    if self.manifest is not None:
      raise RuntimeError("ResultDir.running() is entered once per run")
    if not self.writer:
      self.manifest = {"files": [], "status": "running"}
      with _Active.writing(self.path):
        yield self
      return
    self._start()
    again = "; continue with --resume" if self.resumable else "; run it again"
    try:
      with _Active.writing(self.path):
        yield self
    except BaseException as e:
      note = (
        f"failed: {type(e).__name__}: {e}"
        if not isinstance(e, KeyboardInterrupt)
        else f"interrupted (Ctrl-C){again}"
      )
      with contextlib.suppress(OSError):  # best effort: a full disk leaves "running"
        self._save_manifest(status="incomplete", note=note)
      raise
    assert self.manifest is not None  # set by _start
    if self.manifest["status"] != "complete":
      self._save_manifest(status="incomplete", note=f"stopped before its final outputs{again}")

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


class _Active:
  """The directories of the runs inside their `running()` block in this process: their
  parts (`ResultDir.parts`) are theirs to write."""

  paths: set[str] = set()

  @classmethod
  @contextlib.contextmanager
  def writing(cls, path):
    path = os.path.abspath(path)
    cls.paths.add(path)  # a run's block is entered once (`ResultDir.running`)
    try:
      yield
    finally:
      cls.paths.discard(path)


def result_file(path, script: str, arguments: dict, *, resumable: bool = False) -> ResultDir:
  """The checked `ResultDir` of a script whose one output is the file `path` (e.g. `--out
  results/cost.json`) in a directory it may share with other files: the file's manifest
  is PATH's name with `.manifest.json` for `.json` (results/cost.manifest.json). Write the
  file with `run_dir.write_json(os.path.basename(path), ...)` inside `running()`."""
  path = os.fspath(path)
  directory, name = os.path.split(path)
  if not name or os.path.isdir(path):
    raise ResultDirError(
      f"{path}: a directory; give a file name, e.g. {os.path.join(path, 'results.json')}"
    )
  manifest = f"{os.path.splitext(name)[0]}.manifest.json"
  return ResultDir(
    directory or ".", script, arguments, (name,), manifest=manifest, resumable=resumable
  ).check()


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
    out[name] = read_file(os.path.join(directory, name), name)
  return out


def read_file(path, what: str = "file"):
  """A result file's content: a .json file parsed, an .npz archive as a dict of arrays.
  Raises a ResultDirError naming the file for one that cannot be read whole (truncated,
  not JSON or not an archive, an entry that does not load); `what` names it in the
  message (e.g. "--like's config.json")."""
  path = os.fspath(path)
  try:
    if path.endswith(".json"):
      with open(path, encoding="utf-8") as f:
        return json.load(f)
    with np.load(path) as f:
      return {k: f[k] for k in f.files}
  except FileNotFoundError as e:
    raise ResultDirError(f"{path}: no such {what}") from e
  except Exception as e:  # pylint: disable=broad-except  (zip, EOF, JSON, pickle, OS)
    reason = " ".join(f"{type(e).__name__}: {e}".split())
    raise ResultDirError(
      f"{path}: unreadable {what} ({reason}); damaged or cut short: run again what wrote it"
    ) from e
