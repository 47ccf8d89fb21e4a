"""OptAug's episode against OptDual's, side by side in one process: time and extended DPs.

For each problem, OptAug (its default warm-started inner solve), OptAug without the warm
start (`optaug_cold`: `warm_start=False`, every solve from the prox centre) and OptDual run
vmapped over the same seeds, in jitted chunks of
`--chunk` episodes (one compiled function per agent, compiled on the first chunk, which is
then played again); OptAug's pre-training is that first chunk, untimed. Two windows are
timed:

- early: the first `--early` episodes after OptAug's pre-training (OptDual: the same
  episodes);
- late: `--window` episodes after `--late-after` episodes. The state at `--late-after` is
  saved (`--cache DIR/<problem>_<agent>_<episodes>.npz`, with the run's identity, verified
  when read) so the long prefix is paid once.

Printed and saved (`--out`, JSON with the hardware and the arguments, rewritten after each
problem): seconds per seed-episode of each agent, each OptAug's ratio to OptDual, and its
extended DPs per episode (mean over seeds and episodes, the mean over episodes of the
maximum over the vmapped seeds, which is what a batch pays, and the largest), and the
fraction of its solves certified. With `--profile`, each window's op time by phase of the
episode (one chunk of `--profile-episodes` after the window, `optaug_jax.experiment.phases`):
where OptAug's episode spends what OptDual's does not.

The files and the ending are the other scripts' (`experiment.cli`, `result_files`,
`checkpoints`): `--out` is written atomically, with its manifest beside it (OUT.json ->
OUT.manifest.json: the arguments, the versions and a status, "running", "incomplete" or
"complete"); a cached state is a verified checkpoint (its run's identity and a digest),
recomputed when it is another run's and refused in one line when damaged (exit status 2,
as a flag mistake); Ctrl-C ends the run with one line and exit status 130.

  python experiments/episode_cost.py                    # the default problems, 16 seeds
  python experiments/episode_cost.py --problems reservoir,random_i2,random_i5  # I >= 2
  python experiments/episode_cost.py --problems media_streaming,lost_sales --late-after 0
"""

from __future__ import annotations

import os
import platform
import sys
import time

import jax
import numpy as np

import optaug_jax as oj
from optaug_jax import experiment
from optaug_jax.experiment import checkpoints, cli, cost_table, phases, result_files


def _phases(agent, cmdp, state, seeds, episodes, stage):
  """Op seconds per seed-episode by phase (`optaug_jax.experiment.phases`) of `episodes` episodes
  from `state`, every seed vmapped (a chunk compiled for the profile alone), with that chunk's
  wall seconds per seed-episode (untraced) and its DP statistics (`_dp_stats`): the profile
  describes these episodes, not the window's. A trace at the profiler's event cap is taken
  again with fewer episodes (`phases.fitted_phase_profile`; `profile_episodes`,
  `profile_calls`: what was traced)."""
  keys = cost_table.keys(seeds, stage)

  def compile_for(n):
    run = lambda key, st, model: oj.run(agent, key, model, num_episodes=n, state=st)
    return jax.jit(jax.vmap(run, in_axes=(0, 0, None))).lower(keys, state, cmdp).compile()

  say = lambda line: print(f"  profile: {line}", file=sys.stderr)
  per, episodes, calls, compiled = phases.fitted_phase_profile(
    compile_for, (keys, state, cmdp), episodes, log=say
  )
  out = {k: v / (seeds * episodes) for k, v in per.items()}
  out.update(profile_episodes=episodes, profile_calls=calls)
  start = time.perf_counter()
  _, log = jax.block_until_ready(compiled(keys, state, cmdp))
  out["wall"] = (time.perf_counter() - start) / (seeds * episodes)
  window = _Window()
  window.add(log)
  if window.dp_calls:
    out.update({f"chunk_{k}": v for k, v in _dp_stats(window).items()})
  return out


_COMPILED: set = set()  # (function, fresh start) pairs already compiled
_COMPILE_SECONDS: dict = {}  # their compile times (`_play`)


