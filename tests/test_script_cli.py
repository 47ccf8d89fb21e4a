"""The experiment scripts' command line: flags checked together before any work, one line (no
traceback) for a user's mistake or a fault of the machine, Ctrl-C, your own CMDP as
`--benchmark MODULE:FUNCTION`, and what the figures promise.

Subprocess runs import this checkout's package (PYTHONPATH), in float32 as a user's would;
in-process runs share the test session's float64.
"""

import errno
import hashlib
import io
import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax import experiment
from optaug_jax._src.experiment import progress
from optaug_jax.experiment import cli, figures, problems, result_files, runs

ROOT = pathlib.Path(__file__).parent.parent
EXPERIMENTS = ROOT / "experiments"


@pytest.fixture(scope="module")
def scripts():
  return {
    "cli": cli,
    "runs": runs,
    "headline": experiment.headline,
    "cancellation": experiment.cancellation,
  }


def _tiny(out, *extra, agents="optdual"):
  # --pretrain only where an agent takes it: a flag no listed agent takes is refused.
  pretrain = ["--pretrain", "5"] if "optaug" in agents.split(",") else []
  return [
    "--benchmark",
    "factored",
    "--seeds",
    "2",
    "--episodes",
    "20",
    "--chunk",
    "10",
    *pretrain,
    "--agents",
    agents,
    "--out",
    str(out),
    *extra,
  ]


def _script(name, *argv, **kwargs):
  """Runs experiments/NAME.py in a fresh process with this checkout's package first."""
  env = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
  }
  return subprocess.run(
    [sys.executable, str(EXPERIMENTS / f"{name}.py"), *map(str, argv)],
    capture_output=True,
    text=True,
    env=env,
    timeout=300,
    **kwargs,
  )


def _last_line(text):
  return text.strip().splitlines()[-1]


def md5s(directory) -> dict:
  return {
    p.name: hashlib.md5(p.read_bytes()).hexdigest()
    for p in sorted(pathlib.Path(directory).iterdir())
  }


# 1. Every flag checked against the others before any work.

REFUSED = [
  (
    "headline",
    ["--episodes", "100"],
    "--pretrain 300 (its default) must be at most --episodes 100",
  ),
  (
    "cancellation",
    ["--episodes", "100", "--pretrain", "200"],
    "--pretrain 200 must be at most --episodes 100",
  ),
  (
    "cancellation",
    ["--benchmark", "factored", "--states", "5"],
    "--states: it describes --benchmark random_family only, and this run's is --benchmark factored",
  ),
  (
    "headline",
    ["--actions", "3", "--problem-seed", "2"],
    "--actions --problem-seed: these flags describe --benchmark random_family only",
  ),
  ("headline", ["--grid-size", "4"], "--grid-size 4: it describes --benchmark gridworld only"),
  (
    "cancellation",
    ["--benchmark", "gridworld", "--grid-size", "2"],
    "--grid-size 2: the gridworld needs a side of at least 3",
  ),
  (
    "cancellation",
    ["--benchmark", "random_family", "--actions", "1"],
    "--actions 1: --benchmark random_family needs at least 2 actions",
  ),
  (
    "headline",
    ["--tail", "500", "--episodes", "400", "--pretrain", "10"],
    "--tail 500 must be at most --episodes 400",
  ),
  (
    "headline",
    ["--trace-points", "50", "--episodes", "40", "--pretrain", "4"],
    "--trace-points 50 must be at most --episodes 40",
  ),
  (
    "cancellation",
    ["--delta", "0"],
    "argument --delta: expected a number strictly between 0 and 1, got '0'",
  ),
  (
    "cancellation",
    ["--delta", "1.5"],
    "argument --delta: expected a number strictly between 0 and 1",
  ),
  ("cancellation", ["--delta", "1e-40"], "--delta 1e-40: below float32's smallest normal number"),
  (
    "cancellation",
    [
      "--benchmark",
      "gridworld",
      "--grid-size",
      "12",
      "--setting",
      "bura2022",
      "--agents",
      "optaug,optcmdp",
    ],
    "--agents optcmdp with --setting bura2022 and --grid-size 12: the gridworld above size"
    " 10 has the sparse layout",
  ),
  ("headline", ["--bonus-scale", "-1"], "argument --bonus-scale: expected a number >= 0"),
  ("headline", ["--bonus-scale", "nan"], "argument --bonus-scale: expected a number >= 0"),
  ("cancellation", ["--nu", "1"], "argument --nu: expected a number strictly between 0 and 1"),
  ("cancellation", ["--seed", "-1"], "argument --seed: expected an integer >= 0"),
  (
    "cancellation",
    ["--problem-seed", str(2**32)],
    "argument --problem-seed: expected an integer in [0, 4294967295]",
  ),
  (
    "headline",
    ["--agents", "optaug,optdual,optaug"],
    "argument --agents: optaug listed more than once",
  ),
  ("cancellation", ["--episodes", str(2**31)], "--episodes 2147483648: at most 2147483647"),
  ("cancellation", ["--eta", "paper"], "--eta paper: the paper's schedule"),
  ("cancellation", ["--benchmark", "nosuch"], "argument --benchmark: expected one of"),
  (
    "headline",
    ["--benchmark", "no_such_module_xyz:make"],
    "--benchmark no_such_module_xyz:make: no module named no_such_module_xyz",
  ),
  (
    "headline",
    ["--benchmark", "json:no_such_function"],
    "--benchmark json:no_such_function: json has no no_such_function",
  ),
  (
    "cancellation",
    ["--benchmark", "missing/file.py:make"],
    "--benchmark missing/file.py:make: no file missing/file.py",
  ),
  (
    "headline",
    ["--coordinator", "127.0.0.1:1234", "--num-processes", "2"],
    "--coordinator, --num-processes given without --process-id: give all three",
  ),
  (
    "cancellation",
    ["--coordinator", "h:1", "--num-processes", "2", "--process-id", "2"],
    "--process-id 2 must be below --num-processes 2",
  ),
  ("headline", ["--coordinator", "localhost"], "argument --coordinator: expected HOST:PORT"),
  ("cancellation", ["--batch-size", "0"], "argument --batch-size: expected a positive integer"),
]


