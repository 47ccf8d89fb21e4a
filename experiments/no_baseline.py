"""Learning without a known safe policy (the paper's open question 3): OptAug with no
baseline (`safe_policy=None`, `K' = 0`) against OptAug with its pre-training and OptCMDP.

Per problem (`--problems`: the binding members of `random_family`, the binding instances
of Kitamura et al.'s random CMDP, `factored`) and agent, `--seeds` seeds vmapped for
`--episodes` episodes (`oj.run`, exact evaluation): the strong regrets `sum_k [V^pi_k(c)
- V*]_+` and `sum_k [V^pi_k(d) - alpha]_+`, the episodes that violate, the largest
violation, and how often the optimistic problem is infeasible: OptCMDP's optimistic LP
(`extras["lp_feasible"]` False: it then plays the safest occupancy of its confidence
set); OptAug's inner problem is a penalty and never infeasible, and the count is that of
its episodes whose optimistic constraint value at the primal step exceeds the threshold
(the multiplier then grows: `[lambda + eta (V~_d - alpha)]_+`). The setting is the
paper's with the radii scaled by 0.1 (`--setting`, `--bonus-scale`: the tuned bonus of the
recorded random-family runs, docs/results/rand64; at the full radii every optimistic agent
plays the unconstrained optimum for thousands of episodes on these problems), OptAug's
`eta` constant (`--eta`), its pre-training `K' = K / 10` with the benchmark's baseline.

  python experiments/no_baseline.py --out results/no_baseline          # ~10 min

Writes DIR/no_baseline.json (the config and, per problem and agent, the per-seed values)
after each pair, atomically; a run of the same config resumes (pairs done are skipped,
whatever the lists of problems and agents: a pair depends on the rest of the config only).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import cli, result_files

OUTPUTS = ("no_baseline.json",)
AGENTS = ("optaug_no_baseline", "optaug", "optcmdp")
PROBLEMS = (
  "factored",
  "random_family:0",
  "random_family:1",
  "random_family:2",
  "kitamura_random:1",
  "kitamura_random:6",
  "kitamura_random:7",
  "kitamura_random:8",
)


def build(problem):
  name, _, seed = problem.partition(":")
  kwargs = {} if not seed else {"seed": int(seed)}
  return oj.benchmarks.make_benchmark(name, **kwargs)


def make_agent(name, bench, args):
  common = dict(setting=oj.named_setting(args.setting, bench.cmdp), bonus_scale=args.bonus_scale)
  if name == "optcmdp":
    return oj.agents.optcmdp(args.episodes, **common)
  if name == "optaug_no_baseline":
    return oj.optaug(args.episodes, None, pretrain_episodes=0, eta=args.eta, **common)
  pretrain = args.episodes // 10
  return oj.optaug(
    args.episodes, bench.safe_policy, pretrain, slack=bench.slack, eta=args.eta, **common
  )


def run_pair(bench, name, args):
  agent = make_agent(name, bench, args)
  cmdp = bench.cmdp
  optimum = oj.solve_lp(cmdp).value
  alpha = float(cmdp.thresholds[0])
  keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(args.seeds, dtype=jnp.uint32))
  started = time.perf_counter()
  _, logs = jax.jit(jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=args.episodes)))(keys)
  cost = np.asarray(logs.cost_value, np.float64)
  excess = np.asarray(logs.constraint_values[..., 0], np.float64) - alpha
  learning = ~np.asarray(logs.pretraining)
  if "lp_feasible" in logs.extras:
    infeasible = ~np.asarray(logs.extras["lp_feasible"]) & learning
  else:
    optimistic = np.asarray(logs.optimistic_constraint_values[..., 0], np.float64)
    infeasible = (optimistic > alpha + 1e-6) & learning
  values = dict(
    strong_regret=np.maximum(cost - optimum, 0.0).sum(-1),
    strong_violation=np.maximum(excess, 0.0).sum(-1),
    violating_episodes=(excess > 1e-6).sum(-1),
    max_violation=excess.max(-1),
    optimistic_infeasible=infeasible.sum(-1),
    first_half_violation=np.maximum(excess[:, : args.episodes // 2], 0.0).sum(-1),
  )
  out = {k: np.asarray(v, np.float64).tolist() for k, v in values.items()}
  return out, time.perf_counter() - started


def report(record) -> str:
  """The record as a markdown table: per problem and agent, the means over seeds (± their
  standard errors) of each value."""
  keys = (
    "strong_regret",
    "strong_violation",
    "first_half_violation",
    "violating_episodes",
    "max_violation",
    "optimistic_infeasible",
  )
  lines = ["| problem | agent | " + " | ".join(k.replace("_", " ") for k in keys) + " |"]
  lines.append("|---" * (len(keys) + 2) + "|")
  for problem, agents in record["results"].items():
    for name, entry in agents.items():
      cells = []
      for key in keys:
        x = np.asarray(entry["values"][key], np.float64)
        err = x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0.0
        cells.append(f"{x.mean():.4g} ± {err:.2g}")
      lines.append(f"| {problem} | {name} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def figure(record, path) -> None:
  """Bars of the strong regret and the strong violation per problem and agent (means over
  seeds, with their standard errors), to `path`."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  problems = list(record["results"])
  agents = [a for a in AGENTS if all(a in record["results"][p] for p in problems)]
  fig, axes = plt.subplots(1, 2, figsize=(12, 3.6), constrained_layout=True)
  width = 0.8 / max(len(agents), 1)
  for ax, key in zip(axes, ("strong_regret", "strong_violation")):
    for i, agent in enumerate(agents):
      x = [np.asarray(record["results"][p][agent]["values"][key]) for p in problems]
      means = [v.mean() for v in x]
      errs = [v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0 for v in x]
      ax.bar(np.arange(len(problems)) + i * width, means, width, yerr=errs, label=agent)
    ax.set_xticks(np.arange(len(problems)) + 0.4 - width / 2, problems, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_title(key.replace("_", " ") + f" after {record['config']['episodes']} episodes")
  axes[0].legend(fontsize=8)
  fig.savefig(path, dpi=110)


def main(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument("--problems", default=",".join(PROBLEMS))
  p.add_argument("--agents", default=",".join(AGENTS))
  p.add_argument("--seeds", type=cli.positive_int, default=8)
  p.add_argument("--episodes", type=cli.positive_int, default=2000)
  p.add_argument("--eta", type=cli.positive_float, default=100.0, help="OptAug's (constant)")
  p.add_argument("--setting", default="paper", choices=oj.SETTINGS)
  p.add_argument("--bonus-scale", type=float, default=0.1, help="every agent's radii scale")
  p.add_argument("--out", default="results/no_baseline")
  p.add_argument("--report", action="store_true", help="only the table of DIR's record")
  args = p.parse_args(argv)
  if args.report:
    record = json.loads(open(os.path.join(args.out, OUTPUTS[0])).read())
    figure(record, os.path.join(args.out, "no_baseline.png"))
    print(report(record))
    return record
  args.problems, args.agents = args.problems.split(","), args.agents.split(",")
  if unknown := sorted(set(args.agents) - set(AGENTS)):
    p.error(f"--agents: unknown {', '.join(unknown)}; choose from {', '.join(AGENTS)}")
  config = {k: v for k, v in vars(args).items() if k not in ("out", "report")}
  config.update(jax=jax.__version__, optaug_jax=oj.__version__, dtype=str(jnp.zeros(()).dtype))
  path = os.path.join(args.out, OUTPUTS[0])
  record = {"config": config, "results": {}}
  if os.path.exists(path):  # a pair depends on the config but the lists of what to run
    old = json.loads(open(path).read())
    same = lambda c: {k: v for k, v in c.items() if k not in ("problems", "agents")}
    if same(old.get("config", {})) == same(json.loads(json.dumps(config))):
      kept = {
        problem: {a: v for a, v in pairs.items() if a in args.agents}
        for problem, pairs in old["results"].items()
        if problem in args.problems
      }
      record = {"config": config, "results": kept}
      print(f"resuming {path}: {sum(len(v) for v in kept.values())} pairs done")
  run_dir = result_files.result_dir(args, "no_baseline", OUTPUTS)
  with run_dir.running():
    for problem in args.problems:
      bench = build(problem)
      done = record["results"].setdefault(problem, {})
      for agent in [a for a in args.agents if a not in done]:
        values, seconds = run_pair(bench, agent, args)
        done[agent] = {"values": values, "seconds": seconds}
        run_dir.write_json(OUTPUTS[0], record, indent=None)
        mean = {k: float(np.mean(v)) for k, v in values.items()}
        print(f"{problem:20s} {agent:20s} " + " ".join(f"{k} {v:.4g}" for k, v in mean.items()))
    run_dir.complete()
  figure(record, os.path.join(args.out, "no_baseline.png"))
  print(report(record))
  return record


if __name__ == "__main__":
  cli.main_guard("no_baseline", main)
