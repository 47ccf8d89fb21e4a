"""DPs per OptAug episode with several binding constraints, float32 against float64.

    python experiments/perf/dp_calls.py --constraints 5            # float32
    python experiments/perf/dp_calls.py --constraints 5 --x64      # float64

Runs OptAug (eta 100, bonus 0.1, 20 episodes of pre-training) on `random_family(seed=1)`
(S = 10, A = 4, H = 10, thresholds halfway between the safe and the unconstrained values,
so every constraint binds), `--seeds` seeds vmapped, and prints the distribution of the
inner solve's DP count over the optimistic episodes, the share at the budget
(`oj.inner.max_dp_calls`) and the uncertified solves. The inner-solvers guide's "DPs per
solve" numbers (8 seeds, 400 episodes) come from it.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--constraints", type=int, default=5)
  parser.add_argument("--seeds", type=int, default=8)
  parser.add_argument("--episodes", type=int, default=400)
  parser.add_argument("--x64", action="store_true", help="float64 (default float32)")
  args = parser.parse_args(argv)
  jax.config.update("jax_enable_x64", args.x64)
  import optaug_jax as oj

  dtype = jnp.float64 if args.x64 else jnp.float32
  bench = oj.benchmarks.random_family(
    seed=1, num_states=10, num_actions=4, horizon=10, num_constraints=args.constraints, dtype=dtype
  )
  pretrain = 20
  agent = oj.agents.make_agent(
    "optaug",
    bench,
    num_episodes=args.episodes,
    eta=100.0,
    pretrain_episodes=pretrain,
    bonus_scale=0.1,
  )
  run = jax.jit(jax.vmap(lambda k: oj.run(agent, k, bench.cmdp, num_episodes=args.episodes)))
  start = time.perf_counter()
  _, log = run(jax.random.split(jax.random.PRNGKey(0), args.seeds))
  dps = np.asarray(log.extras["dp_calls"])[:, pretrain:].ravel()
  certified = np.asarray(log.certified)[:, pretrain:].ravel()
  most = oj.inner.max_dp_calls(dtype, args.constraints)
  print(
    f"{np.dtype(dtype).name}, I = {args.constraints}, {args.seeds} seeds x"
    f" {args.episodes - pretrain} optimistic episodes ({time.perf_counter() - start:.0f} s):"
    f" DPs per episode median {np.median(dps):.0f}, 90th percentile"
    f" {np.percentile(dps, 90):.0f}, max {dps.max()} (budget {most}), at the budget"
    f" {np.mean(dps == most):.1%}; uncertified {int(np.sum(~certified))} of {certified.size}"
  )
  print("histogram (DPs: episodes):", dict(zip(*np.unique(dps, return_counts=True))))


if __name__ == "__main__":
  main()
