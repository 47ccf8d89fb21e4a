"""Cancellation of errors, measured: strong vs weak regrets of OptAug-CMDP and the baselines.

Runs every agent vmapped over seeds, episodes in jitted chunks, with a progress line and a
checkpoint after every chunk (`--resume` continues an interrupted run; the result equals an
uninterrupted run bit for bit). Writes DIR/config.json, DIR/results.npz, DIR/summary.json,
figures, and prints a summary table.

The output directory holds one run, never a mix (see
`optaug_jax.experiment.result_files.ResultDir`): every file is written atomically (a
temporary file renamed over it: a full disk or a kill leaves the previous file, never half
of one), and DIR/manifest.json names the script, its settings, the files written and a
status: "running", "incomplete" (stopped by --max-chunks, or failed) or "complete" once
every output is written; result_files.load_results refuses a directory that is not
complete. All checkpoints are verified before anything is written, so a refused --resume
leaves DIR exactly as it was; --resume refuses a directory of other settings. A fresh run
(no --resume) removes the previous run's checkpoints and, when its settings differed, the
previous run's outputs, before it writes anything. Neither writes into a directory holding
another script's outputs (e.g. headline.py's): choose another --out.

Defaults: media_streaming, the paper setting, OptAug, OptDual and OptPrimalDual, 32 seeds x
3000 episodes, --bonus-scale 0.1 in the paper setting (the tuned bonus of the recorded
media_streaming and random-family runs, docs/results/ms64 and rand64) and 1.0 (the
published radii) in bura2022. headline.py shares every other flag but defaults to 1.0 in
both settings (the paper's own radii: its main experiment tests the claim without a tuned
bonus), factored, OptAug and OptDual, 1e5 episodes.

Your own CMDP: --benchmark MODULE:FUNCTION or path/to/file.py:FUNCTION. FUNCTION() is
called with no arguments and returns an oj.benchmarks.Benchmark, an oj.CMDP (its baseline:
oj.safest_policy) or a tuple (cmdp, safe_policy); the CMDP is converted to the run's float
dtype and checked (oj.validate_cmdp), the baseline must be strictly feasible
(oj.check_safe_policy). The spec and a digest of the problem's arrays are part of the run's
settings (config.json): --resume refuses another function, or one whose CMDP changed.

Flags are checked together before any work: a mistake ends with argparse's usage and one
line naming the flags (exit status 2); so does what the library refuses while the run is
set up (the problem, an agent's options), and a refused --resume, in one line `SCRIPT.py:
error: ...` (exit status 2). An output directory that cannot be written, or a full disk,
ends with one line naming the file and the fault (exit status 1); Ctrl-C with one line
saying which checkpoints are saved and the command that continues the run (exit status
130). No traceback for any of these (OPTAUG_TRACEBACK=1 shows it).

  python experiments/cancellation.py       # media_streaming, 40 s on 2 idle cores (2026-11-24)
  python experiments/cancellation.py --benchmark random_family --agents optaug,optdual --seeds 64 \\
      --episodes 5000 --out results/random
  python experiments/cancellation.py --out results/ms --resume  # continue an interrupted run
  python experiments/cancellation.py --benchmark my_cmdps:corridor --out results/corridor
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

import optaug_jax as oj

from . import arguments, cli, figures, reductions, runs

OUTPUTS = (
  "config.json",
  "results.npz",
  "summary.json",
  "regrets.png",
  "oscillation.png",
  "multipliers.png",
)
LOG_FIELDS = (
  "cost_value",
  "constraint_values",
  "multipliers",
  "inner_gap",
  "optimistic_cost_value",
  "optimistic_constraint_values",
)


REPORT_EPISODES = (100, 300, 1000, 3000, 10000, 30000, 100000)


def _mean_ci(x):
  x = np.asarray(x, np.float64)
  half = 1.96 * x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0.0
  return {"mean": float(x.mean()), "ci95": [float(x.mean() - half), float(x.mean() + half)]}


def _mean_sd(x):
  x = np.asarray(x, np.float64)
  return {"mean": float(x.mean()), "sd": float(x.std(ddof=1)) if len(x) > 1 else 0.0}


def _slope(curve):
  """Log-log slope of a cumulative regret over the second half of the run."""
  k = np.arange(1, len(curve) + 1)
  half = slice(len(curve) // 2, len(curve))
  y = np.asarray(curve[half], np.float64)
  if np.any(y <= 0):
    return None
  return float(np.polyfit(np.log(k[half]), np.log(y), 1)[0])


def summarise(logs, lp_value, thresholds, seconds):
  """Final regrets (mean and 95% CI), regrets at REPORT_EPISODES (mean, sd), late values."""
  fields: dict[str, Any] = dict.fromkeys(oj.EpisodeLog._fields)  # what `regrets` reads:
  fields.update(
    cost_value=jnp.asarray(logs["cost_value"]),
    constraint_values=jnp.asarray(logs["constraint_values"]),
  )
  log = oj.EpisodeLog(**fields)
  reg = oj.regrets(log, lp_value, thresholds)
  out = {}
  for field in reg._fields:
    curves = np.asarray(getattr(reg, field))
    out[field] = _mean_ci(curves[:, -1])
    if field.startswith("strong"):
      out[f"{field}_slope"] = _slope(curves.mean(0))
  violation = np.max(logs["constraint_values"] - np.asarray(thresholds), axis=-1)
  out["unsafe_fraction"] = {str(e): float(np.mean(violation > e)) for e in reductions.EPSILONS}
  late = violation[:, violation.shape[1] // 2 :]
  out["unsafe_fraction_second_half"] = {
    str(e): float(np.mean(late > e)) for e in reductions.EPSILONS
  }
  out["mean_inner_gap_second_half"] = float(
    np.mean(logs["inner_gap"][:, logs["inner_gap"].shape[1] // 2 :])
  )
  num_episodes = violation.shape[1]
  out["at_episodes"] = {
    str(k): {
      field: {
        "mean": float(np.mean(np.asarray(getattr(reg, field))[:, k - 1])),
        "sd": float(np.std(np.asarray(getattr(reg, field))[:, k - 1], ddof=1))
        if violation.shape[0] > 1
        else 0.0,
      }
      for field in ("absolute_cost", "strong_constraint", "strong_cost")
    }
    for k in REPORT_EPISODES
    if k <= num_episodes
  }
  tail = slice(num_episodes - max(1, num_episodes // 10), num_episodes)
  out["late_values"] = {  # mean over the last tenth of the episodes, then over seeds
    "episodes": [tail.start + 1, num_episodes],
    "cost_value": _mean_sd(logs["cost_value"][:, tail].mean(1)),
    "constraint_values": [
      _mean_sd(logs["constraint_values"][:, tail, i].mean(1))
      for i in range(logs["constraint_values"].shape[-1])
    ],
  }
  out["seconds"] = seconds
  return out, {f: np.asarray(getattr(reg, f)) for f in reg._fields}


SUMMARY_COLUMNS = {
  "strong_cost": "sum_k [V^pi_k(c) - V*]_+ at K: mean over seeds and 95% interval",
  "weak_cost": "sum_k (V^pi_k(c) - V*) at K (signed: below V* counts negative)",
  "absolute_cost": "sum_k |V^pi_k(c) - V*| at K (Bura et al. 2022's objective regret)",
  "strong_constraint": "max_i sum_k [V^pi_k(d_i) - alpha_i]_+ at K",
  "weak_constraint": "max_i sum_k (V^pi_k(d_i) - alpha_i) at K (signed)",
  "*_slope": "log-log slope of the seed-mean cumulative regret over the second half of the"
  " run (1 = linear growth; a constant per-episode regret can read lower when the"
  " first half's regret is large: see headline.py's fits for a better test)",
  "unsafe_fraction": "fraction of (seed, episode) pairs with max_i (V(d_i) - alpha_i) > eps",
  "unsafe_fraction_second_half": "the same over the second half of the episodes",
  "mean_inner_gap_second_half": "mean certificate of OptAug's inner solve, second half",
  "at_episodes": "regrets at k = 100, 300, 1000, ...: mean and sd over seeds",
  "late_values": "V(c) and V(d_i) averaged over the last tenth of the episodes, then mean"
  " and sd over seeds",
  "seconds": "wall time of the agent's run (compile and checkpoints included)",
}


def plot(curves, logs, thresholds, run_dir, title=""):
  """regrets.png, oscillation.png and multipliers.png, saved in `run_dir`; returns
  `{file name: Figure}`. Regret bands are 95% intervals over seeds (a fill with an edge);
  where one is thinner on screen than its line, its legend label states the final
  interval."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  from matplotlib.colors import to_rgba

  fig, axes = plt.subplots(2, 2, figsize=(12, 8))
  bands: dict[Any, list] = {ax: [] for ax in axes.ravel()}
  for i, (name, reg) in enumerate(curves.items()):
    for ax, field in zip(
      axes.ravel(), ["strong_cost", "weak_cost", "strong_constraint", "weak_constraint"]
    ):
      c = reg[field]
      mean = c.mean(0)
      half = (
        1.96 * c.std(0, ddof=1) / np.sqrt(c.shape[0]) if c.shape[0] > 1 else np.zeros_like(mean)
      )
      k = np.arange(1, c.shape[1] + 1)
      bands[ax].append(
        figures.mean_with_band(ax, k, mean, mean - half, mean + half, color=f"C{i}", label=name)
      )
      ax.set_title(field.replace("_", " ") + " regret (cumulative)")
      ax.set_xlabel("episode k")
      ax.set_ylabel("cumulative regret (mean over seeds, 95% band)")
  for ax in axes.ravel():
    ax.grid(alpha=0.3, lw=0.4)
  fig.suptitle(title)
  fig.tight_layout()
  for ax in axes.ravel():  # layout final: which bands cannot be seen
    figures.label_narrow_bands(ax, bands[ax])
    ax.legend(fontsize=8)
  run_dir.save_figure(fig, "regrets.png", dpi=110)
  plt.close(fig)
  written = {"regrets.png": fig}

  fig, axes = plt.subplots(1, len(logs), figsize=(4.5 * len(logs), 4.0), squeeze=False, sharey=True)
  for ax, (name, lg) in zip(axes[0], logs.items()):
    gap = lg["constraint_values"] - np.asarray(thresholds)  # [seeds, K, I]
    last = slice(max(0, gap.shape[1] - 200), gap.shape[1])
    k = np.arange(gap.shape[1])[last] + 1
    figures.oscillation_panel(ax, k, gap[:, last], f"{name}: last {k.size} episodes")
  fig.suptitle(title)
  fig.tight_layout()
  run_dir.save_figure(fig, "oscillation.png", dpi=110)
  plt.close(fig)
  written["oscillation.png"] = fig

  num_constraints = next(iter(logs.values()))["multipliers"].shape[-1]
  fig, axes = plt.subplots(1, num_constraints, figsize=(6 * num_constraints, 3.8), squeeze=False)
  for i, ax in enumerate(axes[0]):
    for j, (name, lg) in enumerate(logs.items()):
      m = lg["multipliers"][..., i]
      k = np.arange(1, m.shape[1] + 1)
      color = f"C{j}"
      ax.plot(k, np.median(m, 0), label=name, color=color, zorder=2)
      ax.fill_between(
        k,
        np.percentile(m, 10, 0),
        np.percentile(m, 90, 0),
        zorder=1,
        facecolor=to_rgba(color, figures.BAND_FACE_ALPHA),
        edgecolor=to_rgba(color, figures.BAND_EDGE_ALPHA),
        linewidth=0.7,
      )
    ax.set_xlabel("episode k")
    ax.set_ylabel(f"multiplier lambda_{i + 1} (median, 10-90% band)")
    ax.grid(alpha=0.3, lw=0.4)
    ax.legend(fontsize=8)
  fig.suptitle(title)
  fig.tight_layout()
  run_dir.save_figure(fig, "multipliers.png", dpi=110)
  plt.close(fig)
  written["multipliers.png"] = fig
  return written


