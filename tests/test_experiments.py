"""Smoke runs of the experiments at tiny sizes, so that they never rot.

The tests import the package, never an experiment script: the two learning-run
experiments are `experiment.headline` and `experiment.cancellation`, called here in
process; the other scripts of experiments/ run as a user runs them, in a subprocess, and
the tests read what they wrote into `--out`.
"""

import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import optaug_jax as oj
from optaug_jax import experiment

EXPERIMENTS = pathlib.Path(__file__).parent.parent / "experiments"


def _script_fails(name, *argv) -> str:
  """Runs experiments/NAME as `_run_script` does, expecting exit status 2; its stderr."""
  env = dict(os.environ)
  root = str(pathlib.Path(oj.__file__).resolve().parent.parent)
  env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
  done = subprocess.run(
    [sys.executable, str(EXPERIMENTS / name), *argv], env=env, capture_output=True, text=True
  )
  assert done.returncode == 2, done.stderr
  return done.stderr


def _run_script(name, *argv):
  """Runs experiments/NAME as a command line (`python experiments/NAME ARGV`) with this
  environment; a failure shows the script's stderr. The script imports the optaug_jax that
  the tests import (its folder first on PYTHONPATH, whether or not the package is
  installed), and when the suite's persistent compilation cache is on (tests/conftest.py)
  it uses the same folder."""
  env = dict(os.environ)
  root = str(pathlib.Path(oj.__file__).resolve().parent.parent)
  env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
  cache = jax.config.jax_compilation_cache_dir
  if cache:
    env["JAX_COMPILATION_CACHE_DIR"] = cache
  command = [sys.executable, str(EXPERIMENTS / name), *argv]
  done = subprocess.run(command, env=env, capture_output=True, text=True)
  assert done.returncode == 0, (
    f"{' '.join(command)} exited with status {done.returncode}; its stderr:\n{done.stderr}"
  )
  return done


def _read_json(path):
  return json.loads(pathlib.Path(path).read_text())


@pytest.mark.slow
def test_quickstart_runs_and_saves(tmp_path):
  _run_script(
    "quickstart.py",
    *["--episodes", "60", "--pretrain", "10", "--seeds", "2", "--out", str(tmp_path)],
  )
  summary = _read_json(tmp_path / "summary.json")  # what main returns
  assert set(summary) == {"optaug", "optdual"}
  for name in ["config.json", "summary.json", "results.npz"]:
    assert (tmp_path / name).exists()
  assert json.loads((tmp_path / "config.json").read_text())["arguments"]["episodes"] == 60
  assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "complete"


@pytest.mark.slow
def test_benchmark_quick(tmp_path):
  out = tmp_path / "bench.json"
  sections = "kernel,step,throughput,memory,sweep,profile"
  _run_script("benchmark.py", "--quick", "--sections", sections, "--out", str(out))
  result = json.loads(out.read_text())  # the script's results, as it returns them
  assert result["hardware"]["cpu_count"] >= 1
  assert result["step"]["vmapped_vs_numpy"] > 0
  assert result["kernel"]["best_fill"] in oj.kernels.FILL_METHODS
  assert result["sweep"]["seeds"] == 50
  through = result["throughput"]
  assert set(through["step_us_per_seed"]) == {"frank_wolfe", "exact"}
  assert through["media_streaming"]["projected_1e5_s"] > 0
  assert 0 < through["lmo_in_loop_us_per_seed_256"] and 0 < through["lmo_us_per_seed_256"]
  assert set(result["profile"]) == {"20 LMOs in a solver loop", "step, frank_wolfe", "step, exact"}
  for rows in result["profile"].values():  # XLA:CPU reports its ops in the trace
    times = [r["us_per_call"] for r in rows]
    assert rows and times == sorted(times, reverse=True)
    assert all(r["events_per_call"] > 0 and 0 < r["share"] <= 1 for r in rows)
  full = [m for m in result["memory"] if m["logs"] == "full"]
  summary = [m for m in result["memory"] if m["logs"] == "summary"]
  if full[0]["bytes"] is not None:  # logs grow with K; summaries do not
    assert full[-1]["bytes"]["output"] > full[0]["bytes"]["output"]
    assert summary[-1]["bytes"]["output"] == summary[0]["bytes"]["output"]


