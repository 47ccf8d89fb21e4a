"""Quick start: OptAug-CMDP vs OptDual-CMDP on a random CMDP, vmapped over seeds.

Prints the exact LP optimum, then each agent's final strong and weak regrets (mean over
seeds) and the fraction of late episodes whose constraint violation exceeds 0.05, and
saves everything with its configuration.

  python experiments/quickstart.py                       # ~30 s on 2 CPU cores
  python experiments/quickstart.py --seeds 64 --episodes 2000 --out results/quickstart
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


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--states", type=int, default=5)
  parser.add_argument("--actions", type=int, default=3)
  parser.add_argument("--horizon", type=int, default=5)
  parser.add_argument("--constraints", type=int, default=1)
  parser.add_argument("--episodes", type=int, default=2000)
  parser.add_argument("--pretrain", type=int, default=200)
  parser.add_argument("--seeds", type=int, default=16)
  parser.add_argument("--fw-iters", type=int, default=50)
  parser.add_argument("--eta", type=float, default=20.0,
                      help="constant OptAug step size (0 = the paper's schedule)")
  parser.add_argument("--bonus-scale", type=float, default=0.02)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--out", default="results/quickstart")
  args = parser.parse_args(argv)

  cmdp = oj.random_cmdp(jax.random.PRNGKey(args.seed), num_states=args.states,
                        num_actions=args.actions, horizon=args.horizon,
                        num_constraints=args.constraints)
  oj.validate_cmdp(cmdp)
  lp = oj.solve_lp(cmdp)
  pi_safe, slack = oj.safe_policy(cmdp)
  slack = oj.check_safe_policy(cmdp, pi_safe)
  print(f"random CMDP S={args.states} A={args.actions} H={args.horizon} I={args.constraints}:"
        f" LP optimum {lp.value:.4f}, thresholds {np.round(np.asarray(cmdp.thresholds), 4)},"
        f" safe-policy slack {slack:.4f}")

  k = args.episodes
  agents = {
      "optaug": oj.optaug(num_episodes=k, safe_policy=pi_safe, pretrain_episodes=args.pretrain,
                          slack=slack, eta=args.eta or None, fw_iters=args.fw_iters,
                          bonus_scale=args.bonus_scale),
      "optdual": oj.optdual(num_episodes=k, slack=slack, bonus_scale=args.bonus_scale),
  }
  keys = jax.random.split(jax.random.PRNGKey(args.seed + 1), args.seeds)
  os.makedirs(args.out, exist_ok=True)
  summary, arrays = {}, {}
  late = slice(k - k // 4, k)
  print(f"{'agent':8s} {'strong cost':>12s} {'weak cost':>10s} {'strong cons':>12s}"
        f" {'weak cons':>10s} {'late >0.05':>10s} {'time':>7s}")
  for name, agent in agents.items():
    t0 = time.perf_counter()
    run = jax.jit(jax.vmap(lambda key: oj.run(agent, key, cmdp, num_episodes=k)))
    _, log = jax.block_until_ready(run(keys))
    seconds = time.perf_counter() - t0
    reg = oj.regrets(log, lp.value, cmdp.thresholds)
    violation = np.max(np.asarray(log.constraint_values - cmdp.thresholds), axis=-1)
    unsafe = float(np.mean(violation[:, late] > 0.05))
    summary[name] = {key: float(np.mean(getattr(reg, key)[:, -1])) for key in reg._fields}
    summary[name].update(late_fraction_violation_above_0_05=unsafe, seconds=seconds)
    arrays[f"{name}_cost_value"] = np.asarray(log.cost_value)
    arrays[f"{name}_constraint_values"] = np.asarray(log.constraint_values)
    arrays[f"{name}_multipliers"] = np.asarray(log.multipliers)
    s = summary[name]
    print(f"{name:8s} {s['strong_cost']:12.2f} {s['weak_cost']:10.2f}"
          f" {s['strong_constraint']:12.2f} {s['weak_constraint']:10.2f} {unsafe:10.3f}"
          f" {seconds:6.1f}s")
  with open(os.path.join(args.out, "config.json"), "w") as f:
    json.dump({**vars(args), "lp_value": lp.value, "jax": jax.__version__,
               "optaug_jax": oj.__version__}, f, indent=2)
  with open(os.path.join(args.out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)
  np.savez_compressed(os.path.join(args.out, "results.npz"), **arrays)
  print(f"saved to {args.out}/ (config.json, summary.json, results.npz)")
  return summary


if __name__ == "__main__":
  main()