@pytest.mark.parametrize("script, argv, message", REFUSED, ids=[" ".join(a) for _, a, _ in REFUSED])
def test_flag_mistakes_are_refused_in_one_line_before_any_work(
  scripts, capsys, script, argv, message
):
  with pytest.raises(SystemExit) as info:
    scripts[script].parse_args(argv)
  assert info.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith("usage: ") and "Traceback" not in err
  assert _last_line(err).startswith(f"{script}.py: error: ")
  assert message in _last_line(err)


@pytest.mark.parametrize(
  "argv",
  [
    ["--agents", "optdual", "--episodes", "100"],  # --pretrain is OptAug's only
    ["--episodes", "100", "--pretrain", "100"],  # a run of baseline episodes only
    ["--benchmark", "random_family", "--states", "3", "--actions", "2"],
    ["--benchmark", "gridworld", "--grid-size", "3"],
    ["--bonus-scale", "0"],  # no optimism: an ablation the library supports
    ["--chunk", "100000"],  # one chunk
  ],
)
def test_flags_that_work_together_are_accepted(scripts, argv):
  for script in ("cancellation", "headline"):
    scripts[script].parse_args(argv)


def test_headline_keeps_its_default_tail_within_short_runs(scripts):
  args = scripts["headline"].parse_args(["--episodes", "100", "--pretrain", "10"])
  assert args.tail == 300  # start_agent keeps min(--tail, --episodes)


def test_the_first_mistake_of_the_issue_is_one_line_in_a_fresh_process(tmp_path):
  """`headline.py --episodes 100` ended in the library's traceback naming
  pretrain_episodes; now argparse's usage and one line naming both flags."""
  done = _script("headline", "--episodes", "100", "--out", tmp_path / "out")
  assert done.returncode == 2 and "Traceback" not in done.stderr
  assert done.stderr.startswith("usage: headline.py")
  assert _last_line(done.stderr) == (
    "headline.py: error: --pretrain 300 (its default) must be at most --episodes 100:"
    " OptAug plays its safe baseline for the first --pretrain episodes of its run; give"
    " --pretrain 10 (a tenth of the run) or fewer, or more --episodes"
  )
  assert not (tmp_path / "out").exists()