@pytest.mark.slow
def test_dope_code_comparison_quick(tmp_path):
  """Both DOPE variants share the baseline phase, then run their LPs; the config and the
  summary are written with the variants' records."""
  _run_script(
    "dope_code_comparison.py",
    *["--benchmark", "factored", "--seeds", "1", "--after", "3", "--out", str(tmp_path)],
  )
  summary = _read_json(tmp_path / "summary.json")  # what main returns
  assert set(summary["variants"]) == {"support", "all"}
  assert summary["k0"] == 675 and summary["v_star"] == pytest.approx(4.0, abs=1e-6)
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["setting"]["name"] == "bura2022" and config["k0"] == 675
  for record in summary["variants"].values():
    assert 0.0 <= record["lp_feasible_fraction"] <= 1.0 and record["violations"] == 0


@pytest.mark.slow
def test_sensitivity_quick(tmp_path):
  pytest.importorskip("matplotlib")
  _run_script("sensitivity.py", "--quick", "--out", str(tmp_path))
  assert (tmp_path / "sensitivity.png").exists()
  results = _read_json(tmp_path / "sensitivity.json")  # what main returns
  ident = results["agreement_and_cost"]["identities"]["envelope"]
  assert ident["rel_err_d_alpha"] < 1e-12 and ident["rel_err_d_cost"] < 1e-12


def _cancellation_args(out, *extra):
  return [
    "--benchmark",
    "random_family",
    "--states",
    "3",
    "--actions",
    "2",
    "--horizon",
    "3",
    "--seeds",
    "3",
    "--episodes",
    "40",
    "--chunk",
    "15",
    "--pretrain",
    "5",
    "--fw-iters",
    "5",
    "--agents",
    "optaug,optdual,optprimaldual",
    "--out",
    str(out),
    *extra,
  ]


@pytest.mark.slow
def test_cancellation_resume_equals_uninterrupted_run(tmp_path):
  import numpy as np

  cancellation = experiment.cancellation
  full = cancellation.main(_cancellation_args(tmp_path / "full"))
  assert set(full) == {"optaug", "optdual", "optprimaldual"}
  # Interrupted after one chunk (15 of 40 episodes), then resumed twice.
  assert cancellation.main(_cancellation_args(tmp_path / "cut", "--max-chunks", "1")) is None
  assert (
    cancellation.main(_cancellation_args(tmp_path / "cut", "--resume", "--max-chunks", "1")) is None
  )
  cancellation.main(_cancellation_args(tmp_path / "cut", "--resume"))
  a = np.load(tmp_path / "full" / "results.npz")
  b = np.load(tmp_path / "cut" / "results.npz")
  assert sorted(a.files) == sorted(b.files)
  for name in a.files:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)
  for name in ["config.json", "summary.json", "regrets.png", "oscillation.png", "multipliers.png"]:
    assert (tmp_path / "cut" / name).exists()
  with pytest.raises(ValueError, match="belongs to another run"):
    cancellation.main(_cancellation_args(tmp_path / "cut", "--resume", "--bonus-scale", "0.5"))


@pytest.mark.slow  # 15-25 s; the known-model experiment (default suite under 10 min)
def test_known_model_experiment_quick(tmp_path):
  _run_script(
    "known_model.py",
    *[
      "--iters",
      "30",
      "--inner-iters",
      "100",
      "--alm-etas",
      "10",
      "--dual-etas",
      "0.5",
      "--out",
      str(tmp_path),
    ],
  )
  assert (tmp_path / "known_model.png").exists()
  results = _read_json(tmp_path / "known_model.json")  # what main returns
  alm = results["alm"]["10.0"]
  assert abs(alm["objective_gap"][-1]) < 1e-2 and alm["violation"][-1] < 1e-2


@pytest.mark.slow
def test_inner_solver_experiment_quick(tmp_path):
  pytest.importorskip("cvxpy")
  _run_script("inner_solver.py", "--quick", "--out", str(tmp_path))
  assert (tmp_path / "inner_solver.json").exists() and (tmp_path / "inner_solver.png").exists()
  results = _read_json(tmp_path / "inner_solver.json")["results"]  # what main returns
  for r in results:  # certificates bound the errors (up to Clarabel's accuracy)
    assert all(row["error"] <= row["certificate"] + 1e-8 for row in r["rows"])
  # The I = 1 bisection is exact within its budget; for I >= 2 only the certificate is
  # guaranteed (README: the cutting-plane method can stop short at eta >= 1e4).
  dual = [r for r in results if r["method"] == "exact" and r["constraints"] == 1]
  assert dual and all(r["dp_calls_to_1e-06"] is not None for r in dual)


