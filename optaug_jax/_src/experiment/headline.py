"""The headline result: long runs over many seeds, against the theorem's prediction.

The theory: OptAug-CMDP's per-episode constraint violation and cost gap shrink with the
estimation error (like 1/sqrt(k)) and do not oscillate; a Lagrangian method with a plain
dual step (OptDual-CMDP) keeps oscillating, so its strong regrets grow linearly. This
script runs agents vmapped over seeds for many episodes with memory independent of the run
length: each chunk's per-episode values are reduced on the host to per-seed running totals
and to values at log-spaced "trace" episodes (plus the last `--tail` episodes in full).
Checkpoints (`--resume`) carry the run's identity and a digest, as in cancellation.py.

Writes DIR/config.json, DIR/trace.npz, DIR/summary.json (with a "columns" entry saying
what each field is), DIR/headline.png and DIR/oscillation.png, and prints a table.

DIR holds one run, as in cancellation.py: every file is written atomically, and
DIR/manifest.json says which script and settings wrote which files, with a status
("running", "incomplete", "complete") that result_files.load_results checks. All checkpoints
are verified before anything is written (a refused --resume leaves DIR as it was); a fresh
run removes the previous run's checkpoints and, for other settings, its outputs; a
directory of another script (e.g. cancellation.py's) is refused: choose another --out.

Defaults: the README's main experiment (factored, the paper setting, OptAug and OptDual, 32
seeds x 1e5 episodes) at the paper's own radii: --bonus-scale 1.0 in both settings, so that
the claim is tested without a tuned bonus. cancellation.py shares every other flag but
defaults to --bonus-scale 0.1 in the paper setting (the tuned bonus of its recorded
media_streaming and random-family runs, docs/results/ms64 and rand64), media_streaming,
3000 episodes and OptPrimalDual too.

Your own CMDP (--benchmark MODULE:FUNCTION or path/to/file.py:FUNCTION), the checks of the
flags and the exit statuses (2: a mistake or a refused --resume; 1: an unwritable
directory or a full disk; 130: Ctrl-C, no traceback for any): as in cancellation.py (its
docstring, and README.md, "Experiments").

  python experiments/headline.py     # the main experiment: factored, paper radii, OptAug and
                                     # OptDual, 32 seeds x 1e5 episodes (see README.md)
  python experiments/headline.py --benchmark media_streaming --bonus-scale 0.1 --seeds 64 \\
      --agents optaug,optdual,optdual_optimistic,pid_lagrangian,nupi_lagrangian \\
      --out results/headline_ms          # docs/results/headline/media_streaming (56 min)
  python experiments/headline.py --benchmark my_cmdps.py:corridor --out results/corridor
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import arguments, cli, figures, reductions, runs
from .fits import fit_regret

OUTPUTS = ("config.json", "trace.npz", "summary.json", "headline.png", "oscillation.png")
COLUMNS = {
  "episodes": "trace episodes t_j (1-based, log-spaced, always including K/2, 9K/10, K)",
  "window_violation": "mean over the episodes (t_{j-1}, t_j] of max_i (V^pi_k(d_i) - alpha_i):"
  " mean over seeds and 95% interval (normal, over seeds)",
  "window_positive_violation": "as window_violation, of [max_i (V^pi_k(d_i) - alpha_i)]_+",
  "window_cost_gap": "as window_violation, of V^pi_k(c) - V*",
  "window_unsafe": "fraction of (seed, episode) pairs in (t_{j-1}, t_j] with max_i violation"
  " > eps, per eps",
  "late": "the same means over the last tenth of the episodes (9K/10, K]",
  "fit": "least-squares fit of the seed-mean cumulative regret R(t_j) = a + b sqrt(t) + c t"
  " over the trace episodes t >= max(K/100, the end of pre-training + 1); c95: 95% bootstrap"
  " interval of c over seeds (1000 resamples); verdict: 'linear' (c95 above 0 and c t at"
  " least a quarter of the fitted growth), 'bending' (c95 below 0: still curving over),"
  " 'sublinear' (c95 holds 0, a small linear part, or a c that is zero to rounding: c t below"
  " ROUNDING_SHARE = 1e-8 of the fitted growth) or 'undetermined' (the fit spans less"
  " than MIN_FIT_SPAN = 20x in episodes: too short to tell a linear term from a bending"
  " one); reading: the verdict in words",
  "final": "cumulative regrets at K: mean over seeds and 95% interval",
  "multipliers_median": "median over seeds of lambda_i at the trace episodes, per constraint",
  "seconds": "wall time of the agent's run (compile included)",
}


def _mean_ci(x, axis=0):
  x = np.asarray(x, np.float64)
  mean = x.mean(axis)
  half = 1.96 * x.std(axis, ddof=1) / np.sqrt(x.shape[axis]) if x.shape[axis] > 1 else 0 * mean
  return mean, mean - half, mean + half


def _as_dict(mean, lo, hi):
  return {
    "mean": np.asarray(mean).tolist(),
    "ci95": [np.asarray(lo).tolist(), np.asarray(hi).tolist()],
  }


def windows(rec, trace, field, column=0):
  """Per-seed means over the windows (t_{j-1}, t_j] of a per-episode quantity `field`."""
  cum = rec[f"trace_{field}"][..., column]
  lengths = np.diff(np.concatenate([[0], trace]))
  return np.diff(np.concatenate([np.zeros((cum.shape[0], 1)), cum], 1), axis=1) / lengths


def summarise(rec, trace, num_episodes, seconds):
  rng = np.random.default_rng(0)
  out = {"episodes": trace.tolist()}
  # Windows use the per-episode worst constraint; the paper's constraint regrets are the
  # max over constraints of the per-constraint sums.
  viol_w = windows(rec, trace, "worst_violation")
  pos_w = windows(rec, trace, "worst_positive_violation")
  gap_w = windows(rec, trace, "weak_cost")
  out["window_violation"] = _as_dict(*_mean_ci(viol_w))
  out["window_positive_violation"] = _as_dict(*_mean_ci(pos_w))
  out["window_cost_gap"] = _as_dict(*_mean_ci(gap_w))
  unsafe = {
    str(e): windows(rec, trace, "unsafe", j).mean(0).tolist()
    for j, e in enumerate(reductions.EPSILONS)
  }
  out["window_unsafe"] = unsafe
  late_start = int(np.searchsorted(trace, (9 * num_episodes) // 10))
  span = num_episodes - trace[late_start]

  def late(field, column=0):
    cum = rec[f"trace_{field}"][..., column]
    return _as_dict(*_mean_ci((cum[:, -1] - cum[:, late_start]) / max(span, 1)))

  out["late"] = {
    "episodes": [int(trace[late_start]) + 1, num_episodes],
    "violation": late("worst_violation"),
    "positive_violation": late("worst_positive_violation"),
    "cost_gap": late("weak_cost"),
    "unsafe": {str(e): late("unsafe", j)["mean"] for j, e in enumerate(reductions.EPSILONS)},
  }
  pretraining = int(np.max(rec["total_pretraining"])) if "total_pretraining" in rec else 0
  out["pretraining_episodes"] = pretraining
  out["fit"] = {
    f: fit_regret(rec[f"trace_{f}"].max(-1), trace, num_episodes, rng, pretraining)
    for f in ("strong_constraint", "strong_cost", "absolute_cost")
  }
  out["final"] = {
    f: _as_dict(*_mean_ci(rec[f"total_{f}"].max(-1)))
    for f in ("strong_constraint", "weak_constraint", "strong_cost", "weak_cost", "absolute_cost")
  }
  out["multipliers_median"] = np.median(rec["trace_multipliers"], 0).T.tolist()
  out["seconds"] = seconds
  return out


def plot(summaries, records, trace, thresholds, run_dir, title):
  """headline.png and oscillation.png, saved in `run_dir`; returns `{file name: Figure}`.

  Bands are 95% intervals over seeds (a fill with an edge); where one is thinner on screen
  than its line, its legend label states the last point's interval. The dashed fits of the
  cumulative regret are drawn above the data, darker and thicker."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(2, 3, figsize=(16, 9))
  bands: dict[Any, list] = {ax: [] for ax in axes.ravel()}
  num_constraints = len(np.asarray(thresholds))
  for i, (name, s) in enumerate(summaries.items()):
    _draw_agent(axes, bands, trace, name, s, records[name], f"C{i}", num_constraints)
  _draw_pretraining_and_reference(axes, summaries, trace)
  labels = _label_axes(axes)
  fig.suptitle(title + " (bands: 95% interval over seeds)")
  fig.tight_layout()
  for ax, _, _ in labels:  # scales and layout final: which bands cannot be seen
    figures.label_narrow_bands(ax, bands[ax])
    ax.legend(fontsize=8)
  run_dir.save_figure(fig, "headline.png", dpi=110)
  plt.close(fig)
  written = {"headline.png": fig}
  written["oscillation.png"] = _oscillation(plt, records, trace, thresholds, run_dir, title)
  return written