def test_what_the_library_refuses_in_setup_names_the_flag(scripts, tmp_path, capsys):
  """The last net: a ValueError of the library on the run's options is one line naming the
  flag. Here an LP agent's dense LPs cannot take the known (sparse) support of your own
  sparse CMDP in Bura et al.'s setting: only the agent's factory knows."""
  path = tmp_path / "sparse.py"
  path.write_text(
    "import optaug_jax as oj\n\n\ndef grid():\n"
    "  return oj.benchmarks.gridworld(3, horizon=5, sparse=True)\n"
  )
  status = scripts["cli"].run_guarded(
    "cancellation",
    scripts["cancellation"].main,
    _tiny(tmp_path / "out", "--setting", "bura2022", agents="optcmdp")
    + ["--benchmark", f"{path}:grid"],
  )
  err = capsys.readouterr().err
  assert status == 2 and "Traceback" not in err
  assert _last_line(err).startswith(
    "cancellation.py: error: --agents optcmdp: the library refuses --setting"
    " (setting.support: optcmdp solves LPs over H*S*A*S' variables and has no sparse"
    " layout;"
  )
  assert not (tmp_path / "out").exists()


# 2. No traceback for a user's mistake or a fault of the machine.


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, scripts):
  """A cancellation.py run stopped after its first chunk (checkpoint at episode 10)."""
  out = tmp_path_factory.mktemp("stopped") / "run"
  assert scripts["cancellation"].main(_tiny(out, "--max-chunks", "1")) is None
  return out


def test_a_refused_resume_is_one_line_and_leaves_the_directory(stopped_run):
  before = md5s(stopped_run)
  done = _script("cancellation", *_tiny(stopped_run, "--resume", "--dual-eta", "5"))
  assert done.returncode == 2 and "Traceback" not in done.stderr
  line = _last_line(done.stderr)
  assert line.startswith(
    f"cancellation.py: error: {stopped_run}: belongs to another run;"
    " differing settings (saved, now): {"
  )
  # (float32 here, float64 in the test session: the problem's digest differs too)
  assert "'dual_eta': ('paper', '5.0')" in line
  assert line.endswith(
    "run without --resume to start afresh (this removes the directory's"
    f" previous outputs), or choose another --out, or delete {stopped_run}"
  )
  assert md5s(stopped_run) == before


def test_a_damaged_checkpoint_is_one_line(stopped_run, tmp_path, scripts, capsys):
  out = tmp_path / "run"
  out.mkdir()
  for f in stopped_run.iterdir():
    (out / f.name).write_bytes(f.read_bytes())
  (out / "checkpoint_optdual.npz").write_bytes(b"not an archive")
  status = scripts["cli"].run_guarded(
    "cancellation", scripts["cancellation"].main, _tiny(out, "--resume")
  )
  line = _last_line(capsys.readouterr().err)
  assert status == 2
  assert line.startswith(
    f"cancellation.py: error: {out / 'checkpoint_optdual.npz'}: unreadable checkpoint ("
  )
  assert line.endswith("delete it, or run without --resume to start afresh")


def test_an_output_directory_that_cannot_be_written_is_one_line(tmp_path):
  if os.geteuid() == 0:  # root writes into a read-only directory: put a file in the way
    (tmp_path / "somefile").write_text("")
    out, fault = tmp_path / "somefile" / "sub", "Not a directory"
  else:
    out = tmp_path / "readonly"
    out.mkdir()
    out.chmod(0o555)
    fault = "Permission denied"
  try:
    done = _script("cancellation", *_tiny(out))
  finally:
    if out.name == "readonly":
      out.chmod(0o755)
  assert done.returncode == 1 and "Traceback" not in done.stderr
  line = _last_line(done.stderr)
  assert line.startswith(f"cancellation.py: error: {out}") and fault in line
  assert "choose another --out" in line