def _play(fn, state, seeds, episodes, chunk, stage, label="chunk"):
  """`episodes` episodes in chunks of `chunk` (one compiled function): the state, the
  seconds spent and the window's per-episode counts (`_Window`: every chunk's, so that the
  DPs and the seconds describe the same episodes). The first chunk of a function (per
  start: `state=None` is another program) is played twice: once to compile, once timed;
  `_COMPILE_SECONDS[id(fn), fresh]` is that first call's time less the timed one's (the
  compilation, to the noise of one chunk). Progress goes to stderr, `label` first: the
  first call's seconds, then each chunk (a run stopped midway still shows where its time
  went)."""
  seconds, window, done, started = 0.0, _Window(), 0, time.perf_counter()
  while done < episodes:
    keys = cost_table.keys(seeds, stage + done)
    program = (id(fn), state is None)
    first = None
    if program not in _COMPILED:  # compile (and warm up) untimed
      start = time.perf_counter()
      jax.block_until_ready(fn(keys, state))
      first = time.perf_counter() - start
      _COMPILED.add(program)
      print(f"{label}: compiled and played one chunk in {first:.1f} s", file=sys.stderr, flush=True)
    start = time.perf_counter()
    state, log = jax.block_until_ready(fn(keys, state))
    elapsed = time.perf_counter() - start
    if first is not None:
      _COMPILE_SECONDS[program] = max(first - elapsed, 0.0)
    seconds += elapsed
    window.add(log)
    done += chunk
    cli.progress(label, min(done, episodes), episodes, started, seeds, stream=sys.stderr)
  return state, seconds, window


class _Window:
  """OptAug's extended DPs and certificates of every episode of a window, `[seeds,
  episodes]` (none for an agent that logs no `dp_calls`)."""

  def __init__(self):
    self.dp_calls, self.certified = [], []

  def add(self, log):
    if "dp_calls" in log.extras:
      self.dp_calls.append(np.asarray(log.extras["dp_calls"]))
      self.certified.append(np.asarray(log.certified))


def _identity(args, problem, name) -> dict:
  """What determines the cached state of `name` on `problem` (`checkpoints`' identity)."""
  return {
    "script": "episode_cost",
    "problem": problem,
    "agent": name,
    "seeds": args.seeds,
    "pretrain": args.chunk,
    "eta": args.eta,
    "late_after": args.late_after,
    "chunk": args.chunk,
    "inner_tol": args.inner_tol,
    "warm_cuts": args.warm_cuts,
    "bonus": _bonus(args, problem),
    "batch_size": args.batch_size,  # another batch shape may round another way
    "x64": bool(jax.config.jax_enable_x64),
    "versions": [oj.__version__, jax.__version__],
  }


def _written_before_checkpoints(path) -> bool:
  """A cache file of this script before its states were checkpoints (an `identity` entry
  and the leaves, no digest): another run's, computed again."""
  try:
    with np.load(path) as f:
      return "identity" in f.files and "meta" not in f.files
  except Exception:  # pylint: disable=broad-except  (damaged: load_checkpoint says why)
    return False


def _cache_path(args, problem, name) -> str:
  tag = "" if args.bonus is None else f"_bonus{args.bonus:g}"
  return os.path.join(args.cache, f"{problem}{tag}_{name}_{args.late_after}.npz")


def _cache_fix(args) -> str:
  return f"delete it (the state is computed again), or give another --cache than {args.cache}"


def check_cache(args):
  """Reads every cached state this run would use, before any work: a damaged one is
  refused now (`checkpoints.CheckpointError`: one line, exit status 2), not after the
  minutes of the runs before it; whose run it is, is checked when it is used."""
  if args.unroll_stationary or args.late_after <= args.early:
    return
  for problem in args.problems.split(","):
    for name in args.agents.split(","):
      path = _cache_path(args, problem, name)
      if os.path.exists(path) and not _written_before_checkpoints(path):
        checkpoints.read_checkpoint(path, fix=_cache_fix(args))


def _cached_state(args, problem, name, fn, state, total):
  """The state after `--late-after` episodes (the pre-training chunk, then `--late-after`),
  from the cache when it holds this run's: a checkpoint (`checkpoints.save_checkpoint`),
  verified when read. Another run's state is computed again and replaces it; a damaged
  file is refused (`checkpoints.CheckpointError`: one line, exit status 2)."""
  path = _cache_path(args, problem, name)
  identity = _identity(args, problem, name)
  done = args.chunk + args.late_after
  if os.path.exists(path):
    if _written_before_checkpoints(path):
      print(f"  {path}: a state cached before checkpoints; recomputing", flush=True)
    else:
      try:
        _, cached, _, _ = checkpoints.load_checkpoint(
          path, identity, state, total, lambda arrays, done: None, fix=_cache_fix(args)
        )
        return cached
      except checkpoints.OtherRunCheckpoint:
        print(f"  {path}: another run's state; recomputing", flush=True)
  start = time.perf_counter()
  prefix = args.late_after - args.early
  state, _, _ = _play(fn, state, args.seeds, prefix, args.chunk, 10**6, f"{problem} {name} prefix")
  os.makedirs(args.cache, exist_ok=True)
  checkpoints.save_checkpoint(path, identity, done, state, {}, time.perf_counter() - start)
  return state


