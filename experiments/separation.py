"""When does the difference show: OptAug against OptDual over grid sizes and bonus scales.

Runs `experiments/headline.py` (`experiment.headline`) once per cell of a sweep over
the side of `--benchmark gridworld` (S = side^2 states, sparse layout above 10) and the
confidence radii's scale (`--bonus-scale`), in the `bura2022` setting, each cell in its
own directory `DIR/g<side>_b<bonus>`, and tabulates what separates the agents: the share
of late episodes that violate the budget by more than 0.05, the late mean positive
violation, the fitted linear coefficient c of the cumulative strong constraint regret
(`R = a + b sqrt(t) + c t`; c > 0: linear), and the share of violating episodes over the
run's length (the trace windows ending near K/8, K/4, K/2 and K).

DIR holds one sweep: DIR/manifest.json names this script, the sweep's settings, its cells
("parts") and a status ("running", "incomplete", "complete"), as each cell's directory
does for its run. A run of another command into a cell (`headline.py --out DIR/g11_b0.1`)
is refused in one line: the sweep's table and manifest would describe the cell it replaced.
With `--resume` the sweep continues: every cell from its checkpoints (a finished cell only
re-reads its files); a sweep or a cell of other settings is refused, naming them, with
nothing run or removed. A fresh sweep into DIR refuses a directory that holds another
sweep; `--restart` removes that sweep's table, manifest and cell directories first (and
says which). Ctrl-C ends the sweep with status 130 and "incomplete". The compiled programs
are dropped between cells (long sweeps in one process otherwise reach the kernel's limit
on memory mappings: docs/guides/devices.md).

Writes DIR/separation.json (the arguments, versions and the table) and DIR/separation.md
(the table), and prints the table. Flag errors name this script's flags.

  python experiments/separation.py      # 3 sides x 3 bonus scales, 4 seeds x 8,000 episodes
  python experiments/separation.py --sides 11 --bonus-scales 0.1,0.01 --episodes 2000
"""

from __future__ import annotations

import argparse
import os
import shutil

import jax

import optaug_jax as oj
from optaug_jax.experiment import arguments as script_flags
from optaug_jax.experiment import cli, headline, problems, result_files

# The trace windows reported over the run's length: those ending nearest these fractions of K.
LENGTH_FRACTIONS = (0.125, 0.25, 0.5, 1.0)
VIOLATION = "0.05"  # the violation threshold of the shares (a key of the summaries' "unsafe")


def _list_of(convert, low, words: str):
  """An argparse type: comma-separated values of `convert`, each at least `low`."""

  def parse(text: str) -> list:
    try:
      values = [convert(v) for v in text.split(",") if v]
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected comma-separated {words}, got {text!r}") from None
    if not values or any(v < low for v in values):
      raise argparse.ArgumentTypeError(f"expected {words} of at least {low}, got {text!r}")
    return values

  return parse


def parse_args(argv=None):
  p = cli.ArgumentParser(
    prog="separation.py", description=__doc__, formatter_class=cli.HelpFormatter
  )
  p.add_argument(
    "--sides",
    type=_list_of(int, 3, "gridworld sides"),
    default=[11, 15, 20],
    help="gridworld sides",
  )
  p.add_argument("--bonus-scales", type=_list_of(float, 0.0, "numbers"), default=[1.0, 0.1, 0.01])
  p.add_argument(
    "--agents",
    default="optaug,optdual",
    help="as headline.py's --agents (your own as path/to/file.py:FACTORY: "
    + script_flags.AGENT_RULE
    + ")",
  )
  p.add_argument("--seeds", type=cli.positive_int, default=4)
  p.add_argument("--episodes", type=cli.positive_int, default=8000)
  p.add_argument("--chunk", type=cli.positive_int, default=1000)
  p.add_argument("--eta", default="100.0", help="OptAug's eta (headline.py's --eta)")
  p.add_argument(
    "--pretrain", type=cli.positive_int, default=300, help="OptAug's pre-training episodes"
  )
  p.add_argument("--tail", type=cli.positive_int, default=500, help="headline.py's --tail")
  p.add_argument("--out", default="results/separation", help="the sweep's directory (DIR)")
  again = p.add_mutually_exclusive_group()
  again.add_argument(
    "--resume", action="store_true", help="continue the sweep in DIR (same settings only)"
  )
  again.add_argument(
    "--restart",
    action="store_true",
    help="remove the sweep DIR holds (its table, manifest and cells) and start afresh",
  )
  args = p.parse_args(argv)
  # The cells' flags, checked here in this script's words (headline.py would name its own).
  try:
    cli.parse_eta(args.eta)
  except argparse.ArgumentTypeError as e:
    p.error(f"--eta {args.eta}: {e}")
  try:
    labels = [problems.agent_label(name) for name in cli.agent_list(args.agents)]
  except argparse.ArgumentTypeError as e:
    p.error(f"--agents {args.agents}: {e}")
  except cli.UsageError as e:
    p.error(str(e))
  # --eta and --pretrain reach the agents of OptAug's kind only (headline.py refuses a flag
  # that no listed agent takes): a cell is given them when one of its agents takes them.
  args.optaug_flags = {
    flag: any(
      script_flags.agent_kind(n) == "optaug"
      and (oj.agents.accepts_any_option(n) or option in oj.agents.agent_options(n))
      for n in labels
    )
    for flag, option in (("--eta", "eta"), ("--pretrain", "pretrain_episodes"))
  }
  if args.optaug_flags["--pretrain"] and args.pretrain > args.episodes:
    p.error(f"--pretrain {args.pretrain} must be at most --episodes {args.episodes}")
  for flag, value in (("--tail", args.tail), ("30 trace points", 30)):
    if value > args.episodes:
      p.error(f"{flag} {value} must be at most --episodes {args.episodes}")
  return args


