"""The linear agents' speed: seeds vmapped against the peer's one seed per worker, and the
episode's cost on a linear CMDP of 10^4 states as S and d grow.

1. **Episodes per second per core** on Kitamura et al.'s linear CMDP (`S = 100, A = 3,
   d = 5, H = 4`, instance 0, their constants): each agent of `--agents`, `--seeds` seeds
   vmapped in one jitted call of `--episodes` episodes (compiled first, then timed
   `--reps` times, the median), from the start and after `--warm` episodes (OPSE deploys
   the baseline through its first ~750 episodes here, so its search of the multiplier
   runs only in the later window), divided by the cores this process may use
   (`os.sched_getaffinity`: pin it with `taskset -c 0` for one core). Their code runs one
   seed per worker process at 30-38 episodes per second (their paper, Appendix; the
   `--peer-rate` range); the ratio is ours per core over theirs per worker.
2. **The episode's cost on `oj.linear.latent_factors`** (sparse rows, `k m = 20` slots,
   `A = 4, H = 10`), milliseconds per seed-episode of OptDual and OptAug (`--large-seeds`
   seeds vmapped, 10 episodes after 20; at this length the multiplier is at 0 and
   OptAug's plan is 2 backward passes), for `S` in `--states` at `d = 10` and `d` in
   `--features` at `S = 10^4`, with the backward passes per plan. The cost per episode is
   `O(H S A d)` for the bonus and per backward pass, plus the runner's exact evaluation,
   `O(H S A N)`.

  taskset -c 0 python experiments/linear_speed.py --out results/linear_speed   # ~12 min

Writes DIR/linear_speed.json (the config, the machine, the tables) and prints the tables.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import cli, result_files

OUTPUTS = ("linear_speed.json",)


def _agent(name, bench, scale, tau, eta=1.0):
  common = dict(cost_bonus=scale, constraint_bonus=scale, temperature=tau, pretrain_episodes=1)
  if name == "opse":
    return oj.linear.opse(bench.model, bench.safe_policy, compensation_bonus=scale, **common)
  if name == "ghosh_softmax":
    return oj.linear.ghosh_softmax(bench.model, bench.safe_policy, **common)
  return getattr(oj.linear, name)(bench.model, bench.safe_policy, eta=eta, **common)


def _timed(agent, cmdp, seeds, episodes, reps, warm=0):
  """(median seconds of one call of `episodes` episodes x `seeds` seeds, compile seconds,
  mean backward passes per plan, mean over episodes of the batch's most), from a state
  `warm` episodes in."""
  keys = jax.random.split(jax.random.PRNGKey(0), seeds)
  start = jax.jit(jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=warm)[0]))(keys)
  start = jax.block_until_ready(start)  # not inside the compilation's time
  play = jax.jit(jax.vmap(lambda k, s: oj.run(agent, k, cmdp, num_episodes=episodes, state=s)))
  t0 = time.perf_counter()
  compiled = play.lower(keys, start).compile()
  compile_seconds = time.perf_counter() - t0
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    _, logs = jax.block_until_ready(compiled(keys, start))
    times.append(time.perf_counter() - t0)
  passes = np.asarray(logs.extras["backward_passes"])  # [seeds, episodes]
  return float(np.median(times)), compile_seconds, float(passes.mean()), float(passes.max(0).mean())


def main(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument("--agents", default="opse,optaug_linear,optdual_linear,ghosh_softmax")
  p.add_argument("--seeds", type=cli.positive_int, default=64)
  p.add_argument("--episodes", type=cli.positive_int, default=500)
  p.add_argument("--reps", type=cli.positive_int, default=3)
  p.add_argument(
    "--warm",
    default="0,2000",
    help="episodes played before each timed window (comma-separated): from the start OPSE"
    " deploys the baseline on this CMDP (its search ends at its first evaluations); after"
    " 2000 it plays its own policies and searches its multiplier",
  )
  p.add_argument("--peer-rate", default="30,38", help="their episodes per second per worker")
  p.add_argument("--states", default="2500,5000,10000,20000")
  p.add_argument("--features", default="10,20,30")
  p.add_argument("--large-seeds", type=cli.positive_int, default=8)
  p.add_argument("--out", default="results/linear_speed")
  args = p.parse_args(argv)
  cores = len(os.sched_getaffinity(0))
  low, high = (float(x) for x in args.peer_rate.split(","))
  record = {
    "config": {k: v for k, v in vars(args).items() if k != "out"},
    "machine": {
      "cores": cores,
      "processor": platform.processor() or platform.machine(),
      "jax": jax.__version__,
      "backend": jax.default_backend(),
      "dtype": str(jnp.zeros(()).dtype),
    },
  }
  run_dir = result_files.result_dir(args, "linear_speed", OUTPUTS)
  with run_dir.running():
    bench = oj.linear.kitamura_linear(0)
    scale, tau = oj.linear.PUBLISHED_CONSTANTS["kitamura_linear"]
    rows = []
    print(f"kitamura_linear, {args.seeds} seeds vmapped, {cores} core(s), {args.episodes} episodes")
    for warm in map(int, args.warm.split(",")):
      for name in args.agents.split(","):
        agent = _agent(name, bench, scale, tau)
        seconds, compile_s, passes, most = _timed(
          agent, bench.model.cmdp, args.seeds, args.episodes, args.reps, warm=warm
        )
        rate = args.seeds * args.episodes / seconds / cores
        row = dict(agent=name, warm=warm, per_core=rate, compile_seconds=compile_s)
        row.update(passes=passes, batch_passes=most, ratio_low=rate / high, ratio_high=rate / low)
        rows.append(row)
        print(
          f"  after {warm:5d} {name:15s} {rate:9.0f} episodes/s per core ({rate / high:.0f}-"
          f"{rate / low:.0f}x the peer's per worker), {passes:.2f} passes per plan ({most:.2f}"
          f" the batch's most), compiled in {compile_s:.1f} s",
          flush=True,
        )
    record["per_core"] = rows
    large = []
    sizes = [(int(s), 10) for s in args.states.split(",") if s]
    sizes += [(10_000, int(d)) for d in args.features.split(",") if d and int(d) != 10]
    print(f"latent_factors, {args.large_seeds} seeds vmapped, ms per seed-episode")
    for num_states, d in sizes:
      t0 = time.perf_counter()
      big = oj.linear.latent_factors(0, num_states=num_states, num_features=d, support=10)
      build = time.perf_counter() - t0
      for name in ("optdual_linear", "optaug_linear"):
        agent = _agent(name, big, 1.0, 0.01, eta=10.0)
        seconds, compile_s, passes, _ = _timed(
          agent, big.model.cmdp, args.large_seeds, 10, args.reps, warm=20
        )
        ms = 1000 * seconds / (args.large_seeds * 10)
        large.append(
          dict(agent=name, states=num_states, features=d, ms=ms, passes=passes, build=build)
        )
        print(
          f"  S={num_states:6d} d={d:3d} {name:15s} {ms:8.2f} ms ({passes:.1f} passes),"
          f" compiled in {compile_s:.1f} s",
          flush=True,
        )
    record["latent_factors"] = large
    run_dir.write_json(OUTPUTS[0], record)
    run_dir.complete()
  return record


if __name__ == "__main__":
  cli.main_guard("linear_speed", main)