def _dp_stats(window: _Window):
  dp = np.concatenate(window.dp_calls, axis=1)  # [seeds, episodes], every chunk of the window
  return {
    "dp_mean": float(dp.mean()),
    "dp_vmapped_max_mean": float(dp.max(axis=0).mean()),
    "dp_max": int(dp.max()),
    "certified": float(np.concatenate(window.certified, axis=1).mean()),
    "episodes": int(dp.shape[1]),
  }


def _bonus(args, problem):
  """The bonus scale of `problem`: its own (`cost_table.PROBLEMS`), or `--bonus` for all."""
  return cost_table.entry(problem)[3] if args.bonus is None else args.bonus


def measure(args, problem):
  bench_name, kwargs, setting_name, _ = cost_table.entry(problem)
  bonus = _bonus(args, problem)
  bench = cost_table.benchmark(bench_name, kwargs)
  cmdp = bench.cmdp
  setting = oj.named_setting(setting_name, cmdp)
  total = args.chunk + max(args.early, args.late_after + args.window)
  names = args.agents.split(",")
  agents = cost_table.agents(
    bench, setting, bonus, total, args.chunk, args.eta, names, args.inner_tol, args.warm_cuts
  )
  row = {
    "problem": problem,
    "S": cmdp.num_states,
    "A": cmdp.num_actions,
    "H": cmdp.horizon,
    "sparse": cmdp.next_states is not None,
    "setting": setting_name,
    "bonus_scale": bonus,
  }
  for name, agent in agents.items():
    fn = cost_table.chunk(
      agent, cmdp, args.chunk, args.batch_size
    )  # this agent's one compiled function
    # OptAug's pre-training (one chunk), untimed; OptDual plays as many episodes.
    label = f"{problem} {name}"
    state, _, _ = _play(fn, None, args.seeds, args.chunk, args.chunk, 0, f"{label} pre-training")
    state, seconds, log = _play(fn, state, args.seeds, args.early, args.chunk, 1, f"{label} early")
    row[f"early_{name}_s"] = seconds / (args.seeds * args.early)
    # The program that continues from a state (the optimistic episodes): its compile time.
    row[f"compile_{name}_s"] = _COMPILE_SECONDS.get((id(fn), False))
    if args.profile:
      row[f"early_{name}_phases"] = _phases(
        agent, cmdp, state, args.seeds, args.profile_episodes, 3
      )
    windows = {"early": log}
    if args.late_after > args.early:
      state = _cached_state(args, problem, name, fn, state, total)
      state, seconds, log = _play(
        fn, state, args.seeds, args.window, args.chunk, 2, f"{label} late"
      )
      row[f"late_{name}_s"] = seconds / (args.seeds * args.window)
      if args.profile:
        row[f"late_{name}_phases"] = _phases(
          agent, cmdp, state, args.seeds, args.profile_episodes, 4
        )
      windows["late"] = log
    if name.startswith("optaug"):
      prefix = "" if name == "optaug" else "cold_"
      for window, wlog in windows.items():
        row.update({f"{prefix}{window}_{k}": v for k, v in _dp_stats(wlog).items()})
  for window in ("early", "late"):
    for name, prefix in (("optaug", ""), ("optaug_cold", "cold_")):
      if f"{window}_{name}_s" in row and f"{window}_optdual_s" in row:
        row[f"{prefix}{window}_ratio"] = row[f"{window}_{name}_s"] / row[f"{window}_optdual_s"]
  for name, prefix in (("optaug", ""), ("optaug_cold", "cold_")):
    if row.get(f"compile_{name}_s") and row.get("compile_optdual_s"):
      row[f"{prefix}compile_ratio"] = row[f"compile_{name}_s"] / row["compile_optdual_s"]
  return row


