"""Times one OptAug-CMDP episode step: jitted JAX at 1 and N vmapped seeds vs NumPy.

All numbers come from one run, side by side (machines here are noisy: compare ratios).

  python experiments/step_benchmark.py                 # S=10, A=4, H=10, I=2, T=100
  python experiments/step_benchmark.py --quick         # a CI-sized smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax import numpy_reference as npr


def _time(fn, reps):
  """Median wall time of `fn()` over `reps` calls (after the caller's warm-up)."""
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return float(np.median(times))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--states", type=int, default=10)
  parser.add_argument("--actions", type=int, default=4)
  parser.add_argument("--horizon", type=int, default=10)
  parser.add_argument("--constraints", type=int, default=2)
  parser.add_argument("--fw-iters", type=int, default=100)
  parser.add_argument("--seeds", type=int, default=256)
  parser.add_argument("--step-rule", default="linesearch", choices=["linesearch", "standard"])
  parser.add_argument("--reps", type=int, default=10)
  parser.add_argument("--numpy-reps", type=int, default=3)
  parser.add_argument("--quick", action="store_true", help="tiny sizes, for CI")
  parser.add_argument("--out", default=None, help="write the results as JSON here")
  args = parser.parse_args(argv)
  if args.quick:
    args.seeds, args.fw_iters, args.reps, args.numpy_reps = 8, 10, 2, 1

  s, a, h, i, t = args.states, args.actions, args.horizon, args.constraints, args.fw_iters
  cmdp = oj.random_cmdp(jax.random.PRNGKey(0), num_states=s, num_actions=a, horizon=h,
                        num_constraints=i, dtype=jnp.float32)
  pi, slack = oj.safe_policy(cmdp)
  warm = 20  # pre-training episodes, so that the timed step runs with non-trivial counts
  agent = oj.optaug(num_episodes=1000, safe_policy=pi, pretrain_episodes=warm, slack=slack,
                    fw_iters=t, step_rule=args.step_rule)
  state, _ = oj.run(agent, jax.random.PRNGKey(1), cmdp, num_episodes=warm)
  eta = float(oj.paper_eta_schedule(h, float(slack), 0.5)(0))

  step1 = jax.jit(lambda st, k: oj.episode_step(agent, cmdp, st, k))
  stepn = jax.jit(jax.vmap(lambda st, k: oj.episode_step(agent, cmdp, st, k)))
  states = jax.tree.map(lambda x: jnp.broadcast_to(x, (args.seeds,) + x.shape), state)
  keys = jax.random.split(jax.random.PRNGKey(2), args.seeds)

  t0 = time.perf_counter()
  compiled1 = step1.lower(state, keys[0]).compile()
  compile_1 = time.perf_counter() - t0
  t0 = time.perf_counter()
  compiledn = stepn.lower(states, keys).compile()
  compile_n = time.perf_counter() - t0
  jax.block_until_ready(compiled1(state, keys[0]))
  jax.block_until_ready(compiledn(states, keys))
  jax_1 = _time(lambda: compiled1(state, keys[0]), args.reps)
  jax_n = _time(lambda: compiledn(states, keys), args.reps)

  rng = np.random.default_rng(0)
  np_cmdp = [np.asarray(x, np.float64) for x in (cmdp.transitions, cmdp.cost,
                                                  cmdp.constraint_costs, cmdp.thresholds)]
  np_cmdp[0] = np_cmdp[0] / np_cmdp[0].sum(-1, keepdims=True)  # float32 rows -> exact sums
  counts = tuple(np.array(x, np.float64) for x in state.counts)

  def numpy_step():
    return npr.optaug_step(rng, *np_cmdp, 0, tuple(c.copy() for c in counts),
                           np.zeros(i), eta, num_episodes=1000, delta=0.1, bonus_scale=1.0,
                           num_iters=t, step_rule=args.step_rule)

  numpy_step()
  numpy_1 = _time(numpy_step, args.numpy_reps)

  result = {
      "sizes": {"S": s, "A": a, "H": h, "I": i, "fw_iters": t, "step_rule": args.step_rule,
                "seeds": args.seeds, "dtype": "float32"},
      "hardware": {"platform": platform.platform(), "processor": platform.processor(),
                   "cpu_count": os.cpu_count(), "jax_backend": jax.default_backend(),
                   "devices": [str(d) for d in jax.devices()], "jax": jax.__version__},
      "jax_step_1_seed_s": jax_1,
      "jax_step_n_seeds_s": jax_n,
      "jax_step_per_seed_at_n_s": jax_n / args.seeds,
      "compile_1_seed_s": compile_1,
      "compile_n_seeds_s": compile_n,
      "numpy_step_per_seed_s": numpy_1,
      "speedup_vmapped_vs_numpy": numpy_1 / (jax_n / args.seeds),
      "speedup_vmapped_vs_jax_single": jax_1 / (jax_n / args.seeds),
      "speedup_jax_single_vs_numpy": numpy_1 / jax_1,
      "fw_iteration_seeds_per_s": args.seeds * t / jax_n,
  }
  print(f"OptAug episode step, S={s} A={a} H={h} I={i} fw_iters={t} ({args.step_rule}),"
        f" float32, {jax.default_backend()} ({os.cpu_count()} cores)")
  print(f"  JAX, 1 seed            : {jax_1 * 1e3:9.3f} ms / step   (compile {compile_1:.2f} s)")
  print(f"  JAX, {args.seeds:4d} seeds vmapped: {jax_n * 1e3:9.3f} ms / step = "
        f"{jax_n / args.seeds * 1e3:.3f} ms per seed   (compile {compile_n:.2f} s)")
  print(f"  NumPy, 1 seed          : {numpy_1 * 1e3:9.3f} ms / step")
  print(f"  per-seed speedup: vmapped JAX vs NumPy {result['speedup_vmapped_vs_numpy']:.1f}x,"
        f" vs JAX seed by seed {result['speedup_vmapped_vs_jax_single']:.1f}x;"
        f" JAX 1 seed vs NumPy {result['speedup_jax_single_vs_numpy']:.1f}x")
  print(f"  Frank-Wolfe iteration-seeds per second: {result['fw_iteration_seeds_per_s']:.3g}")
  if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(result, f, indent=2)
  return result


if __name__ == "__main__":
  main()