def test_a_write_refused_names_the_file_not_its_temporary(scripts):
  """As a non-root user in a read-only --out (root writes there: the test above cannot
  show it), the atomic write's temporary file is refused: the line names the file."""
  error = PermissionError(errno.EACCES, "Permission denied", "/r/run/manifest.json.k2j9x.tmp")
  assert scripts["cli"].fault_line(error) == (
    "/r/run/manifest.json: Permission denied (not writable: choose another --out or change"
    " its permissions)"
  )


def test_a_full_disk_is_one_line_saying_what_was_kept(scripts, tmp_path, capsys, monkeypatch):
  """The second checkpoint's write fails (ENOSPC): one line naming the directory, the
  fault and the checkpoint kept (the first, whole), exit status 1."""
  out = tmp_path / "run"
  savez = np.savez
  calls = []

  def full_after_one(f, **arrays):
    if "meta" in arrays:  # a checkpoint
      calls.append(1)
      if len(calls) == 2:
        raise OSError(errno.ENOSPC, "No space left on device")
    return savez(f, **arrays)

  monkeypatch.setattr(np, "savez", full_after_one)
  status = scripts["cli"].run_guarded("cancellation", scripts["cancellation"].main, _tiny(out))
  monkeypatch.setattr(np, "savez", savez)
  err = capsys.readouterr().err
  assert status == 1 and "Traceback" not in err
  assert _last_line(err) == (
    f"cancellation.py: error: {out}: No space left on device (the disk is full);"
    f" checkpoints in {out}: optdual at episode 10 of 20: free some space, then rerun"
    " with --resume"
  )
  assert json.loads((out / "manifest.json").read_text())["status"] == "incomplete"
  assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
  with np.load(out / "checkpoint_optdual.npz") as kept:
    assert int(kept["done"]) == 10


@pytest.mark.slow  # 30-60 s: a run interrupted, then resumed in fresh processes
def test_ctrl_c_is_one_line_with_the_resume_command_and_exit_130(tmp_path):
  """SIGINT once the progress line shows: exit status 130 (not a segmentation fault), one
  line naming the checkpoint kept and the command that continues; that command finishes
  the run."""
  out = tmp_path / "run"
  argv = _tiny(out)
  argv[argv.index("--episodes") + 1] = "3000"
  env = {**os.environ, "PYTHONPATH": str(ROOT)}
  script = str(EXPERIMENTS / "cancellation.py")
  # A test session started in the background ignores SIGINT, and so would its children:
  # the child restores Python's handler, then runs the script as `python script.py` would.
  start = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
    f" sys.argv = sys.argv[1:]; runpy.run_path({script!r}, run_name='__main__')"
  )
  run = subprocess.Popen(
    [sys.executable, "-u", "-c", start, script, *argv],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    env=env,
  )
  try:
    for line in run.stdout:
      if "episodes x 2 seeds" in line:
        break
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
  finally:
    if run.poll() is None:
      run.kill()
  assert run.returncode == 130, err
  assert "Traceback" not in err
  line = _last_line(err)
  prefix = f"cancellation.py: interrupted; checkpoints in {out}: optdual at episode "
  assert line.startswith(prefix) and " of 3000; continue with: python " in line
  assert line.endswith(" --resume")
  assert json.loads((out / "manifest.json").read_text())["status"] == "incomplete"
  command = shlex.split(line.split("continue with: ", 1)[1])
  finished = subprocess.run(
    [sys.executable, *command[1:]], capture_output=True, text=True, env=env, timeout=300
  )
  assert finished.returncode == 0, finished.stderr
  assert "optdual: resuming at episode" in finished.stdout
  assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


# 3. Your own CMDP: --benchmark MODULE:FUNCTION.

