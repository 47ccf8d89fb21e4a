"""`benchmark.py`'s `scaling`, `compile`, `memory` and `sweep` sections: the vmapped step
against seeds, S and fw_iters; compile time and buffer sizes of `run`; 10,000 seeds in
bounded memory."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

import optaug_jax as oj
from optaug_jax.experiment import timing


def scaling_section(table, args):
  """Per-step time of the vmapped step against seeds, S and fw_iters (one at a time)."""
  base = {"S": 10, "A": 4, "H": 10, "I": 2, "T": args.fw_iters, "N": args.seeds}
  grids = {"N": args.scale_seeds, "S": args.scale_states, "T": args.scale_fw_iters}
  out = {}
  for axis, values in grids.items():
    rows = []
    for v in values:
      cfg = dict(base, **{axis: v})
      cmdp, policy, slack = timing.problem(cfg["S"], cfg["A"], cfg["H"], cfg["I"])
      agent = oj.optaug(
        num_episodes=1000,
        safe_policy=policy,
        pretrain_episodes=20,
        slack=slack,
        inner=oj.inner.frank_wolfe(num_iters=cfg["T"]),
        eta=100.0,
      )
      state = timing.warm_state(agent, cmdp)
      sizes = f"S={cfg['S']} A={cfg['A']} H={cfg['H']} I={cfg['I']} T={cfg['T']}"
      row = timing.time_step(
        table, f"scaling in {axis}", agent, cmdp, state, cfg["N"], args.reps, sizes, cfg["T"]
      )
      rows.append(
        {axis: v, "time_per_step_s": row["time_per_call_s"], "compile_s": row["compile_s"]}
      )
    # Growth relative to the first point, against the growth of the work.
    work = {"N": lambda c: c, "S": lambda c: c * c, "T": lambda c: c}[axis]
    t0, w0 = rows[0]["time_per_step_s"], work(rows[0][axis])
    for r in rows:
      r["time_ratio"] = r["time_per_step_s"] / t0
      r["work_ratio"] = work(r[axis]) / w0
    out[axis] = rows
    print(
      f"         {axis}: time ratio / work ratio = "
      + ", ".join(f"{r[axis]}: {r['time_ratio']:.2f}/{r['work_ratio']:.2f}" for r in rows),
      flush=True,
    )
  return out


def compile_section(table, args):
  """Compile time of the jitted run: independent of K and of the number of seeds."""
  cmdp, policy, slack = timing.problem(10, 4, 10, 2)
  agent = oj.optaug(
    num_episodes=10_000,
    safe_policy=policy,
    pretrain_episodes=20,
    slack=slack,
    inner=oj.inner.frank_wolfe(num_iters=args.fw_iters),
    eta=100.0,
  )
  out = []
  for k, n in [(10, 16), (1000, 16), (100, 16), (100, args.seeds), (100, 4 * args.seeds)]:
    fn = jax.jit(jax.vmap(lambda key, k=k: oj.run(agent, key, cmdp, num_episodes=k)))
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    t0 = time.perf_counter()
    fn.lower(keys).compile()
    c = time.perf_counter() - t0
    print(f"compile  run, K={k:5d}, seeds={n:5d}: {c:6.2f} s", flush=True)
    out.append({"K": k, "seeds": n, "compile_s": c})
  return out


def memory_section(table, args):
  """XLA buffer sizes of a vmapped run: logs grow with K, everything else does not."""
  cmdp, policy, slack = timing.problem(10, 4, 10, 2)
  agent = oj.optaug(
    num_episodes=100_000,
    safe_policy=policy,
    pretrain_episodes=20,
    slack=slack,
    inner=oj.inner.frank_wolfe(num_iters=args.fw_iters),
    eta=100.0,
  )
  n = args.memory_seeds
  keys = jax.random.split(jax.random.PRNGKey(0), n)
  out = []
  for logs in ("full", "summary"):
    for k in args.memory_episodes:
      fn = jax.jit(
        jax.vmap(lambda key, k=k, logs=logs: oj.run(agent, key, cmdp, num_episodes=k, logs=logs))
      )
      mem = timing.memory(fn.lower(keys).compile())
      print(
        f"memory   run, logs={logs:7s} K={k:6d}, seeds={n}: "
        + (
          ", ".join(f"{key} {v / 2**20:.2f} MiB" for key, v in mem.items())
          if mem
          else "not reported"
        ),
        flush=True,
      )
      out.append({"logs": logs, "K": k, "seeds": n, "bytes": mem})
  return out


def sweep_section(table, args):
  """Many seeds in bounded memory: run_sharded with summary logs and batch_size."""
  cmdp, policy, slack = timing.problem(10, 4, 10, 2)
  agent = oj.optaug(
    num_episodes=1000,
    safe_policy=policy,
    pretrain_episodes=0,
    slack=slack,
    inner=oj.inner.frank_wolfe(num_iters=args.fw_iters),
    eta=100.0,
  )
  n, k, bs = args.sweep_seeds, args.sweep_episodes, args.sweep_batch
  keys = jax.random.split(jax.random.PRNGKey(0), n)
  rss0 = timing.peak_rss_mib()
  t0 = time.perf_counter()
  _, summary = oj.run_sharded(agent, keys, cmdp, num_episodes=k, logs="summary", batch_size=bs)
  jax.block_until_ready(summary)
  wall = time.perf_counter() - t0
  rss1 = timing.peak_rss_mib()
  sizes = f"S=10 A=4 H=10 I=2 T={args.fw_iters}"
  table.add(
    "sweep",
    f"run_sharded, K={k}, batch_size={bs}",
    seeds=n,
    time_s=wall,
    sizes=sizes,
    fw_iters=args.fw_iters * k,
    peak_rss_mib=rss1,
    peak_rss_before_mib=rss0,
  )
  print(
    f"sweep    peak RSS {rss0:.0f} MiB before, {rss1:.0f} MiB after"
    f" ({n} seeds x {k} episodes, incl. compile)",
    flush=True,
  )
  return {
    "seeds": n,
    "episodes": k,
    "batch_size": bs,
    "wall_s": wall,
    "peak_rss_before_mib": rss0,
    "peak_rss_after_mib": rss1,
    "mean_weak_cost": float(jnp.mean(summary.weak_cost)),
  }