@pytest.mark.slow
def test_cancellation_bura2022_setting_is_run_and_recorded(tmp_path):
  import json

  cancellation = experiment.cancellation
  summary = cancellation.main(
    [
      "--benchmark",
      "media_streaming",
      "--setting",
      "bura2022",
      "--agents",
      "optcmdp,optdual",
      "--seeds",
      "2",
      "--episodes",
      "100",
      "--chunk",
      "100",
      "--out",
      str(tmp_path),
    ]
  )
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["setting"] == {
    "name": "bura2022",
    "log_factor": "bura2022",
    "delta": 0.01,
    "stationary": True,
    "known_costs": True,
    "known_support": True,
  }
  assert config["arguments"]["bonus_scale"] == 1.0 and config["arguments"]["delta"] == 0.01
  assert "states" not in config["arguments"]  # size flags belong to the random family
  assert config["problem"]["states"] == 10 and config["problem"]["actions"] == 2
  for name in ("optcmdp", "optdual"):
    at = summary[name]["at_episodes"]
    assert set(at) == {"100"}
    assert at["100"]["absolute_cost"]["mean"] > 0
    late = summary[name]["late_values"]
    assert late["episodes"] == [91, 100] and 0 < late["cost_value"]["mean"] <= 10


def _headline_args(out, *extra):
  return [
    "--benchmark",
    "random_family",
    "--states",
    "3",
    "--actions",
    "2",
    "--horizon",
    "3",
    "--seeds",
    "3",
    "--episodes",
    "60",
    "--chunk",
    "25",
    "--pretrain",
    "5",
    "--agents",
    "optaug,optdual",
    "--trace-points",
    "12",
    "--tail",
    "30",
    "--bonus-scale",
    "0.1",
    "--out",
    str(out),
    *extra,
  ]


@pytest.mark.slow
def test_headline_totals_match_the_full_log_and_resume_is_exact(tmp_path):
  """The host reduction (running totals, trace, tail) against `oj.regrets` of a full-log
  run of the same agent and keys; an interrupted run resumed gives the same arrays."""
  import jax
  import numpy as np

  import optaug_jax as oj

  headline = experiment.headline
  summary = headline.main(_headline_args(tmp_path / "full"))
  assert set(summary) == {"optaug", "optdual"}
  data = np.load(tmp_path / "full" / "trace.npz")
  trace = data["trace"]
  assert trace[-1] == 60 and {30, 54} <= set(trace.tolist())
  # Independent: the cancellation experiment's full logs of the same run.
  cancellation = experiment.cancellation
  cancellation.main(
    [
      "--benchmark",
      "random_family",
      "--states",
      "3",
      "--actions",
      "2",
      "--horizon",
      "3",
      "--seeds",
      "3",
      "--episodes",
      "60",
      "--chunk",
      "60",
      "--pretrain",
      "5",
      "--agents",
      "optaug,optdual",
      "--bonus-scale",
      "0.1",
      "--out",
      str(tmp_path / "ref"),
    ]
  )
  ref = np.load(tmp_path / "ref" / "results.npz")
  config = json.loads((tmp_path / "full" / "config.json").read_text())
  lp_value, alpha = config["problem"]["lp_value"], np.array(config["problem"]["thresholds"])
  for name in ("optaug", "optdual"):
    log = oj.EpisodeLog(
      cost_value=jax.numpy.asarray(ref[f"{name}/cost_value"]),
      constraint_values=jax.numpy.asarray(ref[f"{name}/constraint_values"]),
      optimistic_cost_value=None,
      optimistic_constraint_values=None,
      multipliers=None,
      inner_gap=None,
      pretraining=None,
      sampled_cost=None,
      sampled_constraint_costs=None,
    )
    reg = oj.regrets(log, lp_value, alpha)
    idx = trace - 1
    np.testing.assert_allclose(
      data[f"{name}/trace_strong_constraint"].max(-1),
      np.asarray(reg.strong_constraint)[:, idx],
      rtol=1e-5,
      atol=1e-4,
    )
    np.testing.assert_allclose(
      data[f"{name}/trace_absolute_cost"][..., 0],
      np.asarray(reg.absolute_cost)[:, idx],
      rtol=1e-5,
      atol=1e-4,
    )
    np.testing.assert_array_equal(
      data[f"{name}/tail_constraint_values"], ref[f"{name}/constraint_values"][:, -30:]
    )
    late = (ref[f"{name}/constraint_values"][:, 54:, 0] - alpha[0]).mean(1).mean()
    assert abs(summary[name]["late"]["violation"]["mean"] - late) < 1e-5
  saved = json.loads((tmp_path / "full" / "summary.json").read_text())
  assert set(saved["columns"]) >= {"window_violation", "fit", "late"}
  for f in ("headline.png", "oscillation.png"):
    assert (tmp_path / "full" / f).exists()
  # Interrupted after one chunk, then resumed: identical arrays.
  assert headline.main(_headline_args(tmp_path / "cut", "--max-chunks", "1")) is None
  headline.main(_headline_args(tmp_path / "cut", "--resume"))
  cut = np.load(tmp_path / "cut" / "trace.npz")
  for key in data.files:
    np.testing.assert_array_equal(cut[key], data[key], err_msg=key)
  with pytest.raises(ValueError, match="belongs to another run"):
    headline.main(_headline_args(tmp_path / "cut", "--resume", "--eta", "5"))