def _compiled_with(unroll_stationary, agent, cmdp, n, keys, state):
  """One chunk of `n` episodes compiled ahead of time with the sparse DP's backward pass over a
  stationary box unrolled whatever its slots (`unroll_stationary`), or by the library's
  rule (rolled from `oj.kernels.tuning_constants()["stationary_roll_min_slots"]` slots). The
  rule is read while tracing: `oj.kernels.tuning` sets it for the block (clearing the
  caches); the compiled executable keeps it."""
  run = lambda key, st, model: oj.run(agent, key, model, num_episodes=n, state=st)
  values = {"stationary_roll_min_slots": 2**31} if unroll_stationary else {}
  with oj.kernels.tuning(**values):
    compiled = jax.jit(jax.vmap(run, in_axes=(0, 0, None))).lower(keys, state, cmdp).compile()
  return lambda keys, state: compiled(keys, state, cmdp)


def measure_unroll(args, problem):
  """Each agent's episode by the library's rule (a sparse DP over a stationary box rolled from
  `oj.kernels.tuning_constants()["stationary_roll_min_slots"]` slots) against always
  unrolled, side by side: the same state and keys, the two compiled chunks timed in turns
  (`--reps` each); their logs compared."""
  bench_name, kwargs, setting_name, _ = cost_table.entry(problem)
  bonus = _bonus(args, problem)
  bench = cost_table.benchmark(bench_name, kwargs)
  cmdp, setting = bench.cmdp, oj.named_setting(setting_name, bench.cmdp)
  names = [n for n in args.agents.split(",") if n != "optaug_cold"]
  agents = cost_table.agents(
    bench, setting, bonus, 10 * args.chunk, args.chunk, args.eta, names, 0.0
  )
  row = {"problem": problem, "S": cmdp.num_states, "A": cmdp.num_actions, "H": cmdp.horizon}
  for name, agent in agents.items():
    fn = cost_table.chunk(agent, cmdp, args.chunk)
    state, _, _ = _play(fn, None, args.seeds, args.chunk, args.chunk, 0, f"{problem} {name}")
    keys = cost_table.keys(args.seeds, 1)
    fns = {u: _compiled_with(u, agent, cmdp, args.chunk, keys, state) for u in (False, True)}
    times = {False: [], True: []}
    for _ in range(args.reps):
      for u, fn in fns.items():
        start = time.perf_counter()
        jax.block_until_ready(fn(keys, state))
        times[u].append((time.perf_counter() - start) / (args.seeds * args.chunk))
    logs = {u: fn(keys, state)[1] for u, fn in fns.items()}
    diff = max(
      float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0))
      for a, b in zip(jax.tree.leaves(logs[False]), jax.tree.leaves(logs[True]))
    )
    rolled, unrolled = float(np.median(times[False])), float(np.median(times[True]))
    row[name] = {
      "rolled_ms": 1e3 * rolled,
      "unrolled_ms": 1e3 * unrolled,
      "unrolled_over_rolled": unrolled / rolled,
      "log_max_abs_diff": diff,
    }
    print(
      f"{problem:20s} S={cmdp.num_states:4d} {name:8s} per seed-episode: rolled"
      f" {1e3 * rolled:.3f} ms, unrolled {1e3 * unrolled:.3f} ms"
      f" ({unrolled / rolled:.2f}x); logs differ by at most {diff:.2g}",
      flush=True,
    )
  return row


def _print(row):
  for prefix, name in (("", "optaug"), ("cold_", "optaug_cold")):
    parts = [f"{row['problem']:20s} S={row['S']:4d} {name:11s}"]
    for w in ("early", "late"):
      if f"{prefix}{w}_ratio" in row:
        parts.append(
          f"{w}: {row[f'{prefix}{w}_ratio']:.2f}x ({1e3 * row[f'{w}_{name}_s']:.3f} /"
          f" {1e3 * row[f'{w}_optdual_s']:.3f} ms), DPs {row[f'{prefix}{w}_dp_mean']:.2f}"
          f" (vmapped max {row[f'{prefix}{w}_dp_vmapped_max_mean']:.2f},"
          f" max {row[f'{prefix}{w}_dp_max']}), certified {row[f'{prefix}{w}_certified']:.4f}"
        )
    if f"{prefix}compile_ratio" in row:
      parts.append(
        f"compile: {row[f'{prefix}compile_ratio']:.2f}x ({row[f'compile_{name}_s']:.1f} /"
        f" {row['compile_optdual_s']:.1f} s)"
      )
    if len(parts) > 1:
      print(" | ".join(parts), flush=True)
  for w in ("early", "late"):
    for name in ("optaug", "optaug_cold", "optdual"):
      ph = row.get(f"{w}_{name}_phases")
      if ph:
        cells = ", ".join(
          f"{k} {1e3 * v:.3f}"
          for k, v in ph.items()
          if v > 0 and not k.startswith(("chunk_", "profile_"))
        )
        if "profile_episodes" in ph:
          cells += f"; {ph['profile_episodes']} episodes x {ph['profile_calls']} calls traced"
        if "chunk_dp_mean" in ph:
          cells += f"; its DPs {ph['chunk_dp_mean']:.2f} ({ph['chunk_dp_vmapped_max_mean']:.2f})"
        print(f"  {w} {name} op ms per seed-episode: {cells}", flush=True)