MODULE = """
import optaug_jax as oj

THRESHOLD_SCALE = {scale}


def factored():
  return oj.benchmarks.make_benchmark("factored")


def pair():
  b = oj.benchmarks.make_benchmark("factored")
  return b.cmdp._replace(thresholds=b.cmdp.thresholds * THRESHOLD_SCALE), b.safe_policy


def bare():
  return oj.benchmarks.make_benchmark("factored").cmdp


def number():
  return 3


def unsafe():
  b = oj.benchmarks.make_benchmark("factored")
  return b.cmdp._replace(thresholds=b.cmdp.thresholds * 0), b.safe_policy


def overstated():
  b = oj.benchmarks.make_benchmark("factored")
  return b._replace(slack=b.slack * 2)


def invalid():
  return oj.benchmarks.make_benchmark("factored").cmdp._replace(transitions=None)


def not_a_cmdp():
  b = oj.benchmarks.make_benchmark("factored")
  return b._replace(cmdp=dict(b.cmdp._asdict()))


def batch():
  import jax
  b = oj.benchmarks.make_benchmark("factored")
  return jax.tree.map(lambda x: x[None], b.cmdp)


def no_room():
  c = oj.benchmarks.make_benchmark("factored").cmdp
  return c._replace(thresholds=c.thresholds * 0)


def infeasible():
  import jax
  c = oj.benchmarks.random_family(
    seed=2, num_states=6, num_actions=3, horizon=5, num_constraints=2
  ).cmdp
  least = []
  for i in range(2):  # each threshold at its own least value: jointly infeasible
    alone = c._replace(cost=c.constraint_costs[i], constraint_costs=c.constraint_costs[i:i + 1])
    least.append(float(oj.solve_lp(alone._replace(thresholds=c.thresholds[:1] * 0 + 5)).value))
  return c._replace(thresholds=c.thresholds * 0 + jax.numpy.asarray(least, c.thresholds.dtype))


def flat_cost():
  c = oj.benchmarks.make_benchmark("factored").cmdp
  return c._replace(cost=c.cost[0])


def broken():
  return 1 / 0


def needs_arguments(size):
  return size
"""


def _module(directory, scale=1.0):
  path = directory / "my_cmdps.py"
  path.write_text(MODULE.format(scale=scale))
  return path


@pytest.mark.parametrize(
  "function, message",
  [
    (
      "number",
      "number() returned int; expected an oj.benchmarks.Benchmark, an oj.CMDP (its"
      " baseline: oj.safest_policy), or a tuple (cmdp, safe_policy)",
    ),
    ("unsafe", "no safe baseline: safe_policy: not strictly feasible"),
    ("overstated", "no safe baseline: slack: "),
    ("invalid", "invalid CMDP: "),
    ("not_a_cmdp", "not_a_cmdp() returned a Benchmark whose cmdp is a dict; expected an oj.CMDP"),
    ("batch", "batch() returned a batch of CMDPs (cost of shape (1, 6, 3, 2)); expected one CMDP"),
    ("no_room", "the thresholds [0.0] are met by no policy with room to spare (the best slack"),
    ("infeasible", "are infeasible: the closest policy exceeds them by "),
    ("flat_cost", "flat_cost() returned a CMDP whose cost has 2 axes (shape (3, 2)); expected 3"),
    (
      "broken",
      "broken() raised ZeroDivisionError: division by zero (it is called with no arguments)",
    ),
    ("needs_arguments", "needs_arguments() raised TypeError: "),
  ],
)
def test_a_bad_benchmark_function_is_one_line_naming_the_flag(
  scripts, tmp_path, capsys, function, message
):
  spec = f"{_module(tmp_path)}:{function}"
  status = scripts["cli"].run_guarded(
    "headline",
    scripts["headline"].main,
    ["--benchmark", spec, "--agents", "optdual", "--out", str(tmp_path / "out")],
  )
  err = capsys.readouterr().err
  assert status == 2 and "Traceback" not in err
  line = _last_line(err)
  assert line.startswith(f"headline.py: error: --benchmark {spec}: ") and message in line
  assert not (tmp_path / "out").exists()


def test_benchmark_forms_give_the_same_problem(scripts, tmp_path, monkeypatch):
  """A module in the current directory (MODULE:FUNCTION) or a file (PATH:FUNCTION); a
  Benchmark, a (cmdp, safe_policy) pair and a bare CMDP (baseline: oj.safest_policy)."""
  _module(tmp_path)
  monkeypatch.chdir(tmp_path)
  want = oj.benchmarks.make_benchmark("factored")
  digest = problems.problem_digest(want)
  assert problems.problem_digest(problems.load_benchmark("my_cmdps:factored")) == digest
  assert problems.problem_digest(problems.load_benchmark("./my_cmdps.py:pair")) == digest
  bare = problems.load_benchmark(f"{tmp_path / 'my_cmdps.py'}:bare")
  assert bare.slack == pytest.approx(float(oj.safest_policy(want.cmdp)[1]))
  assert problems.problem_digest(bare) != digest


