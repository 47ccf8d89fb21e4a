"""Every experiment script (headline, cancellation, separation, outlook, episode_cost) ends
Ctrl-C with exit status 130 and one line (no traceback, no segmentation fault), and
refuses a damaged input file in one line with exit status 2; their JSON holds no bare NaN
or Infinity, and a sweep's cells are the sweep's.

The Ctrl-C runs are fresh processes (the signal and the interpreter's exit are what is
tested), each interrupted once it has printed its progress; the rest run in process.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax import experiment
from optaug_jax.experiment import checkpoints, cli, result_files

ROOT = pathlib.Path(__file__).parent.parent
EXPERIMENTS = ROOT / "experiments"


def _env():
  return {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
  }


def _script(name, *argv):
  """experiments/NAME.py in a fresh process (this checkout's package first)."""
  return subprocess.run(
    [sys.executable, str(EXPERIMENTS / f"{name}.py"), *map(str, argv)],
    capture_output=True,
    text=True,
    env=_env(),
    timeout=300,
  )


def _last_line(text):
  return text.strip().splitlines()[-1]


def _strict_json(path):
  """The file's JSON, refusing NaN, Infinity and -Infinity (what strict readers refuse)."""

  def refuse(word):
    raise ValueError(f"{path}: bare {word}")

  return json.loads(pathlib.Path(path).read_text(), parse_constant=refuse)


def _interrupt(script, argv, ready, after=0.0):
  """Runs experiments/SCRIPT.py, sends SIGINT `after` seconds after a line of its output
  holds `ready`, and returns `(status, stderr)`. A test session started in the background
  ignores SIGINT, and so would its children: the child restores Python's handler, then
  runs the script as `python script.py` would."""
  path = str(EXPERIMENTS / f"{script}.py")
  start = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
    f" sys.argv = sys.argv[1:]; runpy.run_path({path!r}, run_name='__main__')"
  )
  run = subprocess.Popen(
    [sys.executable, "-u", "-c", start, path, *map(str, argv)],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    env=_env(),
  )
  try:
    seen = []
    assert run.stdout is not None
    for line in run.stdout:
      seen.append(line)
      if ready in line:
        break
    else:
      _, err = run.communicate(timeout=60)
      pytest.fail(f"{script}.py ended before printing {ready!r}: {''.join(seen)}{err}")
    time.sleep(after)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=180)
  finally:
    if run.poll() is None:
      run.kill()
  return run.returncode, err


def _tiny(out, *extra):
  return [
    *["--benchmark", "factored", "--seeds", "2", "--episodes", "100000", "--chunk", "10"],
    *["--agents", "optdual", "--out", str(out), *extra],
  ]


SEPARATION = ["--sides", "3", "--bonus-scales", "1", "--seeds", "2", "--episodes", "100000"]
SEPARATION += ["--chunk", "10", "--tail", "5", "--agents", "optdual"]
OUTLOOK = ["--benchmark", "factored", "--episodes", "300", "--seeds", "2", "--pretrain", "10"]
OUTLOOK += ["--pilot-episodes", "1000000", "--pilot-seeds", "2", "--perfect-episodes", "20"]
EPISODE_COST = ["--problems", "media_streaming", "--seeds", "2", "--chunk", "10"]
EPISODE_COST += ["--early", "100000", "--late-after", "0", "--agents", "optdual"]

# (script, its flags in a directory, the progress to wait for, seconds after it): the
# learning runs once a chunk is done (20-30 s: slow), the others within their JAX work.
_SLOW = pytest.mark.slow
INTERRUPTED = [
  pytest.param(
    "headline",
    lambda d: _tiny(d / "run", "--trace-points", "5", "--tail", "5"),
    "x 2 seeds",
    0.0,
    marks=_SLOW,
    id="headline",
  ),
  pytest.param(
    "cancellation", lambda d: _tiny(d / "run"), "x 2 seeds", 0.0, marks=_SLOW, id="cancellation"
  ),
  pytest.param(
    "separation",
    lambda d: [*SEPARATION, "--out", d / "sweep"],
    "x 2 seeds",
    0.0,
    marks=_SLOW,
    id="separation",
  ),
  pytest.param(
    "outlook", lambda d: [*OUTLOOK, "--out", d / "outlook"], "measuring:", 2.0, id="outlook"
  ),
  pytest.param(
    "episode_cost",
    lambda d: [*EPISODE_COST, "--out", d / "cost.json"],
    "seeds vmapped",
    2.0,
    id="episode_cost",
  ),
]