def parse_args(argv=None):
  p = cli.ArgumentParser(
    prog="episode_cost.py", description=__doc__, formatter_class=cli.HelpFormatter
  )
  p.add_argument(
    "--problems",
    default=",".join(cost_table.DEFAULT_PROBLEMS),
    help=f"comma-separated subset of: {', '.join(cost_table.PROBLEMS)}; or your own CMDP as"
    " path/to/file.py:FUNCTION or MODULE:FUNCTION (as --benchmark). Default: the first"
    f" {len(cost_table.DEFAULT_PROBLEMS)}; with several constraints, only when named: reservoir"
    " (experiments/own_cmdp/reservoir.py, S=200 A=5 H=30 sparse, a flood and a drought"
    " budget), random_i2 (random_family member 0, dense, "
    + cost_table.sizes(cost_table.RANDOM_I2)
    + ") and random_i5 (dense, "
    + cost_table.sizes(cost_table.RANDOM_I5)
    + ")",
  )
  p.add_argument(
    "--benchmark",
    metavar="SPEC",
    help="time your own CMDP only: path/to/file.py:FUNCTION or MODULE:FUNCTION (as the other"
    " scripts' --benchmark; the bura2022 setting, --bonus or 1.0); replaces --problems",
  )
  p.add_argument("--seeds", type=cli.positive_int, default=16)
  p.add_argument(
    "--agents",
    default=",".join(cost_table.AGENTS),
    help="comma-separated subset of: " + ", ".join(cost_table.AGENTS) + " (optdual is the"
    " reference of the ratios), and your own agents as path/to/file.py:FACTORY or"
    " MODULE:FACTORY (as headline.py's --agents; here OptAug's kind gets --eta, the"
    " pre-training chunk and the inner solver, OptDual's kind the paper's step)",
  )
  p.add_argument("--eta", type=float, default=20.0, help="OptAug's constant eta")
  p.add_argument(
    "--bonus",
    type=float,
    default=None,
    help="the bonus scale of every problem's agents (default: each problem's own, 0.1 or 1)",
  )
  p.add_argument(
    "--inner-tol",
    type=cli.non_negative_float,
    default=0.0,
    help="OptAug's exact(tol=...): 0 (default) stops when the dual is solved to"
    " rounding; a positive tol stops when the model's bound is within tol"
    " (relative) of the best dual value",
  )
  p.add_argument(
    "--warm-cuts",
    action="store_true",
    help="OptAug's exact(warm_cuts=True): I >= 2 solves start from the last one's vertices"
    " (fewer DPs; other learning statistics: docs/results/statistics)",
  )
  p.add_argument(
    "--chunk",
    type=cli.positive_int,
    default=100,
    help="episodes per jitted call (one compiled function per agent); OptAug's"
    " pre-training is one chunk",
  )
  p.add_argument(
    "--early",
    type=cli.positive_int,
    default=500,
    help="episodes of the early window (a multiple of --chunk)",
  )
  p.add_argument(
    "--late-after",
    type=cli.non_negative_int,
    default=10_000,
    help="episodes before the late window (a multiple of --chunk; 0: none)",
  )
  p.add_argument(
    "--window",
    type=cli.positive_int,
    default=200,
    help="episodes of the late window (a multiple of --chunk)",
  )
  p.add_argument(
    "--cache",
    default="results/episode_cost_states",
    help="the directory of the states after --late-after episodes (verified checkpoints)",
  )
  p.add_argument(
    "--out",
    default="results/episode_cost.json",
    help="the results (JSON, written atomically after each problem), with its manifest"
    " beside it (OUT.manifest.json)",
  )
  p.add_argument("--x64", action="store_true")
  p.add_argument(
    "--batch-size", type=cli.positive_int, help="seeds vmapped at a time (default: all)"
  )
  p.add_argument(
    "--unroll-stationary",
    action="store_true",
    help="instead: each agent's episode by the library's rule for a sparse DP over a"
    " stationary box (rolled from oj.kernels.tuning_constants()['stationary_roll_min_slots']"
    " slots) against"
    " always unrolled, one chunk after pre-training, timed in turns",
  )
  p.add_argument(
    "--reps", type=cli.positive_int, default=5, help="timed chunks of each (--unroll-stationary)"
  )
  p.add_argument(
    "--profile",
    action="store_true",
    help="also each window's op time by phase of the episode (XLA:CPU trace of one chunk"
    " of --profile-episodes after the window; optaug_jax.experiment.phases)",
  )
  p.add_argument("--profile-episodes", type=cli.positive_int, default=20)
  args = p.parse_args(argv)
  if args.benchmark:
    args.problems = args.benchmark
  problems = args.problems.split(",")
  for spec in problems:
    if spec not in cost_table.PROBLEMS and experiment.problems.is_benchmark_spec(spec):
      try:
        experiment.problems.load_benchmark(spec)  # refused in one line now, not later
      except cli.UsageError as e:
        p.error(str(e))
  unknown = sorted(
    n
    for n in set(problems) - set(cost_table.PROBLEMS)
    if not experiment.problems.is_benchmark_spec(n)
  )
  if unknown:
    p.error(
      f"--problems: unknown {', '.join(unknown)}; choose from {', '.join(cost_table.PROBLEMS)}"
    )
  for flag in ("early", "window", "late_after"):
    if getattr(args, flag) % args.chunk:
      p.error(
        f"--{flag.replace('_', '-')} {getattr(args, flag)}: must be a multiple of"
        f" --chunk {args.chunk}"
      )
  names = args.agents.split(",")
  own = [n for n in names if ":" in n]
  if sorted(set(names) - set(cost_table.AGENTS) - set(own)) or "optdual" not in names:
    p.error(
      f"--agents: a subset of {', '.join(cost_table.AGENTS)} that includes optdual, and your own"
      f" agents as path/to/file.py:FACTORY, got {args.agents}"
    )
  if own:  # labels from here on (tables, cache files); the specs are among the settings
    try:
      labels = [problems.agent_label(n) for n in names]
    except cli.UsageError as e:
      p.error(str(e))
    if len(set(labels)) < len(labels):
      p.error(f"--agents {args.agents}: an agent listed more than once")
    args.agent_specs = {label: n for label, n in zip(labels, names) if label != n}
    args.agents = ",".join(labels)
  if args.bonus is not None and not (np.isfinite(args.bonus) and args.bonus > 0):
    p.error(f"--bonus: must be > 0, got {args.bonus}")
  if not (np.isfinite(args.eta) and args.eta > 0):
    p.error(f"--eta: must be > 0, got {args.eta}")
  if 0 < args.late_after <= args.early:
    p.error(f"--late-after {args.late_after} must exceed --early {args.early} (or be 0)")
  return args


