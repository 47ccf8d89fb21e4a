"""DOPE as the authors' scripts run it, next to ours: what their bonus sum changes.

Bura et al. (2022) released scripts (PuLP/CBC) for media_streaming and factored. They are
not run here: they cannot be fetched at run time, and this repository does not copy code.
What their code does was read and is restated in `oj.agents.dope`'s docstring and in
docs/results/README.md ("DOPE and OptCMDP against the authors' code"). One difference
changes behaviour: with the transition support known, their `beta-bar(s, a)` sums the
Bernstein radius over ALL S next states, including impossible ones, whose radius is
`min(14 L / (3 n), 1)`; ours sums over the known support (`bonus_next_states="support"`).
`bonus_next_states="all"` reproduces theirs.

This script runs DOPE both ways in their setting (`bura2022`: known costs and support,
counts pooled over h, `log(6 S^2 H K / delta)`, delta = 0.01, K = 10^5 as in their
scripts): both share the baseline phase (K_0 = S^2 A H^3 / slack^2 episodes, bit for bit
the same), then each runs --after episodes of LPs. It records, per variant, how many
episodes found the pessimistic LP feasible (else the baseline is played), the LP's
pessimistic constraint value, and the true values of the played policies.

  python experiments/dope_code_comparison.py --benchmark media_streaming --seeds 4 \
      --after 300 --out docs/results/dope_code_comparison/media_streaming

Writes DIR/config.json and DIR/summary.json atomically, with DIR/manifest.json (see
experiment.result_files.ResultDir): a directory of another script is refused, and a run of
other settings replaces the previous run's files.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import cli, result_files

VARIANTS = ("support", "all")


def parse_args(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument("--benchmark", default="media_streaming", choices=("media_streaming", "factored"))
  p.add_argument("--seeds", type=int, default=4)
  p.add_argument(
    "--num-episodes", type=int, default=100_000, help="K in the radii (their scripts: 10^5)"
  )
  p.add_argument("--after", type=int, default=300, help="episodes run after K_0")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--out", default="results/dope_code_comparison")
  return p.parse_args(argv)


def main(argv=None):
  args = parse_args(argv)
  for name, value in (
    ("seeds", args.seeds),
    ("after", args.after),
    ("num-episodes", args.num_episodes),
  ):
    if value < 1:
      raise SystemExit(f"--{name}: must be at least 1, got {value}")
  b = oj.benchmarks.make_benchmark(args.benchmark)
  lp = oj.solve_lp(b.cmdp)
  setting = oj.named_setting("bura2022", b.cmdp)
  k0 = oj.agents.dope_pretrain_episodes(
    num_states=b.cmdp.num_states,
    num_actions=b.cmdp.num_actions,
    horizon=b.cmdp.horizon,
    slack=float(b.slack),
  )
  total = k0 + args.after
  if total > args.num_episodes:
    raise SystemExit(f"--after: K_0 + after = {total} exceeds --num-episodes")
  run_dir = result_files.result_dir(args, "dope_code_comparison", ("config.json", "summary.json"))
  config = result_files.run_config(vars(args), b, lp)
  config["script"] = "dope_code_comparison"
  config["setting"] = setting.describe()
  config["k0"] = k0
  keys = jax.random.split(jax.random.PRNGKey(args.seed), args.seeds)
  agents = {
    v: oj.agents.dope(
      num_episodes=args.num_episodes,
      safe_policy=b.safe_policy,
      slack=b.slack,
      setting=setting,
      bonus_next_states=v,
    )
    for v in VARIANTS
  }
  started = time.time()
  # The baseline phase is the same for both variants (no bonus is used before K_0).
  run = jax.jit(
    jax.vmap(lambda k: oj.run(agents["support"], k, b.cmdp, num_episodes=k0, logs="summary")[0])
  )
  state = run(keys)
  print(
    f"baseline phase: {k0} episodes x {args.seeds} seeds in {time.time() - started:.0f} s",
    flush=True,
  )
  baseline_v, baseline_c = oj.policy_values(b.cmdp, jnp.asarray(b.safe_policy))
  results = {}
  for v in VARIANTS:
    t0 = time.time()
    go = jax.jit(
      jax.vmap(lambda k, s, a=agents[v]: oj.run(a, k, b.cmdp, num_episodes=args.after, state=s))
    )
    _, log = go(keys, state)
    feasible = np.asarray(log.extras["lp_feasible"])
    cost = np.asarray(log.cost_value)
    constraint = np.asarray(log.constraint_values)[..., 0]
    pess = np.asarray(log.optimistic_constraint_values)[..., 0]
    alpha = float(np.asarray(b.cmdp.thresholds)[0])
    results[v] = {
      "seconds": time.time() - t0,
      "lp_feasible_fraction": float(feasible.mean()),
      "first_feasible_episode_after_k0": [int(np.argmax(f)) if f.any() else None for f in feasible],
      "mean_value": float(cost.mean()),
      "last_value_mean": float(cost[:, -1].mean()),
      "mean_constraint": float(constraint.mean()),
      "max_constraint": float(constraint.max()),
      "violations": int((constraint > alpha + 1e-6).sum()),
      "pessimistic_constraint_first_episode": pess[:, 0].tolist(),
    }
    r = results[v]
    print(
      f"{v:8s} LP feasible in {r['lp_feasible_fraction']:.0%} of the episodes after K_0;"
      f" mean V {r['mean_value']:.4f} (V* {float(lp.value):.4f}, baseline"
      f" {float(baseline_v):.4f}), mean C {r['mean_constraint']:.4f} (alpha {alpha},"
      f" baseline {float(np.asarray(baseline_c)[0]):.4f}), violations {r['violations']},"
      f" {r['seconds']:.0f} s",
      flush=True,
    )
  summary = {
    "columns": {
      "lp_feasible_fraction": "share of (seed, episode) after K_0 whose pessimistic LP was"
      " feasible (else the baseline was played)",
      "first_feasible_episode_after_k0": "per seed, the first episode after K_0 with a"
      " feasible LP (None: never)",
      "mean_value / mean_constraint": "true V(c) and V(d) of the played policies, mean over"
      " seeds and episodes after K_0",
      "violations": "(seed, episode) pairs with V(d) > alpha",
      "pessimistic_constraint_first_episode": "the pessimistic constraint value of the"
      " played occupancy in the first episode after"
      " K_0: the LP's, or the baseline's when the LP"
      " was infeasible",
    },
    "v_star": float(lp.value),
    "baseline_value": float(baseline_v),
    "baseline_constraint": float(np.asarray(baseline_c)[0]),
    "k0": k0,
    "wall_seconds": time.time() - started,
    "variants": results,
  }
  with run_dir.running():
    run_dir.write_json("config.json", config, default=str)
    run_dir.write_json("summary.json", summary)
    run_dir.complete()
  print(f"wrote {args.out}/summary.json")
  return summary


if __name__ == "__main__":
  cli.main_guard("dope_code_comparison", main)