def _draw_agent(axes, bands, t, name, s, record, c, num_constraints) -> None:
  """One agent's curves in the six panels: its windows' violations and cost gap, its share
  of unsafe seed-episodes, its cumulative regret with the fit, its multipliers."""
  for ax, key in (
    (axes[0, 0], "window_violation"),
    (axes[0, 1], "window_positive_violation"),
    (axes[0, 2], "window_cost_gap"),
  ):
    mean, (lo, hi) = np.array(s[key]["mean"]), map(np.array, s[key]["ci95"])
    bands[ax].append(figures.mean_with_band(ax, t, mean, lo, hi, color=c, label=name))
  axes[1, 0].plot(t, s["window_unsafe"]["0.05"], color=c, label=name)
  cum = _mean_ci(record["trace_strong_constraint"].max(-1))
  bands[axes[1, 1]].append(figures.mean_with_band(axes[1, 1], t, *cum, color=c, label=name))
  fit = s["fit"]["strong_constraint"]
  tt = t[t >= fit["fit_from_episode"]].astype(float)
  verdict = fit.get("verdict", "")
  figures.fit_line(
    axes[1, 1],
    tt,
    fit["a"] + fit["b"] * np.sqrt(tt) + fit["c"] * tt,
    color=c,
    label=f"{name} fit: too short to tell (c = {fit['c']:.2g})"
    if verdict == "undetermined"
    else f"{name} fit, c = {fit['c']:.3g} ({verdict})",
  )
  for i in range(num_constraints):
    med = np.median(record["trace_multipliers"][..., i], 0)
    axes[1, 2].plot(
      t,
      med,
      color=c,
      ls=["-", ":", "-."][i % 3],
      label=name if num_constraints == 1 else f"{name}, lambda_{i + 1}",
    )