def _machine() -> dict:
  return {
    "cpu": platform.processor(),
    "cores": os.cpu_count(),
    "platform": jax.devices()[0].platform,
    "jax": jax.__version__,
    "optaug_jax": oj.__version__,
  }


@cli.raises_usage_errors
def main(argv=None):
  args = parse_args(argv)
  if args.x64:
    jax.config.update("jax_enable_x64", True)
  # What determines the numbers: every flag but where the results and the states go.
  settings = {k: v for k, v in vars(args).items() if k not in ("out", "cache")}
  run_dir = result_files.result_file(args.out, "episode_cost", settings)  # before any work
  check_cache(args)
  cli.RUN.start(args.out)
  cli.RUN.keep(f"nothing written to {args.out} yet")
  name = os.path.basename(args.out)
  rows = []
  with run_dir.running():
    print(
      f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores,"
      f" jax {jax.__version__} on {jax.devices()[0].platform}; {args.seeds} seeds vmapped"
      f"{f' {args.batch_size} at a time' if args.batch_size else ''},"
      f" float{64 if args.x64 else 32}; early: {args.early} episodes after {args.chunk}"
      f" of pre-training; late: {args.window} after {args.late_after}",
      flush=True,
    )
    for problem in args.problems.split(","):
      if args.unroll_stationary:
        rows.append(measure_unroll(args, problem))
      else:
        rows.append(measure(args, problem))
        _print(rows[-1])
      run_dir.write_json(name, {"args": vars(args), "machine": _machine(), "rows": rows}, indent=1)
      done = ", ".join(row["problem"] for row in rows)
      cli.RUN.keep(f"the rows of {done} in {args.out} (its manifest: incomplete)")
    run_dir.complete()
  return rows


if __name__ == "__main__":
  cli.main_guard("episode_cost", main)