@pytest.mark.slow  # two subprocess runs of one tiny cell, 30-60 s
def test_separation_sweep_tabulates_its_cells_and_resumes(tmp_path):
  import numpy as np

  argv = ["--sides", "3", "--bonus-scales", "0.1", "--seeds", "2", "--episodes", "400"]
  argv += ["--chunk", "200", "--tail", "50", "--out", str(tmp_path)]
  _run_script("separation.py", *argv)
  first = _read_json(tmp_path / "separation.json")
  rows = {row["agent"]: row for row in first["rows"]}
  assert set(rows) == {"optaug", "optdual"}
  cell = tmp_path / "g3_b0.1"
  alpha = _read_json(cell / "config.json")["problem"]["thresholds"][0]
  trace = np.load(cell / "trace.npz")
  for agent, row in rows.items():
    assert (row["states"], row["bonus_scale"]) == (9, 0.1)
    # The late share, from the tail of played policies' exact constraint values: the
    # last tenth of the run (episodes 361-400) is in the 50-episode tail.
    late = trace[f"{agent}/tail_constraint_values"][:, -40:, 0] - alpha
    assert row["late_share"] == pytest.approx(np.mean(late > 0.05), abs=1e-9)
    assert row["late_positive_violation"] == pytest.approx(np.mean(np.maximum(late, 0)), rel=1e-5)
    ends = [end for end, _ in row["share_over_length"]]
    assert ends[-1] == 400 and ends == sorted(ends)
  assert "| 9 | 0.1 | optaug |" in (tmp_path / "separation.md").read_text()
  # --resume re-reads the finished cell: the same table.
  _run_script("separation.py", *argv, "--resume")
  assert _read_json(tmp_path / "separation.json")["rows"] == first["rows"]
  assert _read_json(tmp_path / "manifest.json")["status"] == "complete"
  # The probes: a changed flag on --resume is refused (before, the finished cell
  # was silently run again), and so is a fresh sweep of other settings into this folder
  # (before, the old table stayed beside the new cells); --restart replaces it, saying so.
  other = [argv[0], "4", *argv[2:]]  # --sides 4
  refused = _script_fails("separation.py", *other, "--resume")
  assert "--resume: " in refused and "'sides': ([3], [4])" in refused
  assert "holds another sweep" in _script_fails("separation.py", *other)
  assert (cell / "config.json").exists()  # nothing was removed by the refusals
  done = _run_script("separation.py", *other, "--restart")
  assert "--restart: removing the previous sweep" in done.stdout
  assert not cell.exists() and (tmp_path / "g4_b0.1").is_dir()
  # Its own flags in its errors (before: headline.py's, suggesting --pretrain).
  assert "separation.py: error: --pretrain 300 must be at most --episodes 100" in (
    _script_fails("separation.py", "--episodes", "100", "--out", str(tmp_path))
  )