def parse_args(argv=None):
  return arguments.parse(arguments.build_parser(__doc__, "cancellation.py"), argv)[0]


@cli.raises_usage_errors
def main(argv=None):
  args = arguments.resolve_defaults(parse_args(argv))
  config, record, bench, lp, keys, agents, run_dir = runs.setup(args, "cancellation", OUTPUTS)
  cmdp = bench.cmdp

  def reduction():
    return reductions.FullLogs(LOG_FIELDS, keys.shape[0])

  starts = runs.started_agents(args, config, record, agents, cmdp, keys, reduction)
  logs, curves, summary = {}, {}, {}
  with run_dir.running():
    run_dir.write_json("config.json", record)
    for name, agent in agents.items():
      result, seconds = runs.run_agent(name, agent, cmdp, keys, args, starts.pop(name))
      if result is None:
        return None
      logs[name] = result
      summary[name], curves[name] = summarise(result, lp.value, cmdp.thresholds, seconds)
    run_dir.write_npz(
      "results.npz", {f"{n}/{f}": v for n, lg in logs.items() for f, v in lg.items()}
    )
    run_dir.write_json(
      "summary.json",
      {"columns": SUMMARY_COLUMNS, "agents": summary, "agent_options": record["agent_options"]},
    )
    plot(curves, logs, cmdp.thresholds, run_dir, arguments.run_title(args))
    run_dir.complete()
  print_table(summary, args)
  return summary


