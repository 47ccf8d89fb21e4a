"""The outlook before a long run: whether, and when, OptAug separates from a Lagrangian agent.

Takes headline.py's flags (the planned run: --benchmark, your own MODULE:FUNCTION included,
--agents, --episodes, --seeds, --setting, --bonus-scale, --eta, --dual-eta, ...) and
measures on the CMDP as given (its true model is known in simulation) and the agents as
configured (`oj.analysis.outlook`):

- the swing each Lagrangian agent keeps with a perfect model: the agent at its own step,
  planning on the exact model (no sampling), episode after episode: the quantiles of its
  per-episode violation, the share above --threshold, the mean positive violation;
- OptAug's estimation bias as the run goes on: a pilot run (--pilot-episodes x
  --pilot-seeds, vmapped, in chunks of min(250, --pilot-episodes): rounded down to whole
  chunks, the length run recorded and printed as such), its positive violation after
  pre-training fitted as a / sqrt(k) on the pilot's last third, after the pilot the lower
  of that and OptAug's fluid run (its plans on counts at their expectations, from the
  pilot's visits on);
- each agent's cost per seed-episode in its pilot, so the planned run's wall time here;
- the episode from which OptAug's mean positive violation is at most half the Lagrangian
  agent's, and its share of violating episodes 0.1 below, or "not within --up-to".

Writes DIR/outlook.json, DIR/outlook.md and DIR/outlook.png (the bias, its fit, the
Lagrangian swings and the predicted episodes), DIR/pilots.npz (the pilots' and the
perfect-model runs' arrays) and prints the verdicts; each phase's progress (episodes, time
left) goes to stderr.

--like RUN_DIR takes a finished headline.py run's flags (its config.json; flags given here
override) and puts its measured separation episodes (the same criteria on its summary.json
windows) beside the prediction: docs/results/outlook/ validates the outlook this way.

  python experiments/outlook.py --benchmark gridworld --grid-size 11 --setting bura2022 \\
      --bonus-scale 0.1 --episodes 30000 --seeds 16 --out results/outlook_g11
  python experiments/outlook.py --like docs/results/separation/g11_b0.1 --out results/o
  python experiments/outlook.py --benchmark my_cmdps.py:robot --episodes 20000
"""

from __future__ import annotations

import json
import pathlib
import sys

import jax
import numpy as np

import optaug_jax as oj
from optaug_jax._src.outlook_runs import pilot_length

from . import arguments, cli, problems, progress, reductions, result_files, runs

OUTPUTS = ("config.json", "outlook.json", "outlook.md", "outlook.png", "pilots.npz")
# The run flags `--like` takes from a config.json (the rest describe the run's files).
_LIKE_SKIP = {"chunk", "trace_points", "tail", "problem_digest", "x64", "seed"}


def _like_config(run_dir) -> dict:
  """The config.json of the finished run `run_dir` (`--like`), refused in one line
  (`cli.UsageError`) when it is not there or cannot be read."""
  path = pathlib.Path(run_dir) / "config.json"
  if not path.is_file():
    raise cli.UsageError(f"--like {run_dir}: no config.json there (a headline.py run's directory)")
  try:
    config = result_files.read_file(path, "config.json")
  except result_files.ResultDirError as e:
    raise cli.UsageError(f"--like {run_dir}: {e}") from e
  if not isinstance(config, dict) or not isinstance(config.get("arguments"), dict):
    raise cli.UsageError(f"--like {run_dir}: {path} is not a headline.py run's config.json")
  return config


def _like_flags(run_dir: pathlib.Path) -> list[str]:
  """headline.py's flags of the finished run in `run_dir`, from its config.json."""
  config = _like_config(run_dir)
  flags = []
  for key, value in config["arguments"].items():
    if key in _LIKE_SKIP or value is None or value is False:
      continue
    if key == "inner" and value == "auto":  # runs before --inner exact|frank_wolfe: the dual
      value = "exact"  # ("auto" chose the exact dual method for every I and dtype)
    flag = "--" + key.replace("_", "-")
    flags += [flag] if value is True else [flag, str(value)]
  if config["arguments"].get("x64"):
    flags.append("--x64")
  return flags