@pytest.mark.slow  # 2 runs of 1-2 agents each (25-50 s)
def test_both_scripts_run_your_own_cmdp_and_resume_refuses_another(scripts, tmp_path):
  path = _module(tmp_path)
  spec = f"{path}:pair"
  out = tmp_path / "cancellation"
  summary = scripts["cancellation"].main(
    _tiny(out, agents="optaug,optdual") + ["--benchmark", spec]
  )
  assert set(summary) == {"optaug", "optdual"}
  config = json.loads((out / "config.json").read_text())
  assert config["arguments"]["benchmark"] == spec
  digest = experiment.problems.problem_digest(oj.benchmarks.make_benchmark("factored"))
  assert config["arguments"]["problem_digest"] == digest
  assert config["problem"]["states"] == 3 and config["problem"]["lp_value"] == pytest.approx(4)
  head = tmp_path / "headline"
  summaries = scripts["headline"].main(
    _tiny(head) + ["--benchmark", spec, "--trace-points", "5", "--tail", "5"]
  )
  assert set(summaries) == {"optdual"} and (head / "headline.png").exists()
  # --resume: another function (the same problem) and the same function changed.
  cli = scripts["cli"]
  before = md5s(out)
  other = f"{path}:factored"
  assert (
    cli.run_guarded(
      "cancellation",
      scripts["cancellation"].main,
      _tiny(out, "--resume", agents="optaug,optdual") + ["--benchmark", other],
    )
    == 2
  )
  _module(tmp_path, scale=0.9)
  problems._LOADED.clear()  # a new process would import the edited file
  for name in list(sys.modules):
    if name.startswith("_benchmark_"):
      del sys.modules[name]
  with pytest.raises(ValueError, match=r"belongs to another run.*'problem_digest'"):
    scripts["cancellation"].main(
      _tiny(out, "--resume", agents="optaug,optdual") + ["--benchmark", spec]
    )
  assert md5s(out) == before


def test_resume_refuses_another_benchmark_function(scripts, stopped_run, tmp_path, capsys):
  """The spec is part of the run's settings: the same problem from another --benchmark is
  another run."""
  spec = f"{_module(tmp_path)}:factored"
  before = md5s(stopped_run)
  status = scripts["cli"].run_guarded(
    "cancellation",
    scripts["cancellation"].main,
    _tiny(stopped_run, "--resume")[2:] + ["--benchmark", spec],
  )
  line = _last_line(capsys.readouterr().err)
  assert status == 2
  assert f"differing settings (saved, now): {{'benchmark': ('factored', '{spec}')}}" in line
  assert md5s(stopped_run) == before


# 4. Figures: the fits above the data, bands visible, and stated where they cannot be seen.


class _Figures:
  """A run directory that keeps the figures instead of writing them."""

  def __init__(self):
    self.figures = {}

  def save_figure(self, fig, name, **_):
    self.figures[name] = fig


def test_a_band_thinner_than_its_line_states_its_interval(scripts):
  pytest.importorskip("matplotlib")
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots()
  x = np.arange(1, 101)
  thin = figures.mean_with_band(ax, x, x * 1.0, x - 1e-3, x + 1e-3, color="C0", label="thin")
  wide = figures.mean_with_band(
    ax, x, x * 0.5, x * 0.5 - 20, x * 0.5 + 20, color="C1", label="wide"
  )
  figures.label_narrow_bands(ax, [thin, wide])
  assert thin["line"].get_label() == "thin (final 100 ± 0.001, 95% CI)"
  assert wide["line"].get_label() == "wide"
  fill = [c for c in ax.collections]
  assert all(c.get_zorder() < thin["line"].get_zorder() for c in fill)
  assert all(c.get_facecolor()[0][3] >= 0.25 and c.get_edgecolor()[0][3] >= 0.5 for c in fill)
  plt.close(fig)