@pytest.mark.slow
def test_episode_cost_counts_the_dps_of_every_timed_episode(tmp_path):
  """The DP statistics describe the episodes the seconds do: every chunk of the window
  (they once came from its last chunk alone, where the searches are shortest). With
  `--profile`, each agent's phases and what was traced."""
  out = tmp_path / "cost.json"
  _run_script(
    "episode_cost.py",
    *["--problems", "media_streaming", "--seeds", "2", "--chunk", "10", "--early", "30"],
    *["--late-after", "0", "--agents", "optaug,optdual", "--out", str(out)],
    *["--profile", "--profile-episodes", "4"],
  )
  (row,) = _read_json(out)["rows"]
  assert row["early_episodes"] == 30
  assert 1.0 <= row["early_dp_mean"] <= row["early_dp_vmapped_max_mean"] <= row["early_dp_max"]
  assert row["early_certified"] == 1.0
  # The profile says what it traced (fewer episodes or calls where the trace hit the cap).
  for agent in ("optaug", "optdual"):
    phases = row[f"early_{agent}_phases"]
    assert phases["profile_episodes"] in (1, 2, 4) and phases["profile_calls"] in (1, 2)
    assert phases["extended_dp"] > 0 and phases["wall"] > 0
  assert row["early_optaug_phases"]["refill"] > 0


def test_phase_profile_attributes_ops_to_the_innermost_named_phase():
  """`optaug_jax.experiment.phases`: each instruction of a compiled program goes to the
  innermost of the episode's phases in its op name, through a transform's wrapper
  (`vmap(extended_dp)`: the exact search's DP inside `for_active`'s batching rule), and
  control-flow containers to none."""
  from optaug_jax._src import batching
  from optaug_jax.experiment import phases

  @jax.named_scope("extended_dp")
  def dp(x):
    return jnp.sin(x) * 3.0

  def episode(active, x):
    with jax.named_scope("plan"):
      with jax.named_scope("inner_solve"):
        y = batching.for_active(active, dp, x)
        y = jax.lax.fori_loop(0, 3, lambda i, c: jnp.cos(c), y)
    with jax.named_scope("play"):
      return jnp.exp(y) + 1.0

  active = jnp.array([True, False, True, True])
  text = jax.jit(jax.vmap(episode)).lower(active, jnp.ones((4, 7))).compile().as_text()
  ops = {}
  for line in text.splitlines():
    m = phases._OP_NAME.search(line)
    for op in ("sine", "cosine", "exponential", "while"):
      if m and f" {op}(" in line:
        ops.setdefault(op, set()).add(phases.phase_of(m.group(1)))
  assert ops["sine"] == {"extended_dp"}  # every bucket of for_active's rule
  assert ops["cosine"] == {"inner_solve"} and ops["exponential"] == {"play"}
  assert phases.phase_of("jit(f)/vmap(jit(run))/while/body/copy") == phases.OTHER
  found = phases.instruction_phases(text)
  assert None in found.values()  # the fori_loop's while: a container, not counted
  assert {"extended_dp", "inner_solve", "play"} <= set(found.values())


def _loop_program(steps):
  """A compiled loop of `steps` steps of a scatter and a sort (ops the trace records)."""

  def f(x, idx):
    body = lambda i, c: jnp.sort(c.at[idx].add(c[::-1] * 1e-3))
    return jax.lax.fori_loop(0, steps, body, x)

  args = (jnp.ones(16), jnp.arange(16) % 5)
  return jax.jit(f).lower(*args).compile(), args