def parse_args(argv=None):
  argv = list(sys.argv[1:] if argv is None else argv)
  p = arguments.build_parser(__doc__, "outlook.py")
  p.set_defaults(
    benchmark="factored",
    agents=["optaug", "optdual"],
    seeds=32,
    episodes=100_000,
    bonus_scale=1.0,
    out="results/outlook",
  )
  p.add_argument("--like", metavar="RUN_DIR", help="take the flags of a finished headline.py run")
  p.add_argument("--pilot-episodes", type=cli.positive_int, default=2000, help="pilot length")
  p.add_argument("--pilot-seeds", type=cli.positive_int, default=4, help="pilot seeds (vmapped)")
  p.add_argument(
    "--perfect-episodes",
    type=cli.positive_int,
    default=None,
    help="episodes of the perfect-model runs (default min(--episodes, 10^4))",
  )
  p.add_argument(
    "--threshold",
    type=cli.non_negative_float,
    default=0.05,
    help="the violation that counts an episode (a number >= 0)",
  )
  p.add_argument(
    "--up-to", type=cli.positive_int, default=10**6, help="the last episode a prediction considers"
  )
  p.add_argument(
    "--bias-form",
    choices=oj.analysis.BIAS_FORMS,
    default="fluid",
    help="OptAug's bias: 'fluid' (default) a/sqrt(k) fitted on the pilot's last third, after"
    " the pilot the lower of that and OptAug's fluid run (its plans on expected counts);"
    " 'sqrt' the fit alone; 'bernstein' a/sqrt(k) + c/k on the pilot's second half"
    " (docs/results/outlook compares them)",
  )
  p.add_argument(
    "--refit",
    metavar="OUTLOOK_DIR",
    help="fit and predict again (another --bias-form or --up-to) from the pilots and"
    " perfect-model runs of a finished outlook.py run with the same flags otherwise; with"
    " --like RUN_DIR, read that run beside the outlook already measured (nothing measured again)",
  )
  known, _ = p.parse_known_args(argv)
  if known.like:
    argv = _like_flags(pathlib.Path(known.like)) + argv
  args, _ = arguments.parse(p, argv)
  args.chunk = min(250, args.pilot_episodes)
  return args


def _check_like_problem(like: str, bench, record) -> None:
  """Refuses a `--like` run whose problem is not the one built here. Its digest covers the
  baseline's slack too, whose float32 evaluation may round differently under another
  version; then the sizes, thresholds and LP value must agree (to 1e-6)."""
  config = _like_config(like)
  digest = config["arguments"].get("problem_digest")
  if digest is None or digest == problems.problem_digest(bench):
    return
  theirs, mine = config.get("problem", {}), record["problem"]
  same = all(theirs.get(k) == mine[k] for k in ("states", "actions", "horizon", "constraints"))
  same = same and np.allclose(theirs.get("thresholds"), mine["thresholds"], rtol=1e-6)
  same = same and np.isclose(theirs.get("lp_value"), mine["lp_value"], rtol=1e-6)
  if not same:
    raise cli.UsageError(f"--like {like}: its problem differs from the one built here")
  print(
    f"--like {like}: the same CMDP (sizes, thresholds, LP value); its digest differs in the"
    f" baseline's slack (recorded {theirs.get('safe_policy_slack')}, here"
    f" {mine['safe_policy_slack']}: float32 rounding)"
  )


def measured_in_run(like: str | None, predictions) -> dict:
  """The separation episodes of the finished run `like` (a headline.py directory) against
  each of `predictions`' agents it ran, on its log grid (its K/2 and 9K/10 windows merged
  into the next: `oj.analysis.measured_separation`); `{}` without a run."""
  if not like:
    return {}
  path = pathlib.Path(like) / "summary.json"
  if not path.is_file():
    return {}
  try:
    agents = result_files.read_file(path, "summary.json")["agents"]
  except result_files.ResultDirError as e:
    raise cli.UsageError(f"--like {like}: {e}") from e
  except (KeyError, TypeError) as e:
    raise cli.UsageError(f"--like {like}: {path} holds no headline.py summary") from e
  flags = _like_config(like)["arguments"]
  grid = reductions.log_grid(flags["episodes"], flags["trace_points"]).tolist()
  return {
    name: oj.analysis.measured_separation(agents, "optaug", name, windows=grid)
    for name in predictions
    if name in agents and "optaug" in agents
  }


# The flags a refit may change (the rest must be the measured outlook's); `like` too: `--like
# RUN --refit DIR` reads a run beside an outlook already measured, measuring nothing again.
_REFIT_FLAGS = {"bias_form", "up_to", "refit", "out", "resume", "max_chunks", "like"}


def refit_differences(saved: dict, now: dict) -> dict:
  """`{flag: (saved, now)}` of the flags a refit may not change (`_REFIT_FLAGS` aside)."""
  now = json.loads(json.dumps(now, default=str))  # as saved
  keys = sorted(k for k in set(saved) | set(now) if k not in _REFIT_FLAGS)
  return {k: (saved.get(k), now.get(k)) for k in keys if saved.get(k) != now.get(k)}


