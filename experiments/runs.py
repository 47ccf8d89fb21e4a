"""Running agents in the experiment scripts: the agents from the registry, chunked vmapped
runs with checkpoints, and the command line, problem and setup that `headline.py` (the
main experiment) and `cancellation.py` share.

Every script that runs agents builds them with `make_agents` (from `oj.agents.AGENTS`).

Flags are checked against each other before any work (`parse`, `check_args`: argparse's
usage and one line naming the flags, exit status 2); what the library still refuses while
the run is set up (`setup`: the problem, its LP, the agents) is reported the same way, as a
`cli.UsageError` naming the flag, never as a traceback.

`--benchmark` takes a registered name or your own CMDP as `MODULE:FUNCTION` or
`path/to/file.py:FUNCTION` (`load_benchmark`): the function is called with no arguments
and returns an `oj.benchmarks.Benchmark`, an `oj.CMDP` (its baseline is then
`oj.safest_policy`), or a tuple `(cmdp, safe_policy)`; the baseline must be strictly
feasible (`oj.check_safe_policy`). The spec and a digest of the problem's arrays
(`problem_digest`) are part of the run's settings, so --resume refuses another function, or
the same function returning another CMDP.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib
import importlib.util
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli  # noqa: E402  (this directory's modules)
import processes  # noqa: E402
import result_files  # noqa: E402


def make_agents(names, benchmark, *, num_episodes: int, options: dict) -> dict:
  """`{name: agent}` from the registry; each agent takes the options its factory accepts.

  `options` maps an option name to a value for every agent that accepts it, or to a dict
  `{agent name: value}` for agent-specific values.
  """
  agents = {}
  for name in names:
    accepted = oj.agents.agent_options(name)
    mine = {}
    for key, value in options.items():
      if isinstance(value, dict):
        if name in value:
          mine[key] = value[name]
      elif key in accepted:
        mine[key] = value
    agents[name] = oj.agents.make_agent(name, benchmark, num_episodes=num_episodes, **mine)
  return agents


def final_regrets(log, lp_value, thresholds) -> dict:
  """Mean over seeds of each final regret (`oj.regrets` of a `[seeds, K]` log)."""
  reg = oj.regrets(log, lp_value, thresholds)
  return {field: float(np.mean(np.asarray(getattr(reg, field))[..., -1])) for field in reg._fields}


def run_chunks(
  name,
  agent,
  cmdp,
  keys,
  state,
  *,
  done,
  total,
  chunk,
  max_chunks,
  seconds,
  consume,
  save,
  args,
  setting=None,
):
  """Runs `agent` vmapped over `keys` from `state` (at episode `done`) to `total`, in
  jitted chunks of `chunk` episodes (`processes.chunk_runner`: over every process's devices
  with `oj.run_sharded` when `args` asks for it): after each, `consume(log, done_before)`
  takes the chunk's host log (whole, on every process) and `save(done, state, seconds)`
  checkpoints (process 0 only). Stops early after
  `max_chunks` chunks (None: never). At the end, observed transitions that `setting`'s
  declared support excludes are named in a warning (`oj.support_violations`). Returns
  `(finished, seconds)`."""
  compiled = {}  # one compiled function per chunk length
  several = jax.process_count() > 1  # gathers are collectives: every process takes part
  started = time.perf_counter() - seconds
  chunks = 0
  while done < total:
    if max_chunks is not None and chunks >= max_chunks:
      print(f"\n{name}: stopped after {chunks} chunks (--max-chunks); use --resume")
      return False, seconds
    n = min(chunk, total - done)
    if n not in compiled:
      compiled[n] = processes.chunk_runner(agent, cmdp, args, n)
    state, log = compiled[n](keys, state)
    consume(processes.gather(log), done)
    done += n
    chunks += 1
    seconds = time.perf_counter() - started
    whole = processes.gather(state) if several else state
    if processes.writes():  # process 0 writes the checkpoints
      save(done, whole, seconds)
    cli.RUN.checkpoint(name, done, total)  # for the line printed on Ctrl-C or a full disk
    cli.progress(name, done, total, started, keys.shape[0])
  sys.stdout.write("\n")
  if setting is not None and state is not None:
    counts = processes.gather(state.counts) if several else state.counts
    oj.support_violations(counts, setting)  # warns, naming the pairs
  return True, seconds


def oscillation_panel(ax, episodes, gap, title):
  """Per-episode `max_i V(d_i) - alpha_i` of the first three seeds (`gap`: [seeds, n, I])."""
  for s in range(min(3, gap.shape[0])):
    ax.plot(episodes, gap[s].max(-1), lw=0.8, label=f"seed {s}")
  ax.axhline(0, color="k", lw=0.6)
  ax.set_title(title)
  ax.set_xlabel("episode k")
  ax.set_ylabel("max_i V(d_i) - alpha_i (per episode)")
  ax.legend(fontsize=8)


# Mean curves with 95% bands, and fits drawn above them (headline.py, cancellation.py).

BAND_FACE_ALPHA = 0.3  # the band's fill; its edge is drawn at BAND_EDGE_ALPHA
BAND_EDGE_ALPHA = 0.8
FIT_ZORDER = 4  # fits above the data lines (2) and the bands (1)


def mean_with_band(ax, x, mean, lo, hi, *, color, label, **line_kwargs):
  """Draws `mean` over `x` with its band `[lo, hi]` (a visible fill with an edge, below the
  line); returns a band record for `label_narrow_bands`."""
  from matplotlib.colors import to_rgba

  x, mean, lo, hi = (np.asarray(v, np.float64) for v in (x, mean, lo, hi))
  (line,) = ax.plot(x, mean, color=color, label=label, zorder=2, **line_kwargs)
  ax.fill_between(
    x,
    lo,
    hi,
    facecolor=to_rgba(color, BAND_FACE_ALPHA),
    edgecolor=to_rgba(color, BAND_EDGE_ALPHA),
    linewidth=0.7,
    zorder=1,
  )
  return {"line": line, "label": label, "x": x, "mean": mean, "lo": lo, "hi": hi}


def fit_line(ax, x, y, *, color, label):
  """A least-squares fit curve: dashed, thicker and darker than the data's colour, above
  the data (`FIT_ZORDER`)."""
  from matplotlib.colors import to_rgb

  dark = tuple(0.55 * c for c in to_rgb(color))
  (line,) = ax.plot(x, y, color=dark, ls="--", lw=2.0, zorder=FIT_ZORDER, label=label)
  return line


def band_is_narrow(ax, band) -> bool:
  """Whether a band is thinner on screen than its line (median over its points, in the
  axes' final scales and limits): then it cannot be seen, and its legend says it."""
  ax.get_xlim(), ax.get_ylim()  # settles autoscaled limits before transforming
  x, lo, hi = band["x"], band["lo"], band["hi"]
  ok = np.isfinite(x) & np.isfinite(lo) & np.isfinite(hi)
  if not ok.any():
    return False
  if np.all(hi[ok] == lo[ok]):  # no width at all (identical seeds, one seed), any scale
    return True
  with np.errstate(all="ignore"):
    low = ax.transData.transform(np.column_stack([x[ok], lo[ok]]))[:, 1]
    high = ax.transData.transform(np.column_stack([x[ok], hi[ok]]))[:, 1]
  height = np.abs(high - low)
  height = height[np.isfinite(height)]
  if not height.size:
    return False
  return float(np.median(height)) < band["line"].get_linewidth() * ax.figure.dpi / 72


def interval_label(band) -> str:
  """The band's label with its last finite point's mean and 95% interval."""
  ok = np.flatnonzero(np.isfinite(band["mean"]) & np.isfinite(band["lo"]) & np.isfinite(band["hi"]))
  if not ok.size:
    return band["label"]
  i = ok[-1]
  half = (band["hi"][i] - band["lo"][i]) / 2
  return f"{band['label']} (final {band['mean'][i]:.3g} ± {half:.2g}, 95% CI)"


def label_narrow_bands(ax, bands):
  """States the interval in the legend label of every band too narrow to see; call once
  the axes' scales and the figure's layout are final, before `ax.legend`."""
  for band in bands:
    if band_is_narrow(ax, band):
      band["line"].set_label(interval_label(band))


# The command line, problem and setup of the main experiments (cancellation.py, headline.py).


def build_problem(args) -> oj.benchmarks.Benchmark:
  """The chosen benchmark (the random family takes the size flags, the gridworld
  `--grid-size`; `MODULE:FUNCTION` is `load_benchmark`'s). Raises `cli.UsageError` naming
  the flags for what the library refuses."""
  if is_benchmark_spec(args.benchmark):
    return load_benchmark(args.benchmark)
  kwargs, flags = {}, f"--benchmark {args.benchmark}"
  if args.benchmark == "random_family":
    kwargs = dict(
      seed=args.problem_seed,
      num_states=args.states,
      num_actions=args.actions,
      horizon=args.horizon,
      num_constraints=args.constraints,
    )
    flags += (
      f" --states {args.states} --actions {args.actions} --horizon {args.horizon}"
      f" --constraints {args.constraints} --problem-seed {args.problem_seed}"
    )
  if args.benchmark == "gridworld" and args.grid_size is not None:
    kwargs = dict(size=args.grid_size)
    flags += f" --grid-size {args.grid_size}"
  try:
    return oj.benchmarks.make_benchmark(args.benchmark, **kwargs)
  except ValueError as e:
    raise cli.UsageError(f"{flags}: the library refuses this problem ({e})") from e


# --benchmark MODULE:FUNCTION: your own CMDP.

BENCHMARK_FORMS = (
  "an oj.benchmarks.Benchmark, an oj.CMDP (its baseline: oj.safest_policy),"
  " or a tuple (cmdp, safe_policy)"
)


def is_benchmark_spec(text: str) -> bool:
  """`MODULE:FUNCTION` or `path/to/file.py:FUNCTION` (not a registered name)."""
  return text not in oj.benchmarks.BENCHMARKS and ":" in text


_LOADED: dict = {}  # spec -> function (a file is executed once per process)


def benchmark_function(spec: str):
  """The function named by `spec` (`MODULE:FUNCTION` or `path/to/file.py:FUNCTION`),
  imported but not called; `cli.UsageError` naming `--benchmark` when it cannot be."""
  if spec in _LOADED:
    return _LOADED[spec]
  where, _, name = spec.rpartition(":")
  fail = lambda why: cli.UsageError(f"--benchmark {spec}: {why}")
  if not where or not name.isidentifier():
    raise fail("expected MODULE:FUNCTION or path/to/file.py:FUNCTION")
  if where.endswith(".py") or os.sep in where or "/" in where:
    path = os.path.abspath(where)
    if not os.path.isfile(path):
      raise fail(f"no file {where} (from {os.getcwd()})")
    module_name = "_benchmark_" + hashlib.sha256(path.encode()).hexdigest()[:16]
    if os.path.dirname(path) not in sys.path:  # its own imports, as when run as a script
      sys.path.append(os.path.dirname(path))
    module = sys.modules.get(module_name)
    if module is None:
      loader_spec = importlib.util.spec_from_file_location(module_name, path)
      module = importlib.util.module_from_spec(loader_spec)
      sys.modules[module_name] = module
      try:
        loader_spec.loader.exec_module(module)
      except Exception as e:  # the user's module: any fault in it is reported in one line
        del sys.modules[module_name]
        raise fail(f"running {where} raised {type(e).__name__}: {e}") from e
  else:
    if os.getcwd() not in sys.path:  # a module in the current directory, as `python -m`
      sys.path.append(os.getcwd())
    try:
      module = importlib.import_module(where)
    except ModuleNotFoundError as e:
      if e.name and (where == e.name or where.startswith(e.name + ".")):
        raise fail(
          f"no module named {e.name} (looked in the current directory and on"
          " sys.path; give path/to/file.py:FUNCTION for a file)"
        ) from e
      raise fail(f"importing {where} raised {type(e).__name__}: {e}") from e
    except Exception as e:
      raise fail(f"importing {where} raised {type(e).__name__}: {e}") from e
  function = getattr(module, name, None)
  if function is None:
    defined = sorted(
      k
      for k, v in vars(module).items()
      if callable(v) and not k.startswith("_") and getattr(v, "__module__", None) == module.__name__
    )
    raise fail(f"{where} has no {name} (it defines: {', '.join(defined) or 'no functions'})")
  if not callable(function):
    raise fail(f"{where}.{name} is a {type(function).__name__}, not a function")
  _LOADED[spec] = function
  return function


def load_benchmark(spec: str) -> oj.benchmarks.Benchmark:
  """Your own CMDP: `FUNCTION()` of `spec` as a checked `Benchmark` in the run's float dtype
  (float32, or float64 with --x64). Accepts `BENCHMARK_FORMS`; refuses (`cli.UsageError`
  naming `--benchmark`) another return, a batch of CMDPs, a CMDP that `oj.validate_cmdp`
  refuses, and a baseline that is not strictly feasible or whose stated slack exceeds its
  true slack (`oj.check_safe_policy`)."""
  function = benchmark_function(spec)
  fail = lambda why: cli.UsageError(f"--benchmark {spec}: {why}")
  name = spec.rpartition(":")[2]
  try:
    value = function()
  except Exception as e:  # the user's function: any fault in it is reported in one line
    raise fail(f"{name}() raised {type(e).__name__}: {e} (it is called with no arguments)") from e
  slack = None
  if isinstance(value, oj.benchmarks.Benchmark):
    cmdp, policy, slack = value
  elif isinstance(value, oj.CMDP):
    cmdp, policy = value, None
  elif (
    isinstance(value, tuple)
    and len(value) == 2
    and isinstance(value[0], oj.CMDP)
    and not isinstance(value[1], oj.CMDP)
  ):
    cmdp, policy = value
  else:
    raise fail(f"{name}() returned {type(value).__name__}; expected {BENCHMARK_FORMS}")
  if not isinstance(cmdp, oj.CMDP):
    raise fail(
      f"{name}() returned a Benchmark whose cmdp is a {type(cmdp).__name__}; expected an oj.CMDP"
    )
  if np.ndim(cmdp.cost) != 3:
    raise fail(
      f"{name}() returned a batch of CMDPs (cost of shape {np.shape(cmdp.cost)});"
      " expected one CMDP (cost [H, S, A])"
    )
  dtype = jnp.zeros(()).dtype  # the run's: float32, float64 with --x64
  try:
    cmdp = oj.validate_cmdp(
      oj.CMDP(
        transitions=jnp.asarray(cmdp.transitions, dtype),
        cost=jnp.asarray(cmdp.cost, dtype),
        constraint_costs=jnp.asarray(cmdp.constraint_costs, dtype),
        thresholds=jnp.asarray(cmdp.thresholds, dtype),
        initial_state=jnp.asarray(cmdp.initial_state, jnp.int32),
        next_states=None if cmdp.next_states is None else jnp.asarray(cmdp.next_states, jnp.int32),
      )
    )
  except (ValueError, TypeError) as e:
    raise fail(f"invalid CMDP: {e}") from e
  try:
    if policy is None:
      policy, _ = oj.safest_policy(cmdp)
    policy = jnp.asarray(policy, dtype)
    true_slack = oj.check_safe_policy(cmdp, policy, slack)
  except (ValueError, TypeError) as e:
    raise fail(f"no safe baseline: {e}") from e
  return oj.benchmarks.Benchmark(
    cmdp=cmdp, safe_policy=policy, slack=float(true_slack if slack is None else slack)
  )


def problem_digest(bench) -> str:
  """SHA-256 of the problem a run solves: the CMDP's arrays, the baseline and its slack
  (`result_files.digest`). Part of the run's settings: --resume refuses another problem
  behind the same --benchmark (a `MODULE:FUNCTION` whose body changed)."""
  cmdp = bench.cmdp
  arrays = {f: np.asarray(getattr(cmdp, f)) for f in cmdp._fields if getattr(cmdp, f) is not None}
  arrays["safe_policy"] = np.asarray(bench.safe_policy)
  arrays["slack"] = np.asarray(float(bench.slack))
  return result_files.digest(arrays)


# --bonus-scale when not given (cancellation.py): 0.1 in the paper's setting, the tuned bonus
# of its recorded media_streaming and random-family runs (docs/results/ms64, rand64); the
# published radii (1.0) in Bura et al.'s. headline.py sets 1.0 in both (the paper's radii).
DEFAULT_BONUS_SCALE = {"paper": 0.1, "bura2022": 1.0}


# OptDual and its multiplier-update variants: `--dual-eta` is their step.
DUAL_AGENTS = ("optdual", "optdual_optimistic", "pid_lagrangian", "nupi_lagrangian")


def agent_options(args) -> dict:
  """The flags as agent options (each agent takes those its factory accepts)."""
  eta = {name: args.dual_eta for name in DUAL_AGENTS}
  eta["optaug"] = args.eta
  inner = (
    oj.inner.exact()
    if args.inner == "exact"
    else oj.inner.frank_wolfe(num_iters=args.fw_iters, step_rule=args.step_rule)
  )
  return {
    "setting": args.setting,
    "delta": args.delta,
    "bonus_scale": args.bonus_scale,
    "pretrain_episodes": {"optaug": args.pretrain},
    "nu": args.nu,
    "inner": {"optaug": inner},
    "unreached": args.unreached,
    "eta": eta,
  }


def run_title(args) -> str:
  """A figure's identity line: problem, setting, radii, seeds and episodes."""
  problem = args.benchmark + (
    f" {args.grid_size}x{args.grid_size}"
    if args.benchmark == "gridworld" and args.grid_size
    else ""
  )
  return (
    f"{problem}, {args.setting} setting (bonus scale {args.bonus_scale:g}),"
    f" {args.seeds} seeds x {args.episodes} episodes"
  )


BENCHMARK_HELP = (
  "the CMDP: a registered name ({names}), or your own as MODULE:FUNCTION or"
  " path/to/file.py:FUNCTION (a module in the current directory or on sys.path, or a"
  " file): FUNCTION() is called with no arguments and returns "
  + BENCHMARK_FORMS
  + "; its arrays are converted to float32 (float64 with --x64) and checked, and its"
  " baseline must be strictly feasible (oj.check_safe_policy). The spec and a digest of"
  " the problem's arrays are part of the run's settings: --resume refuses another"
  " function, or a changed one"
)


def build_parser(description: str, prog: str | None = None) -> argparse.ArgumentParser:
  """The flags of the experiment (shared with `headline.py`, which changes defaults);
  `prog`: the script's name in usage and errors (default: how it was started)."""
  p = argparse.ArgumentParser(prog=prog, description=description, formatter_class=cli.HelpFormatter)
  p.add_argument(
    "--benchmark",
    default="media_streaming",
    type=cli.benchmark_name,
    metavar="NAME|MODULE:FUNCTION",
    help=BENCHMARK_HELP.format(names=", ".join(sorted(oj.benchmarks.BENCHMARKS))),
  )
  p.add_argument(
    "--agents",
    default="optaug,optdual,optprimaldual",
    type=cli.agent_list,
    help=f"comma-separated subset of: {', '.join(sorted(oj.agents.AGENTS))}"
    " (optcmdp is slow: one HiGHS LP per seed and episode, sequential)",
  )
  p.add_argument(
    "--seeds", type=cli.positive_int, default=32, help="independent runs per agent (vmapped)"
  )
  p.add_argument("--episodes", type=cli.positive_int, default=3000, help="episodes per run (K)")
  p.add_argument(
    "--chunk",
    type=cli.positive_int,
    default=250,
    help="episodes per jitted chunk (a checkpoint after each; more than --episodes: one chunk)",
  )
  p.add_argument(
    "--out",
    default="results/cancellation",
    help="the run's directory (DIR): one run's files and manifest.json; a fresh"
    " run of other settings removes the previous run's outputs first; a"
    " directory of another script is refused",
  )
  p.add_argument(
    "--resume",
    action="store_true",
    help="continue from DIR's checkpoints (same settings only; a refused resume"
    " leaves DIR as it was). Ctrl-C stops a run after its last checkpoint"
    " and prints the command that continues it",
  )
  p.add_argument(
    "--max-chunks",
    type=cli.positive_int,
    default=None,
    help="stop each agent after this many chunks (simulates an interruption);"
    " default: run to the end",
  )
  p.add_argument("--seed", type=cli.seed, default=0, help="seed of the episode keys")
  p.add_argument(
    "--setting",
    default="paper",
    choices=oj.SETTINGS,
    help="what the agents know and their confidence convention: 'paper' (learned"
    " costs, counts per step, all next states possible, log(6SAHK/delta),"
    " delta 0.1) or 'bura2022' (Bura et al. 2022's experiments: known costs"
    " and next-state support, counts pooled over steps, log(6S^2HK/delta),"
    " delta 0.01)",
  )
  p.add_argument(
    "--delta",
    type=cli.open_unit_float,
    default=None,
    help="confidence parameter, 0 < delta < 1; default: the setting's (0.1 paper, 0.01 bura2022)",
  )
  p.add_argument(
    "--bonus-scale",
    type=cli.non_negative_float,
    default=None,
    help="multiplier of every confidence radius (0: no optimism, the empirical"
    " model where visited); default: 0.1 in the paper setting (the tuned"
    " bonus of this script's recorded media_streaming and random-family"
    " runs, docs/results/ms64 and rand64), 1.0 (the published radii) in"
    " bura2022. headline.py's default differs: 1.0 in both settings",
  )
  p.add_argument(
    "--pretrain",
    type=cli.non_negative_int,
    default=300,
    help="OptAug's pre-training episodes K' (its safe baseline), at most --episodes",
  )
  p.add_argument(
    "--eta",
    default=100.0,
    type=cli.parse_eta,
    help="OptAug's eta: a positive float or 'paper' (the paper's schedule, which needs --x64)",
  )
  p.add_argument(
    "--nu", type=cli.open_unit_float, default=0.5, help="nu of the paper's eta schedule, 0 < nu < 1"
  )
  p.add_argument(
    "--fw-iters",
    type=cli.positive_int,
    default=50,
    help="Frank-Wolfe steps (with --inner frank_wolfe)",
  )
  p.add_argument(
    "--step-rule",
    default="linesearch",
    choices=oj.inner.STEP_RULES,
    help="Frank-Wolfe's step (with --inner frank_wolfe)",
  )
  p.add_argument(
    "--inner",
    default="exact",
    choices=("exact", "frank_wolfe"),
    help="OptAug's inner solver: oj.inner.exact() or the paper's Frank-Wolfe"
    " (oj.inner.frank_wolfe, --fw-iters steps of --step-rule)",
  )
  p.add_argument(
    "--unreached",
    default="greedy",
    choices=oj.inner.UNREACHED,
    help="OptAug's policy where its inner solution's occupancy is 0: the"
    " extended DP's action on the gradient there ('greedy'), or uniform"
    " (the choice of results committed before 2026-11-24)",
  )
  p.add_argument(
    "--dual-eta",
    default=None,
    type=cli.parse_eta,
    help="the step of OptDual and its variants ("
    + ", ".join(DUAL_AGENTS[1:])
    + "): a positive float or 'paper'; default: 'paper'",
  )
  p.add_argument("--x64", action="store_true", help="float64 (needed for --eta paper)")
  processes.add_flags(p)
  # random benchmark
  for flag, default, symbol in (
    ("--states", 10, "S"),
    ("--actions", 4, "A"),
    ("--horizon", 10, "H"),
    ("--constraints", 1, "I"),
  ):
    p.add_argument(
      flag,
      type=cli.positive_int,
      default=default,
      help=f"{symbol} of --benchmark random_family (only)"
      + (", at least 2" if symbol == "A" else ""),
    )
  p.add_argument(
    "--problem-seed", type=cli.seed, default=0, help="seed of --benchmark random_family (only)"
  )
  p.add_argument(
    "--grid-size",
    type=cli.positive_int,
    default=None,
    help="side of --benchmark gridworld (only), at least 3 (default 5; sparse"
    " layout above 10: with --setting bura2022 the agents count in its 5"
    " slots per row)",
  )
  return p


_UNSET = object()


def given_flags(parser, argv=None) -> frozenset:
  """The destinations of the options given on the command line (not left at a default):
  `argv` parsed again into a namespace that already holds a marker for each option
  (argparse fills only the attributes a namespace lacks)."""
  probe = argparse.Namespace(
    **{a.dest: _UNSET for a in parser._actions if a.dest != argparse.SUPPRESS}
  )
  parser.parse_known_args(argv, probe)
  return frozenset(k for k, v in vars(probe).items() if v is not _UNSET)


def parse(parser, argv=None):
  """`(args, given)`: the parsed flags, checked together (`check_args`), and the options
  given on the command line (`given_flags`)."""
  args = parser.parse_args(argv)
  given = given_flags(parser, argv)
  return check_args(parser, args, given), given


RANDOM_FAMILY_FLAGS = {
  "states": "--states",
  "actions": "--actions",
  "horizon": "--horizon",
  "constraints": "--constraints",
  "problem_seed": "--problem-seed",
}


def check_args(parser, args, given=frozenset()):
  """Refuses, before any work, flags that cannot work together or that this run would
  ignore (argparse's error: usage and one line naming the flags, exit status 2). `given`:
  the options given on the command line (`given_flags`); a flag left at its default is
  never refused for being irrelevant."""
  processes.check_args(parser, args)
  if args.eta is None and not args.x64:
    parser.error(
      "--eta paper: the paper's schedule reaches eta = 1e7 and more, which"
      " float32 does not resolve; add --x64, or give a constant eta (e.g."
      " --eta 100)"
    )
  if args.episodes > MAX_EPISODES:
    parser.error(f"--episodes {args.episodes}: at most {MAX_EPISODES} (episode counters are int32)")
  tiny = float(np.finfo(np.float32).tiny)
  if args.delta is not None and args.delta < tiny:
    parser.error(
      f"--delta {args.delta:g}: below float32's smallest normal number"
      f" ({tiny:.3g}), where the confidence radii are computed; give a larger"
      " --delta"
    )
  if "optaug" in args.agents and args.pretrain > args.episodes:
    default = "" if "pretrain" in given else " (its default)"
    parser.error(
      f"--pretrain {args.pretrain}{default} must be at most --episodes"
      f" {args.episodes}: OptAug plays its safe baseline for the first --pretrain"
      f" episodes of its run; give --pretrain {args.episodes // 10} (a tenth of"
      " the run) or fewer, or more --episodes"
    )
  benchmark = args.benchmark
  if benchmark != "random_family":
    extra = [flag for dest, flag in RANDOM_FAMILY_FLAGS.items() if dest in given]
    if extra:
      them = " ".join(extra)
      parser.error(
        f"{them}: {'these flags describe' if len(extra) > 1 else 'it describes'}"
        f" --benchmark random_family only, and this run's is --benchmark"
        f" {benchmark}; drop {them}, or choose --benchmark random_family"
      )
  elif args.actions < 2:
    parser.error(
      f"--actions {args.actions}: --benchmark random_family needs at least 2"
      " actions (with one, the thresholds equal the only policy's values: no"
      " strictly feasible baseline)"
    )
  if benchmark != "gridworld" and "grid_size" in given:
    parser.error(
      f"--grid-size {args.grid_size}: it describes --benchmark gridworld only, and"
      f" this run's is --benchmark {benchmark}; drop --grid-size, or choose"
      " --benchmark gridworld"
    )
  lp_agents = [a for a in args.agents if a in LP_AGENTS]
  if (
    benchmark == "gridworld"
    and (args.grid_size or 5) > 10
    and args.setting == "bura2022"
    and lp_agents
  ):
    parser.error(
      f"--agents {','.join(lp_agents)} with --setting bura2022 and --grid-size"
      f" {args.grid_size}: the gridworld above size 10 has the sparse layout, whose"
      " support these agents' LPs (H*S*A*S' variables) cannot take; choose"
      " --grid-size 10 or less, --setting paper, or other --agents"
    )
  if benchmark == "gridworld" and args.grid_size is not None and args.grid_size < 3:
    parser.error(
      f"--grid-size {args.grid_size}: the gridworld needs a side of at least 3"
      " (its hazards leave the start and the goal free only from size 3)"
    )
  if is_benchmark_spec(benchmark):
    try:
      benchmark_function(benchmark)
    except cli.UsageError as e:
      parser.error(str(e))
  return args


LP_AGENTS = ("optcmdp", "dope", "optpess_lp")  # dense LPs: no sparse support (bura2022)


MAX_EPISODES = 2**31 - 1  # the library's episode counters (oj numerics.MAX_EPISODES)


def resolve_defaults(args):
  """Fills the setting-dependent defaults (`--delta`, `--bonus-scale`) in place."""
  if args.bonus_scale is None:
    args.bonus_scale = DEFAULT_BONUS_SCALE[args.setting]
  if args.delta is None:
    args.delta = oj.Setting(log_factor=args.setting).resolved_delta
  return args


# An option's name in the library's errors (`name: ...`) -> the flag that sets it.
LIBRARY_OPTIONS = {
  "num_episodes": "--episodes",
  "pretrain_episodes": "--pretrain",
  "delta": "--delta",
  "bonus_scale": "--bonus-scale",
  "nu": "--nu",
  "inner": "--inner",
  "num_iters": "--fw-iters",
  "step_rule": "--step-rule",
  "unreached": "--unreached",
  "setting": "--setting",
  "setting.support": "--setting",
  "safe_policy": "--benchmark",
  "slack": "--benchmark",
}


def _library_refused(context: str, error: ValueError, agent: str | None = None):
  """A `cli.UsageError` for a ValueError the library raised on the run's flags: `context`,
  the flag behind the library's argument name where known, and its message."""
  message = str(error)
  name = message.split(":", 1)[0].strip()
  flag = LIBRARY_OPTIONS.get(name)
  if name == "eta" and agent is not None:
    flag = "--eta" if agent == "optaug" else "--dual-eta"
  which = f" {flag}" if flag else ""
  return cli.UsageError(f"{context}: the library refuses{which or ' this run'} ({message})")


def setup(args, script: str, outputs):
  """Config, record (config.json's content), problem, LP optimum, seed keys, agents and the
  checked output directory (`result_files.ResultDir`) of a run. Writes nothing: the caller
  verifies its checkpoints, then writes inside `run_dir.running()`. Shared with
  `headline.py`.

  Raises `cli.UsageError` naming the flags when the library refuses the problem, its LP or
  an agent's options (the scripts' `cli.main_guard` prints it as one line, exit status 2),
  and `result_files.ResultDirError` for a directory this run may not use."""
  if args.x64:
    jax.config.update("jax_enable_x64", True)
  processes.initialize(args)  # before any JAX computation
  cli.RUN.start(None)
  bench = build_problem(args)  # before the directory's check: its digest is a setting
  # Neither the processes (same numbers on any number: `processes`) nor the paths count.
  ignored = {"resume", "max_chunks", "out", *processes.FLAGS}
  if args.batch_size is None:  # the directories of runs before --batch-size stay valid
    ignored.add("batch_size")
  if args.benchmark != "random_family":  # the size flags describe the random family only
    ignored |= {"states", "actions", "horizon", "constraints", "problem_seed"}
  if args.benchmark != "gridworld" or args.grid_size is None:
    ignored |= {"grid_size"}
  config = {k: v for k, v in vars(args).items() if k not in ignored}
  config.update(
    agents=",".join(args.agents),
    eta=cli.eta_flag(args.eta),
    dual_eta=cli.eta_flag(args.dual_eta),
    problem_digest=problem_digest(bench),
  )
  run_dir = result_files.ResultDir(
    args.out, script, config, outputs, resume=args.resume, writer=processes.writes()
  ).check()
  cli.RUN.start(args.out)
  cmdp = bench.cmdp
  try:
    lp = oj.solve_lp(cmdp)
  except ValueError as e:
    raise _library_refused(f"--benchmark {args.benchmark}: its LP", e) from e
  record = result_files.run_config(config, bench, lp)
  record["script"] = script
  record["seed_keys"] = f"jax.random.split(PRNGKey({args.seed}), {args.seeds})"
  try:
    setting = oj.named_setting(args.setting, cmdp)
  except ValueError as e:
    raise _library_refused(f"--setting {args.setting} with --benchmark {args.benchmark}", e) from e
  try:
    record["setting"] = dataclasses.replace(setting, delta=args.delta).describe()
  except ValueError as e:
    raise _library_refused(f"--setting {args.setting} --delta {args.delta:g}", e) from e
  print(
    f"{args.benchmark} ({args.setting} setting): S={cmdp.num_states} A={cmdp.num_actions}"
    f" H={cmdp.horizon} I={cmdp.num_constraints}, V* = {lp.value:.4f}, alpha ="
    f" {np.round(np.asarray(cmdp.thresholds), 4)}, safe slack = {bench.slack:.4f}"
  )
  keys = jax.random.split(jax.random.PRNGKey(args.seed), args.seeds)
  agents = {}
  for name in args.agents:
    try:
      agents.update(
        make_agents([name], bench, num_episodes=args.episodes, options=agent_options(args))
      )
    except ValueError as e:
      raise _library_refused(f"--agents {name}", e, agent=name) from e
  return config, record, bench, lp, keys, agents, run_dir


def started_agents(args, config, record, agents, start):
  """`{name: (checkpoint, identity, start(name, agent, checkpoint, identity))}` for every
  agent, before any runs: a refused checkpoint stops the run with nothing written."""
  out = {}
  for name, agent in agents.items():
    # What determines the numbers: every argument but the paths, the agent, the versions.
    identity = result_files.agent_identity(config, name, record)
    checkpoint = os.path.join(args.out, f"checkpoint_{name}.npz")
    out[name] = checkpoint, identity, start(name, agent, checkpoint, identity)
    done = out[name][2][0]  # a verified checkpoint's episodes (0: none)
    if done:
      cli.RUN.checkpoint(name, done, args.episodes)
  return out