def cell_argv(args, side: int, bonus: float) -> list[str]:
  """headline.py's command line for one cell."""
  return [
    "--benchmark", "gridworld", "--grid-size", str(side), "--setting", "bura2022",
    "--bonus-scale", str(bonus), "--agents", args.agents, "--seeds", str(args.seeds),
    "--episodes", str(args.episodes), "--chunk", str(args.chunk),
    "--trace-points", "30", "--tail", str(args.tail),
    "--out", os.path.join(args.out, f"g{side}_b{bonus:g}"),
  ] + [
    word
    for flag, value in (("--eta", args.eta), ("--pretrain", str(args.pretrain)))
    if getattr(args, "optaug_flags", {}).get(flag, True)
    for word in (flag, value)
  ]  # fmt: skip


def run_cell(argv: list[str], resume: bool) -> dict:
  """The cell's summaries: continued from its directory when `resume` (a cell of other
  settings is refused there, by headline.py's own check), else run afresh."""
  out = argv[argv.index("--out") + 1]
  if resume and result_files.read_manifest(out) is not None:
    return headline.main([*argv, "--resume"])
  return headline.main(argv)


OUTPUTS = ("separation.json", "separation.md")
# The flags that do not change a sweep's numbers.
_NOT_SETTINGS = ("out", "resume", "restart", "optaug_flags")  # optaug_flags: from --agents


def _cells(arguments: dict) -> list[str]:
  """The cell directories (names) of a sweep with `arguments`."""
  return [
    f"g{side}_b{bonus:g}" for side in arguments["sides"] for bonus in arguments["bonus_scales"]
  ]


def sweep_dir(args) -> result_files.ResultDir:
  """DIR as this sweep's `ResultDir`, checked: another script's directory is refused; with
  --resume, a sweep of other settings; without it, any other sweep unless --restart, which
  removes it (its table, manifest and cells) first."""
  arguments = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
  parts = _cells(arguments)  # its manifest lists them: other runs there are refused
  run_dir = result_files.ResultDir(
    args.out, "separation", arguments, OUTPUTS, resume=False, parts=parts
  )
  run_dir.check()  # another script's directory is refused (also with --resume)
  run_dir.resume = args.resume
  previous = run_dir.previous
  table = os.path.join(args.out, "separation.json")
  if previous is None and os.path.exists(table):  # a sweep written before manifests
    saved = result_files.read_file(table, "separation.json")  # damaged: one line
    if not isinstance(saved, dict) or not isinstance(saved.get("arguments", {}), dict):
      raise cli.UsageError(f"{table}: not a table of separation.py; choose another --out")
    previous = {"arguments": saved.get("arguments", {}), "digest": None}
    saved = {k: v for k, v in previous["arguments"].items() if k not in _NOT_SETTINGS}
    if saved == arguments:
      previous["digest"] = run_dir.digest
  if previous is None or previous.get("digest") == run_dir.digest:
    return run_dir
  if args.resume:
    saved = previous.get("arguments") or {}
    differ = {k: (saved.get(k), arguments.get(k)) for k in sorted({*saved, *arguments})}
    differ = {k: v for k, v in differ.items() if v[0] != v[1] and k not in _NOT_SETTINGS}
    raise cli.UsageError(
      f"--resume: {args.out} holds a sweep of other settings (saved, now: {differ or 'versions'});"
      " --resume continues only the same settings: --restart replaces that sweep, or choose"
      " another --out"
    )
  if not args.restart:
    raise cli.UsageError(
      f"{args.out}: holds another sweep (settings {previous.get('arguments')}); a sweep does"
      " not mix its cells and table with another's: --restart removes that sweep first,"
      " --resume continues a sweep of the same settings, or choose another --out"
    )
  old = [os.path.join(args.out, n) for n in _cells(previous.get("arguments") or {})]
  old = [d for d in old if os.path.isdir(d)]
  files = [os.path.join(args.out, n) for n in (*OUTPUTS, result_files.MANIFEST)]
  files = [f for f in files if os.path.exists(f)]
  print(f"--restart: removing the previous sweep in {args.out}: {', '.join(files + old)}")
  for d in old:
    shutil.rmtree(d)
  for f in files:
    os.remove(f)
  return result_files.ResultDir(args.out, "separation", arguments, OUTPUTS, parts=parts).check()