def load_measurements(directory, arguments_now: dict) -> oj.analysis.Measurements:
  """The measurements of the finished outlook.py run in `directory` (`pilot_arrays` and
  outlook.json), refused unless its flags are `arguments_now`'s but for `_REFIT_FLAGS`."""
  try:  # a damaged file: one line
    files = result_files.load_results(directory, "outlook")
  except result_files.ResultDirError as e:
    raise cli.UsageError(f"--refit {directory}: {e}") from e
  details = refit_differences(files["config.json"]["arguments"], arguments_now)
  if details:
    raise cli.UsageError(f"--refit {directory}: measured with other flags (saved, now): {details}")
  arrays, summary = files["pilots.npz"], files["outlook.json"]
  costs = summary["seconds_per_seed_episode"]
  pilots = {
    name: oj.analysis.Pilot(
      violations=arrays[f"{name}/violations"],
      pretraining=arrays[f"{name}/pretraining"],
      seconds_per_seed_episode=costs[name],
      compile_seconds=float("nan"),
      state=None,
      visits=arrays[f"{name}/visits"].astype(np.float64),
    )
    for name in summary["config"]["agents"]
  }
  swings = {name: arrays[f"{name}/perfect_model_violations"] for name in summary["predictions"]}
  return oj.analysis.Measurements(pilots, swings, costs, summary["config"])


def pilot_arrays(out) -> dict[str, np.ndarray]:
  """What the outlook measured, as arrays (a fit can be made again from them): per agent its
  pilot's violations `[seeds, P]`, pre-training flags `[P]` and mean visits at its end
  `[H, S, A]`, and each perfect-model run's violations `[N]`."""
  arrays = {}
  for name, pilot in out.pilots.items():
    arrays[f"{name}/violations"] = pilot.violations
    arrays[f"{name}/pretraining"] = pilot.pretraining
    arrays[f"{name}/visits"] = pilot.visits.astype(np.float32)
  for name, swing in out.swings.items():
    arrays[f"{name}/perfect_model_violations"] = swing
  return arrays


def _fmt(k) -> str:
  return "not within" if k is None else f"{k:,}"


def pilot_note(out, args, requested: int | None = None) -> str:
  """The pilot that ran (`out.config`: whole chunks), and the request where it differs."""
  ran = out.config["pilot_episodes"]
  asked = (
    f": --pilot-episodes {requested} rounded down to whole chunks of {args.chunk}"
    if requested is not None and requested != ran
    else ""
  )
  return f"pilot {ran} episodes x {out.config['pilot_seeds']} seeds{asked}"


def report(out, args, measured, requested: int | None = None) -> str:
  """The outlook as a Markdown table and the verdicts; `requested`: the --pilot-episodes
  asked for (named where the pilot that ran differs)."""
  free = out.bias.free_exponent  # NaN: fewer than two fitted windows with [v]+ > 0
  free = f"k^{free:.2f}" if np.isfinite(free) else "none (too few windows with [v]+ > 0)"
  lines = [
    f"Outlook: {arguments.run_title(args)}. Bias b(k) = {out.bias.describe()}"
    f" ({pilot_note(out, args, requested)}; a free power law on the fitted windows: {free}).",
    "",
    "| agent | perfect-model swing (5%-95%) | share > thr | mean [v]+ | predicted: [v]+"
    " separates | share separates | measured: [v]+ | share | s per seed-episode | planned run |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for name, p in out.predictions.items():
    m = measured.get(name, {})
    wall = out.wall_seconds(name, args.episodes, args.seeds) + out.wall_seconds(
      "optaug", args.episodes, args.seeds
    )
    lines.append(
      f"| {name} | {p.swing_low:+.3g} to {p.swing_high:+.3g} | {p.swing_share:.2f} |"
      f" {p.swing_positive:.3g} | {_fmt(p.positive_episode)} | {_fmt(p.share_episode)} |"
      f" {_fmt(m.get('positive')) if m else '-'} | {_fmt(m.get('share')) if m else '-'} |"
      f" {out.seconds_per_seed_episode[name]:.2e} | {wall / 60:.1f} min |"
    )
  lines.append("")
  for name, p in out.predictions.items():
    notes = []
    for what, k in (("share", p.share_episode), ("[v]+", p.positive_episode)):
      if k is None:
        continue
      minutes = (
        out.wall_seconds("optaug", k, args.seeds) + out.wall_seconds(name, k, args.seeds)
      ) / 60
      past = f", past this run's {args.episodes:,} episodes" if k > args.episodes else ""
      notes.append(
        f"{what} by episode {k:,}: about {minutes:.1f} min here for {args.seeds} seeds{past}"
      )
    when = f" ({'; '.join(notes)})" if notes else ""
    lines.append(f"- OptAug against {name}: {p.verdict}{when}.")
  return "\n".join(lines)


def plot(out, args, run_dir):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.6))
  b = out.bias
  pilot = pilot_note(out, args)
  ax.plot(b.windows, b.positive, "o", color="C0", label=f"OptAug {pilot}: mean [v]+ per window")
  k = np.geomspace(max(b.from_episode, 1), args.up_to, 200)
  ax.plot(k, b.at(k), "--", color="C0", label=f"bias {b.describe()}")
  if b.curve is not None:
    ax.plot(b.curve.episodes, b.curve.values, ":", color="C0", lw=1, label="OptAug's fluid run")
  ax.axhline(args.threshold, color="k", lw=0.8, ls=":", label=f"threshold {args.threshold:g}")
  for i, (name, p) in enumerate(out.predictions.items()):
    color = f"C{i + 1}"
    ax.axhline(p.swing_positive, color=color, lw=1, label=f"{name}: perfect-model mean [v]+")
    for kk, style in ((p.positive_episode, "-."), (p.share_episode, "-")):
      if kk is not None:
        ax.axvline(kk, color=color, ls=style, lw=1)
    swing = out.swings[name]
    ax2.plot(np.arange(1, len(swing) + 1), swing, lw=0.6, color=color, label=name)
  ax.axvspan(1, b.from_episode, color="0.9", label="pre-training")
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("episode k (vertical: predicted separation, dash-dot [v]+, solid share)")
  ax.set_ylabel("positive violation")
  ax.legend(fontsize=7)
  ax2.axhline(args.threshold, color="k", lw=0.8, ls=":")
  ax2.axhline(0, color="k", lw=0.5)
  ax2.set_xscale("log")
  ax2.set_xlabel("episode k (perfect model: no estimation error)")
  ax2.set_ylabel("V(d) - alpha")
  ax2.legend(fontsize=7)
  fig.suptitle("Outlook: " + arguments.run_title(args))
  fig.tight_layout()
  run_dir.save_figure(fig, "outlook.png", dpi=110)
  plt.close(fig)