@pytest.mark.parametrize("script, argv, ready, after", INTERRUPTED)
def test_ctrl_c_ends_every_script_with_130_and_one_line(tmp_path, script, argv, ready, after):
  """SIGINT once the script has printed its progress (a fresh process each): exit status
  130 (episode_cost.py died with a traceback, then a segmentation fault: -11), one line
  saying so, no traceback, and the run's manifest says "incomplete"."""
  status, err = _interrupt(script, argv(tmp_path), ready, after)
  assert status == 130, err
  assert "Traceback" not in err
  assert _last_line(err).startswith(f"{script}.py: interrupted; "), err
  manifest = {
    "episode_cost": tmp_path / "cost.manifest.json",
    "separation": tmp_path / "sweep" / "manifest.json",
    "outlook": tmp_path / "outlook" / "manifest.json",
  }.get(script, tmp_path / "run" / "manifest.json")
  saved = _strict_json(manifest)
  assert saved["status"] == "incomplete" and saved["note"].startswith("interrupted (Ctrl-C)")


def test_episode_cost_interrupted_says_what_it_kept_and_how_to_rerun(tmp_path, capsys):
  """In process (no JAX work: the run is interrupted as it starts): the line names what
  the script without checkpoints kept and the command that runs it again, and the
  manifest beside --out does not suggest a --resume it does not have."""
  out = tmp_path / "cost.json"

  def main(argv):
    run_dir = result_files.result_file(out, "episode_cost", {"problems": "queue"})
    cli.RUN.start(str(out))
    cli.RUN.keep(f"nothing written to {out} yet")
    with run_dir.running():
      raise KeyboardInterrupt

  assert cli.run_guarded("episode_cost", main, ["--out", str(out)]) == 130
  line = _last_line(capsys.readouterr().err)
  assert line == (
    f"episode_cost.py: interrupted; nothing written to {out} yet; rerun: python"
    f" experiments/episode_cost.py --out {out}"
  )
  saved = _strict_json(tmp_path / "cost.manifest.json")
  assert saved["status"] == "incomplete" and saved["note"] == "interrupted (Ctrl-C); run it again"


# Damaged input files: one line, exit status 2, nothing written.


def _truncate(path):
  """Cuts the file at `path` to its first half (a write cut short)."""
  path = pathlib.Path(path)
  data = path.read_bytes()
  path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("script", ["headline", "cancellation"])
def test_a_damaged_manifest_is_one_line(tmp_path, script, capsys):
  run_dir = result_files.ResultDir(tmp_path / "run", script, {"x": 1}, ("summary.json",)).check()
  with run_dir.running():
    run_dir.write_json("summary.json", {"done": True})
    run_dir.complete()
  _truncate(tmp_path / "run" / "manifest.json")
  module = getattr(oj.experiment, script)
  argv = _tiny(tmp_path / "run", "--episodes", "20", "--resume")
  assert cli.run_guarded(script, module.main, argv) == 2
  line = _last_line(capsys.readouterr().err)
  assert line.startswith(f"{script}.py: error: {tmp_path / 'run' / 'manifest.json'}: unreadable")


def _separation():
  """experiments/separation.py as a module (a script, not a package module)."""
  sys.path.insert(0, str(EXPERIMENTS))
  try:
    import separation
  finally:
    sys.path.remove(str(EXPERIMENTS))
  return separation


def test_separation_refuses_a_damaged_table_in_one_line(tmp_path, capsys):
  """A sweep written before manifests is known by its separation.json: a truncated one was
  a JSONDecodeError's traceback."""
  (tmp_path / "separation.json").write_text('{"arguments": {"sides": [3')
  separation = _separation()
  argv = [*SEPARATION, "--episodes", "100", "--out", str(tmp_path)]
  assert cli.run_guarded("separation", separation.main, argv) == 2
  line = _last_line(capsys.readouterr().err)
  assert line.startswith(
    f"separation.py: error: {tmp_path / 'separation.json'}: unreadable separation.json"
    " (JSONDecodeError: "
  )
  assert sorted(p.name for p in tmp_path.iterdir()) == ["separation.json"]