def _draw_pretraining_and_reference(axes, summaries, t) -> None:
  """The pre-training phase shaded in every panel, the `1/sqrt(k)` reference line."""
  pretrained = {n: s.get("pretraining_episodes", 0) for n, s in summaries.items()}
  pretraining = max(pretrained.values())
  if pretraining:  # the phase in which the baseline is played, shaded in every panel
    for ax in axes.ravel():
      ax.axvspan(0.8, pretraining + 0.5, color="0.92", zorder=0)
    who = ", ".join(n for n, k in pretrained.items() if k)
    axes[0, 0].plot([], [], color="0.85", lw=6, label=f"pre-training of {who} (1..{pretraining})")
  ref_name = next(iter(summaries))
  pos = np.array(summaries[ref_name]["window_positive_violation"]["mean"])
  anchor = np.searchsorted(t, max(10, t[-1] // 100))
  if anchor < len(t) and pos[anchor] > 0:
    axes[0, 1].plot(
      t[anchor:], pos[anchor] * np.sqrt(t[anchor] / t[anchor:]), "k:", label="1/sqrt(k) reference"
    )
  axes[0, 0].axhline(0, color="k", lw=0.6)
  axes[0, 2].axhline(0, color="k", lw=0.6)


def _label_axes(axes):
  """The six panels' labels and scales; `[(ax, label, scale)]`."""
  labels = [
    (axes[0, 0], "mean V(d) - alpha over episode window", "symlog"),
    (axes[0, 1], "mean [V(d) - alpha]+ over episode window", "log"),
    (axes[0, 2], "mean V(c) - V* over episode window", "symlog"),
    (axes[1, 0], "fraction of seed-episodes with violation > 0.05", "linear"),
    (
      axes[1, 1],
      "cumulative strong constraint regret\n(dashed: fit a + b sqrt(K) + c K)",
      "linear",
    ),
    (axes[1, 2], "multiplier lambda (median over seeds)", "linear"),
  ]
  for ax, ylabel, yscale in labels:
    ax.set_xscale("linear" if ax is axes[1, 1] else "log")
    if yscale == "symlog":
      ax.set_yscale("symlog", linthresh=1e-2)
    elif yscale == "log":
      ax.set_yscale("log")
    ax.set_xlabel("episode k" if ax is axes[1, 1] else "episode k (log scale)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both", lw=0.4)
  return labels


def _oscillation(plt, records, trace, thresholds, run_dir, title):
  """oscillation.png: each agent's constraint value against its threshold in the last
  episodes of every seed."""
  cols = min(3, len(records))
  rows = -(-len(records) // cols)
  fig, axes = plt.subplots(
    rows, cols, figsize=(4.8 * cols, 3.6 * rows + 0.4), squeeze=False, sharey=True
  )
  for ax in axes.ravel()[len(records) :]:
    ax.set_visible(False)
  for ax, (name, rec) in zip(axes.ravel(), records.items()):
    gap = rec["tail_constraint_values"] - np.asarray(thresholds)
    k = np.arange(trace[-1] - gap.shape[1], trace[-1]) + 1
    figures.oscillation_panel(ax, k, gap, name)
  fig.suptitle(title + f": last {gap.shape[1]} episodes")
  fig.tight_layout()
  run_dir.save_figure(fig, "oscillation.png", dpi=110)
  plt.close(fig)
  return fig


def print_table(summaries, args):
  print(
    f"\nK = {args.episodes} episodes, {args.seeds} seeds. Late: episodes"
    f" ({(9 * args.episodes) // 10}, {args.episodes}], mean [95% CI] over seeds; c: linear"
    " coefficient of the fit R = a + b sqrt(K) + c K [95% bootstrap interval]"
  )
  print(
    f"{'agent':20s} {'late V(d)-alpha':>24s} {'late V(c)-V*':>24s} {'late >0.05':>10s}"
    f" {'c, strong constr':>26s} {'c, strong cost':>26s} {'time':>7s}"
  )
  f3 = lambda d: f"{d['mean']:8.4f} [{d['ci95'][0]:7.4f},{d['ci95'][1]:7.4f}]"
  fc = lambda d: (
    f"{'too short to tell':>26s}"
    if d.get("verdict") == "undetermined"
    else f"{d['c']:8.4f} [{d['c95'][0]:7.4f},{d['c95'][1]:7.4f}]"
  )
  for name, s in summaries.items():
    print(
      f"{name:20s} {f3(s['late']['violation']):>24s} {f3(s['late']['cost_gap']):>24s}"
      f" {s['late']['unsafe']['0.05']:10.3f} {fc(s['fit']['strong_constraint']):>26s}"
      f" {fc(s['fit']['strong_cost']):>26s} {s['seconds']:6.0f}s"
    )
  print()
  for name, s in summaries.items():
    print(f"{name}: strong constraint regret {s['fit']['strong_constraint']['reading']}")


def parse_args(argv=None):
  p = arguments.build_parser(__doc__, "headline.py")
  # The defaults are the README's main experiment: the claim at the paper's own radii.
  p.set_defaults(
    benchmark="factored",
    agents=["optaug", "optdual"],
    seeds=32,
    episodes=100_000,
    chunk=5000,
    bonus_scale=1.0,
    out="results/headline",
  )
  p._option_string_actions["--bonus-scale"].help = (
    "multiplier of every confidence radius (0: no optimism); default 1.0 in both settings:"
    " the paper's own radii, so that the main experiment tests the claim without a tuned"
    " bonus (cancellation.py's default differs: 0.1 in the paper setting, the tuned bonus"
    " of its recorded runs)"
  )
  p.add_argument(
    "--trace-points",
    type=cli.positive_int,
    default=160,
    help="log-spaced episodes at which values and totals are kept (at most --episodes)",
  )
  p.add_argument(
    "--tail",
    type=cli.positive_int,
    default=300,
    help="last episodes kept in full (at most --episodes; the default is cut to --episodes)",
  )
  args, given = arguments.parse(p, argv)
  for dest, flag in (("tail", "--tail"), ("trace_points", "--trace-points")):
    value = getattr(args, dest)
    if dest in given and value > args.episodes:
      p.error(
        f"{flag} {value} must be at most --episodes {args.episodes}: a run of"
        f" {args.episodes} episodes has no more to keep; give {flag}"
        f" {args.episodes} or fewer"
      )
  return args


@cli.raises_usage_errors
def main(argv=None):
  args = arguments.resolve_defaults(parse_args(argv))
  config, record, bench, lp, keys, agents, run_dir = runs.setup(args, "headline", OUTPUTS)
  cmdp = bench.cmdp
  trace = reductions.trace_episodes(args.episodes, args.trace_points)

  def reduction():
    tail = min(args.tail, args.episodes)
    return reductions.LongRun(keys.shape[0], args.episodes, trace, tail, lp.value, cmdp.thresholds)

  starts = runs.started_agents(args, config, record, agents, cmdp, keys, reduction)
  summaries, records = {}, {}
  with run_dir.running():
    run_dir.write_json("config.json", record)
    for name, agent in agents.items():
      rec, seconds = runs.run_agent(name, agent, cmdp, keys, args, starts.pop(name))
      if rec is None:
        return None
      records[name] = rec
      summaries[name] = summarise(rec, trace, args.episodes, seconds)
    run_dir.write_npz(
      "trace.npz",
      {"trace": trace, **{f"{n}/{k}": v for n, r in records.items() for k, v in r.items()}},
    )
    run_dir.write_json(
      "summary.json",
      {"columns": COLUMNS, "agents": summaries, "agent_options": record["agent_options"]},
    )
    title = arguments.run_title(args)
    plot(summaries, records, trace, cmdp.thresholds, run_dir, title)
    run_dir.complete()
  print_table(summaries, args)
  print(
    f"\nFigures: {args.out}/headline.png, {args.out}/oscillation.png. What to see: the"
    " cumulative strong constraint regret (bottom middle) of a Lagrangian agent whose"
    " errors cancel grows linearly (c > 0 above), OptAug's bends over (c near 0); its"
    " positive violation (top middle) falls like 1/sqrt(k)."
  )
  return summaries
