"""Result directories never mix runs and never hold half-written files.

Each test is a case of the reliability probe: a refused --resume that rewrote config.json
over another run's results, a run cut short that left the previous run's summary next to
its own config, headline.py writing into a cancellation.py directory, and a full disk that
truncated summary.json (the good one gone).
"""

import errno
import hashlib
import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from optaug_jax import experiment
from optaug_jax.experiment import result_files


def _args(out, *extra, agents="optdual"):
  return [
    "--benchmark",
    "factored",
    "--seeds",
    "2",
    "--episodes",
    "20",
    "--chunk",
    "10",
    "--agents",
    agents,
    "--out",
    str(out),
    *extra,
  ]


def _headline_args(out, *extra):
  return [*_args(out, *extra), "--trace-points", "5", "--tail", "5"]


def md5s(directory) -> dict:
  """{file name: md5} of every file in `directory` (what a refused run must not change)."""
  return {
    p.name: hashlib.md5(p.read_bytes()).hexdigest()
    for p in sorted(pathlib.Path(directory).iterdir())
  }


def temporary_files(directory) -> list:
  return sorted(p.name for p in pathlib.Path(directory).iterdir() if ".tmp" in p.name)


def manifest(directory) -> dict:
  return json.loads((pathlib.Path(directory) / "manifest.json").read_text())


@pytest.fixture(scope="module")
def cancellation():
  return experiment.cancellation


@pytest.fixture(scope="module")
def headline():
  return experiment.headline


@pytest.fixture(scope="module")
def finished(tmp_path_factory, cancellation):
  """A finished cancellation.py run (eta 100, the default); tests work on copies."""
  out = tmp_path_factory.mktemp("finished") / "run"
  cancellation.main(_args(out))
  return out


@pytest.fixture
def copy_of_finished(finished, tmp_path):
  out = tmp_path / "run"
  shutil.copytree(finished, out)
  return out


def test_write_atomic_keeps_the_old_file_on_a_full_disk(tmp_path):
  path = tmp_path / "summary.json"
  path.write_text('{"good": true}')

  def half_then_full(f):
    f.write('{"good": fal')
    raise OSError(errno.ENOSPC, "No space left on device")

  with pytest.raises(OSError, match="No space left"):
    result_files.write_atomic(path, half_then_full, text=True)
  assert json.loads(path.read_text()) == {"good": True}
  assert temporary_files(tmp_path) == []
  result_files.write_json(path, {"good": False})
  assert json.loads(path.read_text()) == {"good": False} and temporary_files(tmp_path) == []
  plain = tmp_path / "plain.json"
  plain.write_text("{}")  # the mode open() gives: the atomic write must not narrow it
  assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def test_refused_resume_leaves_the_directory_as_it_was(copy_of_finished, cancellation):
  before = md5s(copy_of_finished)
  with pytest.raises(ValueError, match=r"belongs to another run.*dual_eta"):
    cancellation.main(_args(copy_of_finished, "--resume", "--dual-eta", "0.5"))
  assert md5s(copy_of_finished) == before


def test_a_damaged_checkpoint_refuses_before_any_agent_runs(tmp_path, cancellation):
  """Every checkpoint is verified before anything is written: the first agent's checkpoint
  is not advanced and config.json is not rewritten when the second one is refused."""
  out = tmp_path / "run"
  agents = "optdual,pid_lagrangian"
  assert cancellation.main(_args(out, "--max-chunks", "1", agents=agents)) is None
  # optdual stopped at episode 10; pid_lagrangian's checkpoint is a damaged file.
  (out / "checkpoint_pid_lagrangian.npz").write_bytes(
    (out / "checkpoint_optdual.npz").read_bytes()[:100]
  )
  before = md5s(out)
  with pytest.raises(ValueError, match="unreadable"):
    cancellation.main(_args(out, "--resume", agents=agents))
  assert md5s(out) == before


