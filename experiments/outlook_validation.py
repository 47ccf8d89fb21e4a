"""The outlook against finished runs: predicted and measured separation episodes.

For each finished headline.py run directory given (default: the runs recorded in
docs/results and the delivery robot's in docs/results/outlook), runs `experiments/
outlook.py --like RUN_DIR` (the run's own flags; the pilot and perfect-model runs are the
outlook's, the run's files are only read) into OUT/<name>, then tabulates, per Lagrangian
agent, the predicted and measured episodes from which OptAug's mean positive violation is
at most half the agent's and its share of episodes violating by more than 0.05 is 0.1
lower (`oj.analysis.measured_separation` on the run's log-grid windows), and their ratio. A
prediction beyond the run's length and a measured "not within" agree. Writes
OUT/validation.json and OUT/validation.md and prints the table.

  python experiments/outlook_validation.py --out docs/results/outlook
  python experiments/outlook_validation.py --runs docs/results/separation/g11_b0.1 --out /tmp/o
  python experiments/outlook_validation.py --bias-form radii --refit-from docs/results/outlook \
      --out /tmp/radii  # the same pilots, fitted again
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib

import jax

from optaug_jax.experiment import cli, outlook, result_files

RUNS = {
  "factored main": "docs/results/main",
  "factored 6 agents": "docs/results/headline/factored_paper_radii",
  "media_streaming": "docs/results/headline/media_streaming",
  "gridworld 121, 0.1, 30k": "docs/results/size_claim",
  **{
    f"gridworld {side * side}, {bonus}": f"docs/results/separation/g{side}_b{bonus}"
    for side in (11, 15, 20)
    for bonus in ("1", "0.1", "0.01")
  },
  "delivery 216, 0.1": "docs/results/outlook/delivery_b0.1/run",
  "delivery 216, 1": "docs/results/outlook/delivery_b1/run",
}


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
  p.add_argument("--runs", default=None, help="comma-separated run directories (default: above)")
  p.add_argument("--out", default="results/outlook_validation", help="the table's directory")
  p.add_argument("--pilot-episodes", type=cli.positive_int, default=2000)
  p.add_argument("--pilot-seeds", type=cli.positive_int, default=4)
  p.add_argument("--bias-form", default="fluid", help="outlook.py's --bias-form")
  p.add_argument(
    "--refit-from",
    metavar="DIR",
    default=None,
    help="fit and predict again from the pilots of DIR/<name> (an earlier validation's"
    " outlooks, same pilot flags; outlook.py --refit) instead of running them",
  )
  p.add_argument(
    "--reuse",
    action="store_true",
    help="read a run's outlook from OUT/<name>/outlook.json where one is complete (same"
    " pilot flags) instead of computing it again",
  )
  return p.parse_args(argv)


def _outlook(args, run: str, out_dir: str) -> dict:
  """The outlook of `run` as outlook.json holds it: computed, or read with --reuse."""
  path = pathlib.Path(out_dir) / "outlook.json"
  manifest = pathlib.Path(out_dir) / "manifest.json"
  if args.reuse and path.is_file() and manifest.is_file():
    done = json.loads(manifest.read_text()).get("status") == "complete"
    saved = json.loads(path.read_text())
    same = saved["config"]["pilot_episodes"] == args.pilot_episodes and (
      saved["config"]["pilot_seeds"] == args.pilot_seeds
    )
    same = same and saved["config"].get("bias_form", "sqrt") == args.bias_form
    if done and same and saved.get("like") == run:
      return saved
  measured = args.refit_from and os.path.join(args.refit_from, pathlib.Path(out_dir).name)
  refit = ["--refit", measured] if measured else []
  outlook.main(
    [
      "--like",
      run,
      "--out",
      out_dir,
      "--pilot-episodes",
      str(args.pilot_episodes),
      "--pilot-seeds",
      str(args.pilot_seeds),
      "--bias-form",
      args.bias_form,
    ]
    + refit
  )
  jax.clear_caches()
  return json.loads(path.read_text())


def _agreement(predicted, measured, episodes) -> str:
  """`ratio` (predicted / measured), or whether "not within" agrees."""
  if measured is None:
    return "agrees (not within)" if predicted is None or predicted > episodes else "MISS"
  if predicted is None:
    return "MISS (predicted not within)"
  return f"{predicted / measured:.2f}"


def main(argv=None):
  args = parse_args(argv)
  known = {os.path.normpath(d): name for name, d in RUNS.items()}  # a listed run keeps its name
  runs = (
    {known.get(os.path.normpath(r), pathlib.Path(r).name): r for r in args.runs.split(",")}
    if args.runs
    else dict(RUNS)
  )
  rows = []
  for name, run in runs.items():
    if not (pathlib.Path(run) / "summary.json").is_file():
      print(f"{name}: {run} has no summary.json, skipped")
      continue
    out_dir = os.path.join(args.out, name.replace(" ", "_").replace(",", ""))
    saved = _outlook(args, run, out_dir)
    episodes = json.loads((pathlib.Path(run) / "config.json").read_text())["arguments"]["episodes"]
    measured = outlook.measured_in_run(run, saved["predictions"])
    for agent, p in saved["predictions"].items():
      m = measured.get(agent, {})
      predicted = {"positive": p["positive_episode"], "share": p["share_episode"]}
      rows.append(
        {
          "run": name,
          "dir": run,
          "episodes": episodes,
          "agent": agent,
          "bias": [saved["bias"]["a"], saved["bias"]["c"]],
          "swing": [p["swing_low"], p["swing_high"]],
          "swing_share": p["swing_share"],
          "predicted": predicted,
          "measured": m,
          "agreement": {
            key: _agreement(predicted[key], m.get(key), episodes) for key in ("positive", "share")
          },
        }
      )
  fmt = lambda k: "not within" if k is None else f"{k:,}"
  lines = [
    "| run | K | agent | swing (5%-95%) | [v]+: predicted | measured | ratio | share: predicted"
    " | measured | ratio |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in rows:
    lines.append(
      f"| {r['run']} | {r['episodes']:,} | {r['agent']} | {r['swing'][0]:+.3g} to"
      f" {r['swing'][1]:+.3g} | {fmt(r['predicted']['positive'])} |"
      f" {fmt(r['measured'].get('positive'))} | {r['agreement']['positive']} |"
      f" {fmt(r['predicted']['share'])} | {fmt(r['measured'].get('share'))} |"
      f" {r['agreement']['share']} |"
    )
  text = "\n".join(lines)
  os.makedirs(args.out, exist_ok=True)
  record = {"arguments": vars(args), "versions": result_files.versions(), "rows": rows}
  result_files.write_json(os.path.join(args.out, "validation.json"), record, indent=1)
  result_files.write_text(os.path.join(args.out, "validation.md"), text + "\n")
  print(text)
  return rows


if __name__ == "__main__":
  cli.main_guard("outlook_validation", main)