def test_cancellation_regret_bands_state_their_interval_where_too_thin(scripts):
  pytest.importorskip("matplotlib")
  rng = np.random.default_rng(0)
  fields = ("strong_cost", "weak_cost", "strong_constraint", "weak_constraint")
  same = rng.uniform(size=(1, 50)).cumsum(1).repeat(4, 0)  # 4 identical seeds: no width
  curves = {
    "steady": {f: same for f in fields},
    "spread": {
      f: rng.uniform(0, 4, size=(4, 50)).cumsum(1) * [[0.1], [1], [2], [4]] for f in fields
    },
  }
  logs = {
    n: {
      "constraint_values": rng.uniform(size=(4, 50, 1)),
      "multipliers": rng.uniform(size=(4, 50, 1)),
    }
    for n in curves
  }
  run_dir = _Figures()
  figures = scripts["cancellation"].plot(curves, logs, np.asarray([0.5]), run_dir, "test")
  assert set(figures) == {"regrets.png", "oscillation.png", "multipliers.png"}
  assert figures == run_dir.figures
  for ax in figures["regrets.png"].axes:
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("steady (final ") and labels[0].endswith(" ± 0, 95% CI)")
    assert labels[1] == "spread"


@pytest.mark.slow  # a tiny headline.py run (15-30 s)
def test_headline_fits_are_drawn_above_the_data(scripts, tmp_path):
  pytest.importorskip("matplotlib")
  headline = scripts["headline"]
  out = tmp_path / "run"
  summaries = headline.main(
    _tiny(out, agents="optaug,optdual")
    + ["--episodes", "60", "--trace-points", "12", "--tail", "10"]
  )
  with np.load(out / "trace.npz") as f:
    data = {k: f[k] for k in f.files}
  trace = data.pop("trace")
  records = {
    n: {k.split("/", 1)[1]: v for k, v in data.items() if k.startswith(n + "/")} for n in summaries
  }
  thresholds = json.loads((out / "config.json").read_text())["problem"]["thresholds"]
  figures = headline.plot(summaries, records, trace, thresholds, _Figures(), "test")
  cumulative = next(
    ax
    for ax in figures["headline.png"].axes
    if ax.get_ylabel().startswith("cumulative strong constraint regret")
  )
  # A fit's label: "<agent> fit, c = ..." or "<agent> fit: too short to tell ...".
  fits = [ln for ln in cumulative.get_lines() if " fit" in ln.get_label()]
  data_lines = [ln for ln in cumulative.get_lines() if ln not in fits]
  assert len(fits) == 2 and len(data_lines) == 2
  for fit in fits:
    assert fit.get_linestyle() == "--"
    assert fit.get_zorder() > max(ln.get_zorder() for ln in data_lines)
    assert fit.get_zorder() > max(c.get_zorder() for c in cumulative.collections)
    assert fit.get_linewidth() > max(ln.get_linewidth() for ln in data_lines)
  # All seeds made equal: every band has no width, and every legend says so.
  for rec in records.values():
    for key, value in rec.items():
      rec[key] = np.repeat(value[:1], value.shape[0], 0)
  same = {n: headline.summarise(r, trace, 60, 0.0) for n, r in records.items()}
  figures = headline.plot(same, records, trace, thresholds, _Figures(), "test")
  for ax in figures["headline.png"].axes:
    if ax.collections:  # the panels with bands
      labels = [t.get_text() for t in ax.get_legend().get_texts()]
      for name in same:
        assert any(
          lb.startswith(f"{name} (final ") and lb.endswith(", 95% CI)") for lb in labels
        ), labels