@pytest.mark.slow  # 12 s; slow suite (default suite under 10 minutes)
def test_an_interrupted_run_is_marked_and_leaves_no_other_run_behind(
  copy_of_finished, cancellation
):
  """A fresh run of other settings cut short: the previous run's results are gone (not
  left next to this run's config), the directory says "incomplete", readers refuse it;
  --resume finishes it."""
  out = copy_of_finished
  assert cancellation.main(_args(out, "--dual-eta", "0.5", "--max-chunks", "1")) is None
  for name in ("summary.json", "results.npz", "regrets.png", "oscillation.png", "multipliers.png"):
    assert not (out / name).exists(), f"{name} of the previous run (its own step) left behind"
  config = json.loads((out / "config.json").read_text())
  dual_eta = config["arguments"]["dual_eta"]
  assert dual_eta in (0.5, "0.5")
  assert manifest(out)["status"] == "incomplete"
  with pytest.raises(ValueError, match="incomplete"):
    result_files.load_results(out)
  cancellation.main(_args(out, "--dual-eta", "0.5", "--resume"))
  done = result_files.load_results(out, "cancellation")
  assert done["manifest.json"]["status"] == "complete"
  assert done["config.json"]["arguments"]["dual_eta"] == dual_eta
  assert set(done["summary.json"]["agents"]) == {"optdual"}
  assert temporary_files(out) == []


@pytest.mark.parametrize("written_before_manifests", [False, True])
def test_headline_refuses_a_cancellation_directory(
  copy_of_finished, headline, written_before_manifests
):
  out = copy_of_finished
  if written_before_manifests:
    (out / "manifest.json").unlink(missing_ok=True)
  before = md5s(out)
  with pytest.raises(ValueError, match=r"cancellation\.py.*another --out"):
    headline.main(_headline_args(out))
  with pytest.raises(ValueError, match=r"cancellation\.py.*another --out"):
    headline.main(_headline_args(out, "--resume"))
  assert md5s(out) == before


@pytest.mark.slow  # 16 s; slow suite (default suite under 10 minutes)
def test_a_full_disk_keeps_the_previous_summary(tmp_path, headline, monkeypatch):
  """summary.json's write fails midway (ENOSPC): the previous run's file (same settings) is
  intact, no temporary file is left, and the directory does not claim to be complete."""
  out = tmp_path / "run"
  headline.main(_headline_args(out))
  good = (out / "summary.json").read_bytes()
  dump = json.dump

  def full_disk(obj, f, **kwargs):
    if isinstance(obj, dict) and "columns" in obj:  # the summary, not config or manifest
      f.write(json.dumps(obj, **kwargs)[:200])
      raise OSError(errno.ENOSPC, "No space left on device")
    return dump(obj, f, **kwargs)

  monkeypatch.setattr(json, "dump", full_disk)
  with pytest.raises(OSError, match="No space left"):
    headline.main(_headline_args(out))
  monkeypatch.setattr(json, "dump", dump)
  assert (out / "summary.json").read_bytes() == good
  assert temporary_files(out) == []
  assert manifest(out)["status"] == "incomplete"
  with pytest.raises(ValueError, match="incomplete"):
    result_files.load_results(out)


def test_load_results_reads_only_finished_runs(tmp_path):
  out = tmp_path / "run"
  run_dir = result_files.ResultDir(out, "script", {"x": 1}, ("summary.json", "arrays.npz")).check()
  with run_dir.running():
    run_dir.write_json("summary.json", {"value": 1})
    assert manifest(out)["status"] == "running" and manifest(out)["files"] == ["summary.json"]
    with pytest.raises(ValueError, match="running"):
      result_files.load_results(out)
    run_dir.write_npz("arrays.npz", {"a": np.arange(3)})
    run_dir.complete()
  loaded = result_files.load_results(out, "script")
  assert loaded["summary.json"] == {"value": 1}
  np.testing.assert_array_equal(loaded["arrays.npz"]["a"], np.arange(3))
  assert set(result_files.load_results(out, files=["summary.json"])) == {
    "manifest.json",
    "summary.json",
  }
  with pytest.raises(ValueError, match="not other.py"):
    result_files.load_results(out, "other")
  os.remove(out / "arrays.npz")
  with pytest.raises(ValueError, match="missing"):
    result_files.load_results(out)
  os.remove(out / "manifest.json")
  with pytest.warns(UserWarning, match="no manifest"):
    assert result_files.load_results(out)["summary.json"] == {"value": 1}