def test_a_profile_at_the_profilers_event_cap_is_refused_then_taken_smaller(monkeypatch):
  """The profiler keeps a trace's first `TRACE_EVENT_CAP` events and drops the rest without
  a word: the episode-cost profiles of 20 episodes x 2 calls summed a part of their ops
  (the queue's OptAug at bonus 0.01: 1.51 ms of 3.72 per seed-episode). A trace at the cap
  is refused, and `fitted_phase_profile` takes one call, then fewer episodes, until the
  trace fits."""
  from optaug_jax.experiment import phases, timing

  compiled, args = _loop_program(200)
  full = timing.trace_events(compiled, args, 1)
  complete = sum(e.get("ph") == "X" for e in full)
  scatters = sum(e.get("ph") == "X" and "scatter" in e.get("name", "") for e in full)
  assert scatters >= 200  # every step's scatter (and its end marker) is there
  monkeypatch.setattr(timing, "TRACE_EVENT_CAP", complete)
  with pytest.raises(timing.TraceTruncatedError, match="cap of"):
    timing.trace_events(compiled, args, 1)
  # 8 "episodes" of 100 steps each, with the cap between one and two episodes' events.
  monkeypatch.setattr(timing, "TRACE_EVENT_CAP", complete * 3 // 4)
  said = []
  per, episodes, calls, _ = phases.fitted_phase_profile(
    lambda n: _loop_program(100 * n)[0], args, 8, log=said.append
  )
  assert (episodes, calls) == (1, 1), said
  assert said[0].endswith("again: 8 episodes, 1 call") and len(said) == 4
  assert per[phases.OTHER] > 0
  monkeypatch.setattr(timing, "TRACE_EVENT_CAP", complete // 4)
  with pytest.raises(timing.TraceTruncatedError):
    phases.fitted_phase_profile(lambda n: _loop_program(100 * n)[0], args, 2)


@pytest.mark.slow
def test_the_profiler_keeps_trace_event_cap_events_and_drops_the_rest(monkeypatch):
  """`timing.TRACE_EVENT_CAP` is the profiler's real cap: a loop of 200,000 steps (about
  1.6 million events) comes back with exactly that many complete events, the later steps'
  missing. A jax that moves the cap fails here."""
  from optaug_jax.experiment import timing

  cap = timing.TRACE_EVENT_CAP
  monkeypatch.setattr(timing, "TRACE_EVENT_CAP", 10**9)
  compiled, args = _loop_program(200_000)
  events = timing.trace_events(compiled, args, 1)
  assert sum(e.get("ph") == "X" for e in events) == cap
  kept = sum(e.get("ph") == "X" and e.get("name", "").startswith("wrapped_scatter") for e in events)
  assert kept < 200_000


@pytest.mark.slow
def test_episode_cost_times_your_own_cmdp(tmp_path):
  """`episode_cost.py --benchmark path.py:FUNCTION`: a user could not time their own CMDP
  (only its named problems). Its row is the spec's, its episodes certified."""
  module = tmp_path / "my_cmdp.py"
  module.write_text(
    "import optaug_jax as oj\n\n\ndef mine():\n"
    "  return oj.benchmarks.make_benchmark('media_streaming')\n"
  )
  out = tmp_path / "cost.json"
  spec = f"{module}:mine"
  _run_script(
    "episode_cost.py",
    *["--benchmark", spec, "--seeds", "2", "--chunk", "10", "--early", "20"],
    *["--late-after", "0", "--agents", "optaug,optdual", "--out", str(out)],
  )
  (row,) = _read_json(out)["rows"]
  assert row["problem"] == spec and row["early_certified"] == 1.0


def test_episode_cost_refuses_your_own_cmdp_when_it_cannot_load_it(tmp_path):
  err = _script_fails("episode_cost.py", "--benchmark", f"{tmp_path}/none.py:mine")
  assert f"episode_cost.py: error: --benchmark {tmp_path}/none.py:mine: no file" in err


def test_roofline_states_the_floors_and_places_a_devices_rows(tmp_path):
  """perf/roofline.py: the bandwidth floor is the bytes of one seed's bounds over the
  stream bandwidth, and `--measured` places rows against another file's device."""
  device = tmp_path / "device.json"
  tiny = ["--sizes-mib", "1", "--steps", "20", "--reps", "2", "--problems", "queue"]
  _run_script("perf/roofline.py", *tiny, "--out", str(device))
  measured = _read_json(device)
  bench = oj.benchmarks.make_benchmark("queue")
  h, s, a, n = bench.cmdp.next_states.shape
  (floor,) = measured["floors"].values()
  assert floor["bounds_bytes_per_seed"] == 2 * h * s * a * n * 4
  assert measured["bandwidth_gb_s"] > 0 and measured["loop_step_least_s"] > 0
  cost = tmp_path / "cost.json"
  row = {"problem": "queue", "early_optaug_s": 2e-3, "early_optdual_s": 1e-3}
  cost.write_text(json.dumps({"args": {"seeds": 4}, "rows": [row]}))
  placed = tmp_path / "placed.json"
  _run_script(
    "perf/roofline.py", "--measured", str(device), "--cost", str(cost), "--out", str(placed)
  )
  out = _read_json(placed)
  assert out["bandwidth_gb_s"] == measured["bandwidth_gb_s"]  # the device's, not this one's
  queue = out["floors"]["queue"]
  seconds = floor["bounds_bytes_per_seed"] / (measured["bandwidth_gb_s"] * 1e9)
  assert queue["optaug_bandwidth_floors"] == pytest.approx(2e-3 / seconds)
  assert queue["optdual_step_floors"] == pytest.approx(
    1e-3 / (3 * h * measured["loop_step_least_s"] / 4)
  )