def _headline_config(directory):
  """A headline.py run's config.json and summary.json, as --like reads them."""
  directory.mkdir()
  arguments = {"benchmark": "factored", "agents": "optaug,optdual", "episodes": 300}
  arguments.update(seeds=2, pretrain=10, trace_points=5, chunk=100, tail=5)
  (directory / "config.json").write_text(json.dumps({"arguments": arguments}))
  (directory / "summary.json").write_text(json.dumps({"agents": {}}))


@pytest.mark.parametrize("damaged", ["config.json", "summary.json"])
def test_outlook_like_refuses_a_damaged_run_in_one_line(tmp_path, damaged, capsys):
  """`--like RUN` with RUN's config.json (or summary.json) cut short: a traceback (exit
  status 1), read after the minutes of the outlook's runs; now one line, before them."""
  run = tmp_path / "run"
  _headline_config(run)
  _truncate(run / damaged)
  argv = ["--like", str(run), "--out", str(tmp_path / "o")]
  assert cli.run_guarded("outlook", experiment.outlook.main, argv) == 2
  line = _last_line(capsys.readouterr().err)
  assert line.startswith(
    f"outlook.py: error: --like {run}: {run / damaged}: unreadable {damaged} (JSONDecodeError: "
  )
  assert not (tmp_path / "o").exists()


def test_outlook_refit_refuses_damaged_pilots_in_one_line(tmp_path, capsys):
  """`--refit DIR` from a truncated pilots.npz: a BadZipFile traceback; now one line."""
  old = tmp_path / "old"
  run_dir = result_files.ResultDir(old, "outlook", {}, ("config.json", "pilots.npz")).check()
  with run_dir.running():
    run_dir.write_json("config.json", {"arguments": {}})
    run_dir.write_npz("pilots.npz", {"optaug/violations": np.zeros((2, 300))})
    run_dir.complete()
  _truncate(old / "pilots.npz")
  argv = [*OUTLOOK, "--pilot-episodes", "250", "--refit", str(old), "--out", str(tmp_path / "o")]
  assert cli.run_guarded("outlook", experiment.outlook.main, argv) == 2
  line = _last_line(capsys.readouterr().err)
  assert line.startswith(
    f"outlook.py: error: --refit {old}: {old / 'pilots.npz'}: unreadable pilots.npz (BadZipFile: "
  )
  assert not (tmp_path / "o").exists()


def test_episode_cost_refuses_a_damaged_cached_state_before_any_work(tmp_path):
  """A truncated state in --cache was a BadZipFile traceback; now one line, exit status 2,
  before any run (and nothing written to --out)."""
  cache = tmp_path / "cache"
  cache.mkdir()
  checkpoints.save_checkpoint(cache / "queue_optdual_20.npz", {"x": 1}, 20, (), {}, 0.0)
  _truncate(cache / "queue_optdual_20.npz")
  done = _script(
    "episode_cost",
    *["--problems", "queue", "--agents", "optdual", "--seeds", "2", "--chunk", "10"],
    *["--early", "10", "--late-after", "20", "--cache", cache, "--out", tmp_path / "c.json"],
  )
  assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
  assert _last_line(done.stderr).startswith(
    f"episode_cost.py: error: {cache / 'queue_optdual_20.npz'}: unreadable checkpoint"
  )
  assert _last_line(done.stderr).endswith(
    f"delete it (the state is computed again), or give another --cache than {cache}"
  )
  assert "seeds vmapped" not in done.stdout  # refused before the work began
  assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_a_cached_state_of_another_run_is_told_from_a_damaged_one(tmp_path):
  """episode_cost.py computes another run's cached state again (`OtherRunCheckpoint`) and
  refuses a damaged one (any other `CheckpointError`)."""
  path = tmp_path / "state.npz"
  checkpoints.save_checkpoint(path, {"seeds": 2}, 20, (), {}, 0.0)
  with pytest.raises(checkpoints.OtherRunCheckpoint, match="differing settings"):
    checkpoints.load_checkpoint(path, {"seeds": 3}, (), 20, lambda a, d: None, fix="redo")
  assert checkpoints.read_checkpoint(path)[0]["identity"] == {"seeds": 2}
  _truncate(path)
  with pytest.raises(checkpoints.CheckpointError, match="unreadable checkpoint") as refused:
    checkpoints.read_checkpoint(path, fix="redo")
  assert not isinstance(refused.value, checkpoints.OtherRunCheckpoint)
  assert str(refused.value).endswith("; redo")


