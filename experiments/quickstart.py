"""Quick start: OptAug-CMDP vs OptDual-CMDP on a random CMDP, vmapped over seeds.

Prints the exact LP optimum, then each agent's final strong and weak regrets (mean over
seeds) and the fraction of late episodes whose constraint violation exceeds 0.05, and
saves everything with its configuration.

  python experiments/quickstart.py                       # ~30 s on 2 CPU cores
  python experiments/quickstart.py --seeds 64 --episodes 2000 --out results/quickstart
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import cli, result_files, runs

OUTPUTS = ("config.json", "summary.json", "results.npz")


def main(argv=None):
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("--states", type=cli.positive_int, default=5)
  parser.add_argument("--actions", type=cli.positive_int, default=3)
  parser.add_argument("--horizon", type=cli.positive_int, default=5)
  parser.add_argument("--constraints", type=cli.positive_int, default=1)
  parser.add_argument("--episodes", type=cli.positive_int, default=2000)
  parser.add_argument("--pretrain", type=cli.non_negative_int, default=200)
  parser.add_argument("--seeds", type=cli.positive_int, default=16)
  parser.add_argument(
    "--eta",
    type=cli.parse_eta,
    default=20.0,
    help="OptAug's step size: a positive float or 'paper' (the paper's schedule; needs float64)",
  )
  parser.add_argument("--bonus-scale", type=cli.non_negative_float, default=0.02)
  parser.add_argument("--seed", type=cli.seed, default=0)
  parser.add_argument("--out", default="results/quickstart")
  args = parser.parse_args(argv)
  if args.pretrain > args.episodes:
    parser.error(
      f"--pretrain {args.pretrain} must be at most --episodes {args.episodes}:"
      " OptAug plays its safe baseline for the first --pretrain episodes of its"
      f" run; give --pretrain {args.episodes // 10} (a tenth of the run) or fewer,"
      " or more --episodes"
    )
  if args.actions < 2:
    parser.error(
      f"--actions {args.actions}: the random CMDP needs at least 2 actions (with"
      " one, the thresholds equal the only policy's values: no strictly feasible"
      " baseline)"
    )
  if args.seed == cli.SEED_MAX:
    parser.error(
      f"--seed {args.seed}: at most {cli.SEED_MAX - 1} (the episode keys use --seed + 1)"
    )

  cmdp = oj.random_cmdp(
    jax.random.PRNGKey(args.seed),
    num_states=args.states,
    num_actions=args.actions,
    horizon=args.horizon,
    num_constraints=args.constraints,
  )
  oj.validate_cmdp(cmdp)
  lp = oj.solve_lp(cmdp)
  pi_safe, slack = oj.safest_policy(cmdp)
  slack = oj.check_safe_policy(cmdp, pi_safe)
  print(
    f"random CMDP S={args.states} A={args.actions} H={args.horizon} I={args.constraints}:"
    f" LP optimum {lp.value:.4f}, thresholds {np.round(np.asarray(cmdp.thresholds), 4)},"
    f" safe-policy slack {slack:.4f}"
  )

  k = args.episodes
  problem = oj.benchmarks.Benchmark(cmdp=cmdp, safe_policy=pi_safe, slack=slack)
  agents = runs.make_agents(
    ["optaug", "optdual"],
    problem,
    num_episodes=k,
    options={
      "pretrain_episodes": args.pretrain,
      "bonus_scale": args.bonus_scale,
      "eta": {"optaug": args.eta},
    },
  )
  keys = jax.random.split(jax.random.PRNGKey(args.seed + 1), args.seeds)
  run_dir = result_files.result_dir(args, "quickstart", OUTPUTS)  # refuses another run's directory
  summary, arrays = {}, {}
  late = slice(k - k // 4, k)
  print(
    f"{'agent':8s} {'strong cost':>12s} {'weak cost':>10s} {'strong cons':>12s}"
    f" {'weak cons':>10s} {'late >0.05':>10s} {'time':>7s}"
  )
  for name, agent in agents.items():
    t0 = time.perf_counter()
    run = jax.jit(jax.vmap(lambda key: oj.run(agent, key, cmdp, num_episodes=k)))
    _, log = jax.block_until_ready(run(keys))
    seconds = time.perf_counter() - t0
    violation = np.max(np.asarray(log.constraint_values - cmdp.thresholds), axis=-1)
    unsafe = float(np.mean(violation[:, late] > 0.05))
    summary[name] = runs.final_regrets(log, lp.value, cmdp.thresholds)
    summary[name].update(late_fraction_violation_above_0_05=unsafe, seconds=seconds)
    arrays[f"{name}_cost_value"] = np.asarray(log.cost_value)
    arrays[f"{name}_constraint_values"] = np.asarray(log.constraint_values)
    arrays[f"{name}_multipliers"] = np.asarray(log.multipliers)
    s = summary[name]
    print(
      f"{name:8s} {s['strong_cost']:12.2f} {s['weak_cost']:10.2f}"
      f" {s['strong_constraint']:12.2f} {s['weak_constraint']:10.2f} {unsafe:10.3f}"
      f" {seconds:6.1f}s"
    )
  arguments = {**vars(args), "eta": cli.eta_flag(args.eta)}
  with run_dir.running():  # atomic writes; the manifest says whether the run finished
    run_dir.write_json("config.json", result_files.run_config(arguments, problem, lp), indent=2)
    run_dir.write_json("summary.json", summary, indent=2)
    run_dir.write_npz("results.npz", arrays)
    run_dir.complete()
  print(f"saved to {args.out}/ (config.json, summary.json, results.npz, manifest.json)")
  return summary


if __name__ == "__main__":
  cli.main_guard("quickstart", main)