def print_table(summary, args):
  print(
    f"\nK = {args.episodes} episodes, {args.seeds} seeds; regrets: mean [95% CI];"
    " slope: log-log over the second half"
  )
  head = (
    f"{'agent':13s} {'strong cost':>22s} {'weak cost':>22s} {'strong constr':>22s}"
    f" {'weak constr':>22s} {'slope c':>7s} {'slope d':>7s}"
    + "".join(f" {'>' + str(e):>6s}" for e in reductions.EPSILONS)
    + f" {'time':>7s}"
  )
  print(head)
  fmt = lambda d: f"{d['mean']:8.1f} [{d['ci95'][0]:6.1f},{d['ci95'][1]:6.1f}]"
  sl = lambda x: "   n/a" if x is None else f"{x:7.2f}"
  for name, s in summary.items():
    print(
      f"{name:13s} {fmt(s['strong_cost']):>22s} {fmt(s['weak_cost']):>22s}"
      f" {fmt(s['strong_constraint']):>22s} {fmt(s['weak_constraint']):>22s}"
      f" {sl(s['strong_cost_slope'])} {sl(s['strong_constraint_slope'])}"
      + "".join(f" {s['unsafe_fraction'][str(e)]:6.3f}" for e in reductions.EPSILONS)
      + f" {s['seconds']:6.0f}s"
    )
  print("columns >eps: fraction of (seed, episode) pairs whose constraint violation exceeds eps")