def test_a_ctrl_c_that_python_drops_still_ends_the_run_with_130_and_incomplete(tmp_path):
  """The issue's probe: Ctrl-C landing in XLA's garbage-collection callback was dropped
  ("Exception ignored in _xla_gc_callback ... KeyboardInterrupt") and the run finished
  with status 0. Here the interrupt is raised and swallowed the same way (inside a
  callback-like `except`); the recorded Ctrl-C still ends the run: 130, "incomplete"."""
  out = tmp_path / "run"

  def main(argv):
    run_dir = result_files.ResultDir(out, "cancellation", {"x": 1}, ("summary.json",)).check()
    with run_dir.running():
      try:  # what a finaliser does with an exception: drops it
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # the handler runs here, in this frame
      except KeyboardInterrupt:
        pass
      run_dir.write_json("summary.json", {"done": True})
      run_dir.complete()

  assert cli.run_guarded("cancellation", main, []) == 130
  assert json.loads((out / "manifest.json").read_text())["status"] == "incomplete"
  # Without a Ctrl-C the same run completes (the record is cleared after each run).
  out2 = tmp_path / "run2"

  def quiet(argv):
    run_dir = result_files.ResultDir(out2, "cancellation", {"x": 1}, ("summary.json",)).check()
    with run_dir.running():
      run_dir.write_json("summary.json", {"done": True})
      run_dir.complete()

  assert cli.run_guarded("cancellation", quiet, []) == 0
  assert json.loads((out2 / "manifest.json").read_text())["status"] == "complete"


def test_a_ctrl_c_dropped_in_a_finaliser_prints_no_traceback_and_stops_the_next_chunk(capsys):
  """CI, 2026-11-28: the outlook's Ctrl-C landed in XLA's garbage-collection callback;
  Python printed "Exception ignored in ... Traceback ... KeyboardInterrupt" and the pilot
  ran its million episodes to the end. Here a finaliser drops the interrupt the same way
  (`signal.raise_signal` inside `__del__`): stderr holds only the run's one line, and the
  outlook's progress report (called between chunks) raises the recorded Ctrl-C."""
  reports = []

  class Finalised:
    def __del__(self):
      signal.raise_signal(signal.SIGINT)  # the handler raises here, inside the finaliser

  def main(argv):
    report = progress.phases(2, stream=io.StringIO())
    report("pilot", 0, 10)
    Finalised()  # collected at once: its KeyboardInterrupt is dropped
    reports.append("after the drop")
    report("pilot", 5, 10)  # the next chunk's report: raises
    reports.append("not reached")

  hook = sys.unraisablehook
  assert cli.run_guarded("outlook", main, []) == 130
  err = capsys.readouterr().err
  assert reports == ["after the drop"]
  assert "Traceback" not in err and "Exception ignored" not in err, err
  assert _last_line(err).startswith("outlook.py: interrupted"), err
  assert sys.unraisablehook is hook  # outside a guarded run: as before


def test_known_model_runs_your_own_cmdp(tmp_path):
  """`experiments/known_model.py --benchmark PATH:FUNCTION`, as the other scripts; its LP
  value is the factored benchmark's (4), whatever the file's dtype (run in float64)."""
  path = _module(tmp_path)
  root = pathlib.Path(__file__).parent.parent
  out = tmp_path / "known"
  done = subprocess.run(
    [
      sys.executable,
      str(root / "experiments" / "known_model.py"),
      "--benchmark",
      f"{path}:factored",
      "--iters",
      "4",
      "--inner-iters",
      "30",
      "--alm-etas",
      "10",
      "--dual-etas",
      "0.5",
      "--out",
      str(out),
    ],
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert done.returncode == 0, done.stderr[-2000:]
  result = json.loads((out / "known_model.json").read_text())
  assert result["lp_value"] == pytest.approx(4.0)
  bad = subprocess.run(
    [
      sys.executable,
      str(root / "experiments" / "known_model.py"),
      "--benchmark",
      "nope",
      "--out",
      str(tmp_path / "x"),
    ],
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert bad.returncode == 2 and "--benchmark: 'nope' is not" in bad.stderr


def test_a_run_title_names_your_cmdp_by_its_file_not_its_path():
  """The outlook's and the figures' titles printed the benchmark's absolute path."""
  import argparse

  from optaug_jax._src.experiment import arguments

  args = argparse.Namespace(
    benchmark="/home/me/work/reservoir.py:reservoir",
    grid_size=None,
    setting="bura2022",
    bonus_scale=0.1,
    seeds=4,
    episodes=1000,
  )
  title = arguments.run_title(args)
  assert title.startswith("reservoir.py:reservoir, bura2022 setting") and "/home" not in title
  args.benchmark = "my_cmdps:reservoir"
  assert arguments.run_title(args).startswith("my_cmdps:reservoir, ")