def test_episode_cost_refuses_a_damaged_manifest_and_a_run_directory(tmp_path, capsys):
  """--out's manifest beside it, cut short: one line; --out into a run's directory (its
  manifest.json): refused, its files left as they were."""
  (tmp_path / "cost.manifest.json").write_text('{"status": "comp')
  with pytest.raises(result_files.ResultDirError, match="cost.manifest.json: unreadable"):
    result_files.result_file(tmp_path / "cost.json", "episode_cost", {})
  run = tmp_path / "run"
  run_dir = result_files.ResultDir(run, "headline", {}, ("summary.json",)).check()
  with run_dir.running():
    run_dir.complete()
  with pytest.raises(result_files.ResultDirError, match="holds the outputs of a headline.py run"):
    result_files.result_file(run / "cost.json", "episode_cost", {})


def test_episode_cost_writes_its_file_atomically_with_a_manifest_beside_it(tmp_path):
  """`result_file`: the one output and OUT.manifest.json (script, settings, status), in a
  directory shared with other files, which it leaves alone (checkpoints included)."""
  (tmp_path / "checkpoint_other.npz").write_bytes(b"another run's")
  (tmp_path / "notes.json").write_text("{}")
  run_dir = result_files.result_file(tmp_path / "cost.json", "episode_cost", {"seeds": 2})
  with run_dir.running():
    run_dir.write_json("cost.json", {"rows": [1]})
    assert _strict_json(tmp_path / "cost.manifest.json")["status"] == "running"
    run_dir.complete()
  manifest = _strict_json(tmp_path / "cost.manifest.json")
  assert manifest["script"] == "episode_cost" and manifest["status"] == "complete"
  assert manifest["files"] == ["cost.json"] and manifest["arguments"] == {"seeds": 2}
  assert sorted(p.name for p in tmp_path.iterdir()) == [
    "checkpoint_other.npz",
    "cost.json",
    "cost.manifest.json",
    "notes.json",
  ]


# JSON without bare NaN or Infinity.


def test_json_outputs_hold_null_for_numbers_that_are_not_finite(tmp_path):
  obj = {"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": (-np.inf, np.float64("nan"))}}
  result_files.write_json(tmp_path / "x.json", obj)
  assert _strict_json(tmp_path / "x.json") == {
    "a": None,
    "b": [1.0, None],
    "c": {"d": [None, None]},
  }
  assert obj["a"] != obj["a"]  # the caller's object is left as it was


# A sweep's cells are the sweep's.


def test_a_run_into_a_sweeps_cell_is_refused_in_one_line(tmp_path, capsys):
  """`headline.py --out SWEEP/g3_b1` was accepted while the sweep's manifest and table
  still described the cell it replaced; the sweep itself still writes its cells."""
  separation = _separation()
  sweep = tmp_path / "sweep"
  args = separation.parse_args([*SEPARATION, "--episodes", "100", "--out", str(sweep)])
  run_dir = separation.sweep_dir(args)
  cell = sweep / "g3_b1"
  with run_dir.running():  # the sweep writing its cell: allowed
    result_files.ResultDir(cell, "headline", {}, ("summary.json",)).check()
  assert _strict_json(sweep / "manifest.json")["parts"] == ["g3_b1"]
  argv = _tiny(cell, "--episodes", "20", "--trace-points", "5", "--tail", "5")
  assert cli.run_guarded("headline", experiment.headline.main, argv) == 2
  line = _last_line(capsys.readouterr().err)
  assert line.startswith(
    f"headline.py: error: {cell}: a part of the separation.py run in {sweep} (its"
    " manifest.json lists it, status incomplete);"
  )
  assert not cell.exists()