def _window_share(summary: dict, fraction: float, num_episodes: int) -> tuple[int, float]:
  """(end episode, share of violating seed-episodes) of the trace window ending nearest
  `fraction * K`."""
  ends = summary["episodes"]
  j = min(range(len(ends)), key=lambda i: abs(ends[i] - fraction * num_episodes))
  return ends[j], summary["window_unsafe"][VIOLATION][j]


def table_rows(args, cells: dict) -> list[dict]:
  rows = []
  for (side, bonus), summaries in cells.items():
    for agent, s in summaries.items():
      fit = s["fit"]["strong_constraint"]
      rows.append(
        {
          "side": side,
          "states": side * side,
          "bonus_scale": bonus,
          "agent": agent,
          "late_share": s["late"]["unsafe"][VIOLATION],
          "late_positive_violation": s["late"]["positive_violation"]["mean"],
          "late_violation": s["late"]["violation"]["mean"],
          "c_strong_constraint": fit["c"],
          "c95": fit["c95"],
          "final_strong_constraint": s["final"]["strong_constraint"]["mean"],
          "share_over_length": [_window_share(s, f, args.episodes) for f in LENGTH_FRACTIONS],
          "seconds": s["seconds"],
        }
      )
  return rows


def markdown(rows: list[dict]) -> str:
  lengths = " / ".join(f"{end:,}" for end, _ in rows[0]["share_over_length"])
  lines = [
    f"| S | bonus | agent | late share > {VIOLATION} | late [V(d) - alpha]+ | late V(d) - alpha"
    f" | c, strong constraint [95%] | final strong constraint | share > {VIOLATION} at"
    f" {lengths} | s |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in rows:
    shares = " / ".join(f"{share:.2f}" for _, share in r["share_over_length"])
    lines.append(
      f"| {r['states']} | {r['bonus_scale']:g} | {r['agent']} | {r['late_share']:.3f}"
      f" | {r['late_positive_violation']:.4f} | {r['late_violation']:.4f}"
      f" | {r['c_strong_constraint']:.4f} [{r['c95'][0]:.4f}, {r['c95'][1]:.4f}]"
      f" | {r['final_strong_constraint']:,.0f} | {shares} | {r['seconds']:.0f} |"
    )
  return "\n".join(lines) + "\n"


@cli.raises_usage_errors
def main(argv=None):
  args = parse_args(argv)
  run_dir = sweep_dir(args)
  cli.RUN.start(args.out)
  cells = {}
  with run_dir.running():
    for side in args.sides:
      for bonus in args.bonus_scales:
        summaries = run_cell(cell_argv(args, side, bonus), args.resume)
        if summaries is None:  # stopped early: the cell printed how to continue
          return None
        cells[side, bonus] = summaries
        jax.clear_caches()
    rows = table_rows(args, cells)
    record = {"arguments": vars(args), "versions": result_files.versions(), "rows": rows}
    run_dir.write_json("separation.json", record, indent=1)
    text = markdown(rows)
    run_dir.write_text("separation.md", text)
    run_dir.complete()
  print(text)
  return rows


if __name__ == "__main__":
  cli.main_guard("separation", main)