@cli.raises_usage_errors
def main(argv=None):
  args = arguments.resolve_defaults(parse_args(argv))
  # The pilot runs whole chunks: its real length is recorded everywhere (config.json, the
  # manifest, outlook.json, outlook.md, the figure), the request named where it differs.
  requested = args.pilot_episodes
  args.pilot_episodes = pilot_length(requested, args.chunk)
  if "optaug" not in args.agents or not set(args.agents) & set(oj.analysis.LAGRANGIAN):
    raise cli.UsageError(
      f"--agents {','.join(args.agents)}: the outlook needs optaug and a Lagrangian agent"
      f" ({', '.join(oj.analysis.LAGRANGIAN)})"
    )
  config, record, bench, lp, keys, agents, run_dir = runs.setup(args, "outlook", OUTPUTS)
  del keys, agents, lp
  if unpredicted := [n for n in args.agents if n not in ("optaug", *oj.analysis.LAGRANGIAN)]:
    print(f"--agents {','.join(unpredicted)}: no prediction (oj.analysis.outlook's are of"
          f" optaug against {', '.join(oj.analysis.LAGRANGIAN)} only)")  # fmt: skip
  if args.like:
    _check_like_problem(args.like, bench, record)
    measured_in_run(args.like, ())  # its summary read before the work: refused now if damaged
  measurements = load_measurements(args.refit, config) if args.refit else None
  if args.pilot_episodes != requested:
    print(
      f"--pilot-episodes {requested}: the pilot runs whole chunks of {args.chunk} episodes:"
      f" {args.pilot_episodes} episodes (recorded as such)"
    )
  with run_dir.running():
    run_dir.write_json("config.json", record)
    print(
      "refitting from " + args.refit
      if measurements is not None
      else f"measuring: perfect-model runs, pilots of {args.pilot_episodes} episodes x"
      f" {args.pilot_seeds} seeds, costs per seed-episode",
      flush=True,
    )
    out = oj.analysis.outlook(
      bench,
      tuple(args.agents),
      key=jax.random.PRNGKey(args.seed),
      num_episodes=args.episodes,
      options=arguments.agent_options(args),
      pilot_episodes=args.pilot_episodes,
      pilot_seeds=args.pilot_seeds,
      perfect_episodes=args.perfect_episodes,
      threshold=args.threshold,
      horizon=args.up_to,
      chunk=args.chunk,
      num_seeds=args.seeds,
      bias_form=args.bias_form,
      measurements=measurements,
      progress=progress.phases(args.pilot_seeds, timing_seeds=min(args.seeds, 256)),  # stderr
    )
    measured = measured_in_run(args.like, out.predictions)
    summary = out.summary()
    summary["measured"] = measured
    summary["like"] = args.like
    summary["agent_options"] = record["agent_options"]
    summary["pilot_episodes_requested"] = requested
    text = report(out, args, measured, requested)
    run_dir.write_json("outlook.json", summary)
    run_dir.write_npz("pilots.npz", pilot_arrays(out))
    run_dir.write_text("outlook.md", text + "\n")
    plot(out, args, run_dir)
    run_dir.complete()
  print(text)
  return out, measured
