"""Performance table of optaug-jax, measured side by side in one run.

Sections (every time is the median of several calls after compilation; machines here are
noisy, so compare the ratios printed, which come from the same run):

  kernel   extended-DP backward pass (S=10, A=4, H=10), 100 seeds vmapped, for each way
           of writing the shared-order greedy fill (`oj.kernels.FILL_METHODS`), and NumPy;
  step     one OptAug-CMDP episode step (S=10, A=4, H=10, I=2, fw_iters=100): JAX at 1
           seed, seed by seed, 256 seeds vmapped (each fill), sharded over the host's
           devices, and the NumPy step (`oj.experiment.numpy_reference`);
  inner    the OptAug step with each inner method (Frank-Wolfe T=100, exact), I=2,
           1 seed and --seeds vmapped;
  scaling  the vmapped step against seeds, S (S^2 A H) and fw_iters;
  compile  compile time of `run` against K and the number of seeds;
  memory   XLA's buffer sizes of a vmapped run against K, full logs vs summary logs;
  throughput  the throughput targets in one run: LMO per seed (256 seeds), the sampler, the
           OptAug step per inner method at --throughput-seeds against NumPy and 1 seed, and a
           media_streaming slice (default OptAug, 64 seeds) projected to 10^5 episodes;
  sweep    10,000 seeds in bounded memory (`run_sharded`, summary logs, `batch_size`);
  size     time per seed and memory against S (gridworld 5..50: S = 25..2,500), dense
           and sparse, for the extended LMO and the default OptAug episode, with fitted
           slopes, and OptCMDP's LP against S (where the LP baselines stop);
  profile  XLA:CPU op time by kind (from a `jax.profiler` trace) for the LMO in a solver
           loop and the OptAug step per inner method at 256 seeds: where the time goes.

  python experiments/benchmark.py                       # full table, ~6 min on 2 cores
  python experiments/benchmark.py --host-devices 2      # also shard over 2 CPU devices
  python experiments/benchmark.py --quick               # CI-sized smoke run

Results go to `--out` (JSON, with the hardware description and the arguments).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # the device count must be fixed before jax is imported
  for i, arg in enumerate(sys.argv):
    if arg.startswith("--host-devices"):
      n = arg.split("=", 1)[1] if "=" in arg else sys.argv[i + 1]
      os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={int(n)}"
      )

import argparse  # pylint: disable=g-import-not-at-top,wrong-import-position
import json
import platform
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import cli, result_files
from optaug_jax.experiment import numpy_reference as npr

FILL_METHODS, DEFAULT_FILL = oj.kernels.FILL_METHODS, oj.kernels.DEFAULT_FILL


def _median_time(fn, reps):
  """Median wall time of `fn()` over `reps` calls (after one warm-up call)."""
  jax.block_until_ready(fn())
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return float(np.median(times))


def _compile(jitted, *args):
  """(compiled, seconds to lower and compile)."""
  t0 = time.perf_counter()
  compiled = jitted.lower(*args).compile()
  return compiled, time.perf_counter() - t0


def _memory(compiled):
  """XLA's buffer sizes (bytes) of a compiled function, or None where not reported."""
  try:
    m = compiled.memory_analysis()
  except Exception:  # pylint: disable=broad-except
    return None
  if m is None:
    return None
  return {
    "argument": int(m.argument_size_in_bytes),
    "output": int(m.output_size_in_bytes),
    "temp": int(m.temp_size_in_bytes),
  }


def _peak_rss_mib():
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _problem(s, a, h, i, dtype=jnp.float32):
  cmdp = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=s, num_actions=a, horizon=h, num_constraints=i, dtype=dtype
  )
  policy, slack = oj.safest_policy(cmdp)
  return cmdp, policy, float(slack)


def _warm_state(agent, cmdp, warm=20):
  """A state after `warm` pre-training episodes (non-trivial counts), then exploring."""
  state, _ = oj.run(agent, jax.random.PRNGKey(1), cmdp, num_episodes=warm)
  return state


def _batch(tree, n):
  return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tree)


class Table:
  """Rows printed as they come and kept for the JSON file."""

  def __init__(self):
    self.rows = []

  def add(
    self,
    section,
    name,
    *,
    seeds,
    time_s,
    sizes,
    fw_iters=None,
    compile_s=None,
    memory=None,
    **extra,
  ):
    row = {
      "section": section,
      "name": name,
      "seeds": seeds,
      "sizes": sizes,
      "time_per_call_s": time_s,
      "time_per_seed_s": time_s / seeds,
      "compile_s": compile_s,
      "memory_bytes": memory,
      **extra,
    }
    if fw_iters:
      row["fw_iteration_seeds_per_s"] = seeds * fw_iters / time_s
    self.rows.append(row)
    mem = "" if not memory else f"{sum(memory.values()) / 2**20:9.2f} MiB"
    fw = f"{row['fw_iteration_seeds_per_s']:10.3g}" if fw_iters else " " * 10
    comp = f"{compile_s:7.2f}" if compile_s is not None else " " * 7
    print(
      f"{section:8s} {name:38s} {sizes:22s} {seeds:6d} {time_s * 1e3:10.3f}"
      f" {time_s / seeds * 1e6:10.2f} {fw} {comp} {mem}",
      flush=True,
    )
    return row

  @staticmethod
  def header():
    print(
      f"{'section':8s} {'variant':38s} {'sizes':22s} {'seeds':>6s} {'ms/call':>10s}"
      f" {'us/seed':>10s} {'FWit*seed/s':>10s} {'compile':>7s} {'XLA buffers':>13s}"
    )


def kernel_section(table, args):
  s, a, h, b = 10, 4, 10, args.kernel_seeds
  rng = np.random.default_rng(0)
  p = rng.dirichlet(np.ones(s), size=(b, h, s, a))
  radius = rng.uniform(0.0, 0.2, size=p.shape)
  lower = np.clip(p - radius, 0, 1).astype(np.float32)
  upper = np.clip(p + radius, 0, 1).astype(np.float32)
  reward = rng.uniform(size=(b, h, s, a)).astype(np.float32)
  sizes = f"S={s} A={a} H={h}"
  out = {}
  for method in FILL_METHODS:
    fn = jax.jit(jax.vmap(lambda r, lo, up, m=method: oj.extended_lmo(r, lo, up, 0, fill=m)))
    compiled, c = _compile(fn, reward, lower, upper)
    t = _median_time(lambda: compiled(reward, lower, upper), args.reps * 3)
    out[method] = table.add(
      "kernel",
      f"extended LMO (backward + forward), fill={method}",
      seeds=b,
      time_s=t,
      sizes=sizes,
      compile_s=c,
      memory=_memory(compiled),
    )
  n_np = min(b, 20)
  t0 = time.perf_counter()
  for j in range(n_np):
    npr.extended_lmo(
      reward[j].astype(np.float64), lower[j].astype(np.float64), upper[j].astype(np.float64), 0
    )
  t = (time.perf_counter() - t0) / n_np
  out["numpy"] = table.add(
    "kernel", "NumPy LMO (backward + forward)", seeds=1, time_s=t, sizes=sizes
  )
  best = min(FILL_METHODS, key=lambda m: out[m]["time_per_seed_s"])
  return {
    "best_fill": best,
    "best_us_per_seed": out[best]["time_per_seed_s"] * 1e6,
    "numpy_us": t * 1e6,
    "target_us_per_seed": 30.0,
  }


def _step_fns(agent, cmdp):
  single = jax.jit(lambda st, k: oj.episode_step(agent, cmdp, st, k))
  batched = jax.jit(jax.vmap(lambda st, k: oj.episode_step(agent, cmdp, st, k)))
  return single, batched


def _time_step(table, name, agent, cmdp, state, seeds, reps, sizes, fw_iters):
  _, batched = _step_fns(agent, cmdp)
  states = _batch(state, seeds)
  keys = jax.random.split(jax.random.PRNGKey(2), seeds)
  compiled, c = _compile(batched, states, keys)
  t = _median_time(lambda: compiled(states, keys), reps)
  return table.add(
    "step",
    name,
    seeds=seeds,
    time_s=t,
    sizes=sizes,
    fw_iters=fw_iters,
    compile_s=c,
    memory=_memory(compiled),
  )


def step_section(table, args):
  s, a, h, i, t_fw, n = 10, 4, 10, 2, args.fw_iters, args.seeds
  cmdp, policy, slack = _problem(s, a, h, i)
  make = lambda fill: oj.optaug(
    num_episodes=1000,
    safe_policy=policy,
    pretrain_episodes=20,
    slack=slack,
    inner=oj.inner.frank_wolfe(num_iters=t_fw),
    eta=100.0,
    fill=fill,
  )
  agent = make(DEFAULT_FILL)
  state = _warm_state(agent, cmdp)
  sizes = f"S={s} A={a} H={h} I={i} T={t_fw}"
  single, _ = _step_fns(agent, cmdp)
  keys = jax.random.split(jax.random.PRNGKey(2), n)
  compiled1, c1 = _compile(single, state, keys[0])
  t1 = _median_time(lambda: compiled1(state, keys[0]), args.reps)
  table.add(
    "step",
    "JAX, 1 seed",
    seeds=1,
    time_s=t1,
    sizes=sizes,
    fw_iters=t_fw,
    compile_s=c1,
    memory=_memory(compiled1),
  )
  m = min(n, args.seed_by_seed)

  def seed_by_seed():
    return [compiled1(state, keys[j]) for j in range(m)]

  t_loop = _median_time(seed_by_seed, max(1, args.reps // 2))
  loop = table.add(
    "step", f"JAX, seed by seed ({m} calls)", seeds=m, time_s=t_loop, sizes=sizes, fw_iters=t_fw
  )
  fills = {}
  for method in FILL_METHODS if not args.quick else (DEFAULT_FILL,):
    fills[method] = _time_step(
      table, f"JAX, vmapped, fill={method}", make(method), cmdp, state, n, args.reps, sizes, t_fw
    )
  vmapped = fills[DEFAULT_FILL]
  sharded = None
  if jax.device_count() > 1:
    mesh = jax.make_mesh((jax.device_count(),), ("seeds",))
    on_seeds = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("seeds"))
    fn = jax.jit(
      jax.shard_map(
        jax.vmap(lambda st, k: oj.episode_step(agent, cmdp, st, k)),
        mesh=mesh,
        in_specs=jax.sharding.PartitionSpec("seeds"),
        out_specs=jax.sharding.PartitionSpec("seeds"),
        check_vma=False,
      )
    )
    states = jax.device_put(_batch(state, n), on_seeds)
    dkeys = jax.device_put(keys, on_seeds)
    compiled, c = _compile(fn, states, dkeys)
    t = _median_time(lambda: compiled(states, dkeys), args.reps)
    sharded = table.add(
      "step",
      f"JAX, vmapped, sharded over {jax.device_count()} devices",
      seeds=n,
      time_s=t,
      sizes=sizes,
      fw_iters=t_fw,
      compile_s=c,
    )

  np_cmdp = [
    np.asarray(x, np.float64)
    for x in (cmdp.transitions, cmdp.cost, cmdp.constraint_costs, cmdp.thresholds)
  ]
  np_cmdp[0] = np_cmdp[0] / np_cmdp[0].sum(-1, keepdims=True)  # float32 rows -> exact sums
  counts = tuple(np.array(x, np.float64) for x in state.counts[:4])
  rng = np.random.default_rng(0)

  def numpy_step():
    return npr.optaug_step(
      rng,
      *np_cmdp,
      0,
      tuple(c.copy() for c in counts),
      np.zeros(i),
      100.0,
      num_episodes=1000,
      delta=0.1,
      bonus_scale=1.0,
      num_iters=t_fw,
      step_rule="linesearch",
    )

  t_np = _median_time(numpy_step, args.numpy_reps)
  table.add("step", "NumPy, 1 seed", seeds=1, time_s=t_np, sizes=sizes, fw_iters=t_fw)
  per_seed = vmapped["time_per_seed_s"]
  ratios = {
    "vmapped_vs_numpy": t_np / per_seed,
    "vmapped_vs_seed_by_seed": loop["time_per_seed_s"] / per_seed,
    "jax_1_seed_vs_numpy": t_np / t1,
    "targets": {"vmapped_vs_numpy": 50.0, "vmapped_vs_seed_by_seed": 5.0},
  }
  if sharded:
    ratios["sharded_vs_numpy"] = t_np / sharded["time_per_seed_s"]
    ratios["sharded_vs_seed_by_seed"] = loop["time_per_seed_s"] / sharded["time_per_seed_s"]
  return ratios


def inner_section(table, args):
  """OptAug's episode step with each inner method: 1 seed and `--seeds` vmapped (I = 2)."""
  s, a, h, i, n = 10, 4, 10, 2, args.seeds
  cmdp, policy, slack = _problem(s, a, h, i)
  out = {}
  methods = {
    "frank_wolfe": dict(inner=oj.inner.frank_wolfe(num_iters=100)),
    "exact": dict(inner=oj.inner.exact()),
  }
  keys = jax.random.split(jax.random.PRNGKey(2), n)
  for name, kw in methods.items():
    agent = oj.optaug(
      num_episodes=1000, safe_policy=policy, pretrain_episodes=20, slack=slack, eta=100.0, **kw
    )
    state = _warm_state(agent, cmdp, warm=25)  # past pre-training: every step solves
    single, batched = _step_fns(agent, cmdp)
    sizes = f"S={s} A={a} H={h} I={i}"
    compiled1, c1 = _compile(single, state, keys[0])
    t1 = _median_time(lambda: compiled1(state, keys[0]), args.reps)
    info = compiled1(state, keys[0])[1]
    calls = int(info.extras["dp_calls"])
    table.add(
      "inner", f"step, {name}, 1 seed ({calls} DPs)", seeds=1, time_s=t1, sizes=sizes, compile_s=c1
    )
    states = _batch(state, n)
    compiled, c = _compile(batched, states, keys)
    t = _median_time(lambda: compiled(states, keys), args.reps)
    table.add(
      "inner",
      f"step, {name}, vmapped ({calls} DPs)",
      seeds=n,
      time_s=t,
      sizes=sizes,
      compile_s=c,
      memory=_memory(compiled),
    )
    out[name] = {"dp_calls": calls, "one_seed_s": t1, "vmapped_per_seed_s": t / n, "seeds": n}
  return out


LOOP_LMOS = 20


def _lmo_inputs(n, s, a, h):
  """`(reward, lower, upper)` of `n` random boxes of radius 0.1, float32, on the device."""
  rng = np.random.default_rng(0)
  p = rng.dirichlet(np.ones(s), size=(n, h, s, a))
  lower = jnp.asarray(np.clip(p - 0.1, 0, 1), jnp.float32)
  upper = jnp.asarray(np.clip(p + 0.1, 0, 1), jnp.float32)
  return jnp.asarray(rng.uniform(size=(n, h, s, a)), jnp.float32), lower, upper


def _lmos_in_a_loop(reward, lower, upper, fill=oj.kernels.DEFAULT_FILL):
  """`LOOP_LMOS` LMOs on one box as the inner solvers call them (the box's preparation is
  hoisted out of the loop by XLA), each reward depending on the previous occupancy."""
  body = lambda _, q: oj.extended_lmo(reward + 1e-3 * q, lower, upper, 0, fill=fill).occupancy
  return jax.lax.fori_loop(0, LOOP_LMOS, body, jnp.zeros_like(reward))


def throughput_section(table, args):
  """The throughput targets' rows, measured in one run: the LMO per seed at 256 seeds; the
  OptAug episode per seed for each inner method at --throughput-seeds (S=10 A=4 H=10 I=2), with
  the NumPy reference step and seed by seed; the episode sampler alone; and the OptAug
  default (exact, I = 1) on media_streaming over 64 seeds: a --slice-episodes slice of
  `run` past pre-training, projected to 10^5 episodes."""
  s, a, h, i = 10, 4, 10, 2
  cmdp, policy, slack = _problem(s, a, h, i)
  sizes = f"S={s} A={a} H={h} I={i}"
  out = {"seeds": args.throughput_seeds}
  # The LMO, default fill, 256 seeds.
  reward, lower, upper = _lmo_inputs(256, s, a, h)
  fn = jax.jit(jax.vmap(lambda r, lo, up: oj.extended_lmo(r, lo, up, 0)))
  compiled, c = _compile(fn, reward, lower, upper)
  t = _median_time(lambda: compiled(reward, lower, upper), args.reps * 3)
  out["lmo_us_per_seed_256"] = (
    table.add(
      "through",
      f"extended LMO, one call, fill={DEFAULT_FILL}",
      seeds=256,
      time_s=t,
      sizes=f"S={s} A={a} H={h}",
      compile_s=c,
    )["time_per_seed_s"]
    * 1e6
  )
  compiled, c = _compile(jax.jit(jax.vmap(_lmos_in_a_loop)), reward, lower, upper)
  t = _median_time(lambda: compiled(reward, lower, upper), args.reps * 3) / LOOP_LMOS
  out["lmo_in_loop_us_per_seed_256"] = (
    table.add(
      "through",
      "extended LMO, in a solver loop (per LMO)",
      seeds=256,
      time_s=t,
      sizes=f"S={s} A={a} H={h}",
      compile_s=c,
    )["time_per_seed_s"]
    * 1e6
  )
  # The episode sampler alone (policy and model fixed).
  keys = jax.random.split(jax.random.PRNGKey(3), 256)
  sample = jax.jit(jax.vmap(lambda k: oj.sample_episode(k, cmdp, policy)))
  compiled, c = _compile(sample, keys)
  t = _median_time(lambda: compiled(keys), args.reps * 3)
  out["sampler_us_per_seed_256"] = (
    table.add("through", "sample_episode", seeds=256, time_s=t, sizes=sizes, compile_s=c)[
      "time_per_seed_s"
    ]
    * 1e6
  )
  # The OptAug step per inner method and number of seeds.
  methods = {
    "frank_wolfe": dict(inner=oj.inner.frank_wolfe(num_iters=args.fw_iters)),
    "exact": dict(inner=oj.inner.exact()),
  }
  out["step_us_per_seed"] = {}
  for name, kw in methods.items():
    agent = oj.optaug(
      num_episodes=1000, safe_policy=policy, pretrain_episodes=20, slack=slack, eta=100.0, **kw
    )
    state = _warm_state(agent, cmdp, warm=25)  # past pre-training: every step solves
    single, batched = _step_fns(agent, cmdp)
    row = {}
    for n in args.throughput_seeds:
      keys = jax.random.split(jax.random.PRNGKey(2), n)
      if n == 1:
        compiled, c = _compile(single, state, keys[0])
        t = _median_time(lambda: compiled(state, keys[0]), args.reps)
      else:
        states = _batch(state, n)
        compiled, c = _compile(batched, states, keys)
        t = _median_time(lambda: compiled(states, keys), args.reps)
      row[n] = (
        table.add("through", f"OptAug step, {name}", seeds=n, time_s=t, sizes=sizes, compile_s=c)[
          "time_per_seed_s"
        ]
        * 1e6
      )
    out["step_us_per_seed"][name] = row
  np_cmdp = [
    np.asarray(x, np.float64)
    for x in (cmdp.transitions, cmdp.cost, cmdp.constraint_costs, cmdp.thresholds)
  ]
  np_cmdp[0] = np_cmdp[0] / np_cmdp[0].sum(-1, keepdims=True)
  agent = oj.optaug(
    num_episodes=1000,
    safe_policy=policy,
    pretrain_episodes=20,
    slack=slack,
    eta=100.0,
    inner=oj.inner.frank_wolfe(num_iters=args.fw_iters),
  )
  counts = tuple(np.array(x, np.float64) for x in _warm_state(agent, cmdp, warm=25).counts[:4])
  np_rng = np.random.default_rng(0)
  t_np = _median_time(
    lambda: npr.optaug_step(
      np_rng,
      *np_cmdp,
      0,
      tuple(x.copy() for x in counts),
      np.zeros(i),
      100.0,
      num_episodes=1000,
      delta=0.1,
      bonus_scale=1.0,
      num_iters=args.fw_iters,
      step_rule="linesearch",
    ),
    args.numpy_reps,
  )
  out["numpy_step_us"] = (
    table.add("through", "NumPy step, frank_wolfe", seeds=1, time_s=t_np, sizes=sizes)[
      "time_per_seed_s"
    ]
    * 1e6
  )
  fw = out["step_us_per_seed"]["frank_wolfe"]
  many = max(n for n in args.throughput_seeds if n <= 256)
  few = min(args.throughput_seeds)
  exact = out["step_us_per_seed"]["exact"]
  out["ratios"] = {
    f"frank_wolfe_vmapped_{many}_vs_numpy": out["numpy_step_us"] / fw[many],
    f"exact_vmapped_{many}_vs_numpy": out["numpy_step_us"] / exact[many],
    f"frank_wolfe_vmapped_{many}_vs_{few}_seed": fw[few] / fw[many],
    f"exact_vmapped_{many}_vs_{few}_seed": exact[few] / exact[many],
    "targets": {
      "lmo_in_loop_us_per_seed_256": 8.0,
      "vmapped_vs_numpy": 50.0,
      "vmapped_vs_1_seed": 5.0,
      "media_streaming_1e5_x64_s": 3600.0,
    },
  }
  # media_streaming, the default OptAug (exact, I = 1), 64 seeds, past pre-training.
  b = oj.benchmarks.make_benchmark("media_streaming")
  n, k = args.slice_seeds, args.slice_episodes
  agent = oj.optaug(
    num_episodes=100_000,
    safe_policy=b.safe_policy,
    pretrain_episodes=300,
    eta=100.0,
    bonus_scale=0.1,
  )
  keys = jax.random.split(jax.random.PRNGKey(4), n)
  warm = jax.jit(
    jax.vmap(lambda key: oj.run(agent, key, b.cmdp, num_episodes=300, logs="summary")[0])
  )(keys)
  go = jax.jit(
    jax.vmap(lambda key, st: oj.run(agent, key, b.cmdp, num_episodes=k, state=st, logs="summary"))
  )
  compiled, c = _compile(go, keys, warm)
  t = _median_time(lambda: compiled(keys, warm), max(1, args.reps // 3))
  row = table.add(
    "through",
    f"media_streaming OptAug, {k} episodes",
    seeds=n,
    time_s=t,
    sizes="S=10 A=2 H=10 I=1",
    compile_s=c,
  )
  out["media_streaming"] = {
    "seeds": n,
    "episodes": k,
    "slice_s": t,
    "us_per_seed_episode": row["time_per_seed_s"] / k * 1e6,
    "projected_1e5_s": t * 100_000 / k,
  }
  return out


def _thunk_profile(compiled, args, calls=3, top=8):
  """XLA:CPU time per kind of compiled op (thunk) over `calls` calls of `compiled`.

  Reads the Perfetto trace of `jax.profiler.trace`; a kind is the op's name without its
  numeric suffix (`ynn_fusion.7` -> `ynn_fusion`). Returns rows `(kind, us per call,
  events per call, share of the op time)`, largest first, or `[]` where the trace has no
  op events (other backends).
  """
  import collections  # pylint: disable=g-import-not-at-top
  import glob
  import gzip
  import tempfile

  jax.block_until_ready(compiled(*args))
  with tempfile.TemporaryDirectory() as d:
    with jax.profiler.trace(d, create_perfetto_trace=True):
      for _ in range(calls):
        jax.block_until_ready(compiled(*args))
    files = glob.glob(os.path.join(d, "**", "*perfetto_trace.json.gz"), recursive=True)
    if not files:
      return []
    with gzip.open(files[0]) as f:
      trace = json.load(f)
  events = trace["traceEvents"] if isinstance(trace, dict) else trace
  skip = ("$", "ThunkExecutor", "PjitFunction", "CommonPjRt", "end:", "while")
  total, count = collections.Counter(), collections.Counter()
  for e in events:
    name = e.get("name", "")
    if e.get("ph") != "X" or "dur" not in e or name.startswith(skip):
      continue
    kind = name.split(".")[0]
    total[kind] += e["dur"]
    count[kind] += 1
  ops = sum(total.values()) or 1.0
  return [(k, v / calls, count[k] / calls, v / ops) for k, v in total.most_common(top)]


def profile_section(table, args):
  """Where the time goes (the misses' explanation): XLA:CPU op time by kind for 20 LMOs
  in a solver loop and for one OptAug step per inner method, 256 seeds vmapped."""
  del table
  s, a, h, i = 10, 4, 10, 2
  n = min(256, args.seeds)
  jobs = {
    f"{LOOP_LMOS} LMOs in a solver loop": (
      jax.jit(jax.vmap(_lmos_in_a_loop)),
      _lmo_inputs(n, s, a, h),
    )
  }
  cmdp, policy, slack = _problem(s, a, h, i)
  for name, kw in {
    "step, frank_wolfe": dict(inner=oj.inner.frank_wolfe(num_iters=args.fw_iters)),
    "step, exact": dict(inner=oj.inner.exact()),
  }.items():
    agent = oj.optaug(
      num_episodes=1000, safe_policy=policy, pretrain_episodes=20, slack=slack, eta=100.0, **kw
    )
    _, batched = _step_fns(agent, cmdp)
    jobs[name] = (
      batched,
      (_batch(_warm_state(agent, cmdp, warm=25), n), jax.random.split(jax.random.PRNGKey(2), n)),
    )
  out = {}
  for name, (fn, fn_args) in jobs.items():
    compiled = fn.lower(*fn_args).compile()
    rows = _thunk_profile(compiled, fn_args)
    out[name] = [
      {"op": k, "us_per_call": t, "events_per_call": c, "share": sh} for k, t, c, sh in rows
    ]
    print(f"profile  {name}, {n} seeds (S={s} A={a} H={h} I={i}): op time by kind")
    for k, t, c, sh in rows:
      print(f"profile    {k:32s} {t:10.0f} us/call {c:8.0f} events/call {sh:6.1%}")
  return out


def scaling_section(table, args):
  """Per-step time of the vmapped step against seeds, S and fw_iters (one at a time)."""
  base = {"S": 10, "A": 4, "H": 10, "I": 2, "T": args.fw_iters, "N": args.seeds}
  grids = {"N": args.scale_seeds, "S": args.scale_states, "T": args.scale_fw_iters}
  out = {}
  for axis, values in grids.items():
    rows = []
    for v in values:
      cfg = dict(base, **{axis: v})
      cmdp, policy, slack = _problem(cfg["S"], cfg["A"], cfg["H"], cfg["I"])
      agent = oj.optaug(
        num_episodes=1000,
        safe_policy=policy,
        pretrain_episodes=20,
        slack=slack,
        inner=oj.inner.frank_wolfe(num_iters=cfg["T"]),
        eta=100.0,
      )
      state = _warm_state(agent, cmdp)
      sizes = f"S={cfg['S']} A={cfg['A']} H={cfg['H']} I={cfg['I']} T={cfg['T']}"
      row = _time_step(
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
  cmdp, policy, slack = _problem(10, 4, 10, 2)
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
  cmdp, policy, slack = _problem(10, 4, 10, 2)
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
      mem = _memory(fn.lower(keys).compile())
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
  cmdp, policy, slack = _problem(10, 4, 10, 2)
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
  rss0 = _peak_rss_mib()
  t0 = time.perf_counter()
  _, summary = oj.run_sharded(agent, keys, cmdp, num_episodes=k, logs="summary", batch_size=bs)
  jax.block_until_ready(summary)
  wall = time.perf_counter() - t0
  rss1 = _peak_rss_mib()
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


def _tree_bytes(tree) -> int:
  return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree)))


def _fit_slope(xs, ys):
  """Slope of the least-squares line through `(log x, log y)`."""
  return float(np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)[0])


def _grid_box(cmdp, radius=0.05):
  """A box of `radius` around the true transitions (zero off their support), in the
  CMDP's layout; `[H, ...]`."""
  p = cmdp.transitions
  support = p > 0 if cmdp.next_states is None else cmdp.next_states >= 0
  lower = jnp.where(support, jnp.clip(p - radius, 0.0, 1.0), 0.0)
  upper = jnp.where(support, jnp.clip(p + radius, 0.0, 1.0), 0.0)
  return lower, upper


def size_section(table, args):
  """Time per seed and memory against S on `gridworld(size)` (A=4, H=3 size), dense and
  sparse: the extended LMO (one problem), and the default OptAug episode (16 seeds
  vmapped, past pre-training, counts from 20 pre-training episodes)."""
  rows = []
  dense_max = args.size_dense_max
  for size in args.size_grid:
    horizon = 3 * size
    for layout in ("dense", "sparse"):
      if layout == "dense" and size > dense_max:
        num = horizon * size**2 * 4 * size**2
        rows.append(
          {
            "size": size,
            "S": size**2,
            "H": horizon,
            "layout": layout,
            "skipped": f"dense transitions [H, S, A, S'] = {num:.3g} entries"
            f" ({num * 4 / 2**30:.1f} GiB per array in float32)",
          }
        )
        print(f"size     grid {size}x{size} dense: skipped ({rows[-1]['skipped']})", flush=True)
        continue
      t0 = time.perf_counter()
      bench = oj.benchmarks.gridworld(size, sparse=layout == "sparse", dtype=jnp.float32)
      build_s = time.perf_counter() - t0
      cmdp = bench.cmdp
      ns = cmdp.next_states
      sizes = f"S={size**2} A=4 H={horizon} {layout}"
      lower, upper = _grid_box(cmdp)
      reward = jax.random.uniform(jax.random.PRNGKey(0), cmdp.cost.shape, jnp.float32)
      lmo = jax.jit(lambda r, lo, up, ns=ns: oj.extended_lmo(r, lo, up, 0, next_states=ns).value)
      lmo_s = _median_time(lambda: lmo(reward, lower, upper), args.reps)
      table.add("size", "extended LMO, one problem", seeds=1, time_s=lmo_s, sizes=sizes)
      row = {
        "size": size,
        "S": size**2,
        "H": horizon,
        "layout": layout,
        "entries": int(lower.size),
        "lmo_s": lmo_s,
        "build_s": build_s,
      }
      # The same LMO for --size-seeds problems vmapped (a run's case): time per seed.
      n = args.size_seeds
      rewards = jax.random.uniform(jax.random.PRNGKey(2), (n,) + cmdp.cost.shape, jnp.float32)
      lmo_batch = jax.jit(jax.vmap(lmo, in_axes=(0, None, None)))
      row["lmo_vmapped_s_per_seed"] = (
        _median_time(lambda: lmo_batch(rewards, lower, upper), args.reps) / n
      )
      table.add(
        "size",
        f"extended LMO, {n} seeds vmapped",
        seeds=n,
        time_s=row["lmo_vmapped_s_per_seed"] * n,
        sizes=sizes,
      )
      if ns is not None:  # stationary bounds: one [1, S, A, N] box for every step
        lo1, up1, ns1 = lower[:1], upper[:1], ns[:1]
        lmo1 = jax.jit(lambda r, lo, up: oj.extended_lmo(r, lo, up, 0, next_states=ns1).value)
        row["lmo_stationary_s"] = _median_time(lambda: lmo1(reward, lo1, up1), args.reps)
        table.add(
          "size",
          "extended LMO, stationary box",
          seeds=1,
          time_s=row["lmo_stationary_s"],
          sizes=sizes,
        )
      for stationary in (False, True):
        support = np.asarray(cmdp.transitions) > 0 if ns is None else np.asarray(ns)
        if stationary:
          support = support[0]
        setting = oj.Setting(
          support=support,
          stationary=stationary,
          name="known support" + (", stationary" if stationary else ""),
        )
        agent = oj.optaug(
          num_episodes=100_000,
          safe_policy=bench.safe_policy,
          slack=bench.slack,
          pretrain_episodes=20,
          setting=setting,
        )
        n = args.size_seeds
        keys = jax.random.split(jax.random.PRNGKey(1), n)
        states = jax.vmap(
          lambda _: agent.init(
            cmdp.thresholds,
            cmdp.initial_state,
            num_states=cmdp.num_states,
            num_actions=cmdp.num_actions,
            horizon=cmdp.horizon,
          )
        )(keys)
        step = jax.jit(
          jax.vmap(
            lambda st, k: oj.run(agent, k, cmdp, state=st, num_episodes=1, logs="summary")[0]
          )
        )
        compiled, compile_s = _compile(step, states, keys)
        for i in range(20):  # pre-training episodes (one compiled step, 20 calls)
          states = compiled(states, jax.random.split(jax.random.PRNGKey(100 + i), n))
        episode_s = _median_time(lambda: compiled(states, keys), max(2, args.reps // 2))
        label = "stationary" if stationary else "per-step"
        table.add(
          "size",
          f"OptAug episode, {label} counts",
          seeds=n,
          time_s=episode_s,
          sizes=sizes,
          compile_s=compile_s,
          memory=_memory(compiled),
        )
        state_bytes = _tree_bytes(jax.tree.map(lambda x: x[0], states))
        row[f"episode_{label}_s_per_seed"] = episode_s / n
        row[f"state_{label}_bytes_per_seed"] = state_bytes
        row[f"state_{label}_bytes_64_seeds"] = 64 * state_bytes
        print(
          f"size     state per seed ({label}): {state_bytes / 2**20:.2f} MiB,"
          f" 64 seeds {64 * state_bytes / 2**30:.3f} GiB",
          flush=True,
        )
      rows.append(row)
  fits = {}
  for layout in ("dense", "sparse"):
    done = [r for r in rows if r["layout"] == layout and "lmo_s" in r]
    if len(done) >= 2:
      fits[layout] = {
        "lmo_slope_vs_S": _fit_slope([r["S"] for r in done], [r["lmo_s"] for r in done]),
        "lmo_slope_vs_entries": _fit_slope(
          [r["entries"] for r in done], [r["lmo_s"] for r in done]
        ),
        "episode_slope_vs_S": _fit_slope(
          [r["S"] for r in done], [r["episode_per-step_s_per_seed"] for r in done]
        ),
      }
      print(
        f"size     {layout}: LMO time ~ S^{fits[layout]['lmo_slope_vs_S']:.2f}"
        f" (entries^{fits[layout]['lmo_slope_vs_entries']:.2f}), episode ~"
        f" S^{fits[layout]['episode_slope_vs_S']:.2f}",
        flush=True,
      )
  lp_rows = []
  for size in args.size_lp_grid:  # OptCMDP's episode LP: H S A S' variables
    bench = oj.benchmarks.gridworld(size, sparse=False)
    cmdp = bench.cmdp
    lower, upper = (np.asarray(x, np.float64) for x in _grid_box(cmdp))
    t0 = time.perf_counter()
    oj.lp.solve_extended_lp(
      np.asarray(cmdp.cost),
      np.asarray(cmdp.constraint_costs),
      lower,
      upper,
      0,
      np.asarray(cmdp.thresholds),
    )
    lp_s = time.perf_counter() - t0
    lp_rows.append({"size": size, "S": size**2, "variables": int(lower.size), "lp_s": lp_s})
    print(
      f"size     OptCMDP episode LP, grid {size}x{size}: {lower.size:.3g} variables, {lp_s:.2f} s",
      flush=True,
    )
  return {"rows": rows, "fits": fits, "lp": lp_rows}


def plot_size(size: dict, path: str) -> None:
  """Log-log figure of `size_section`'s times per seed against S, dense and sparse."""
  import matplotlib  # pylint: disable=import-outside-toplevel

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  series = (
    ("lmo_s", "extended LMO, one problem", axes[0]),
    ("lmo_vmapped_s_per_seed", "extended LMO, per seed, vmapped", axes[0]),
    ("lmo_stationary_s", "extended LMO, stationary box", axes[0]),
    ("episode_per-step_s_per_seed", "OptAug episode, per-step counts", axes[1]),
    ("episode_stationary_s_per_seed", "OptAug episode, stationary counts", axes[1]),
  )
  for layout, marker in (("dense", "s-"), ("sparse", "o-")):
    done = [r for r in size["rows"] if r["layout"] == layout and "lmo_s" in r]
    for key, label, ax in series:
      pts = [(r["S"], r[key]) for r in done if key in r]
      if pts:
        ax.plot(*zip(*pts), marker, label=f"{layout}: {label}")
  for ax, title in zip(axes, ("extended LMO", "default OptAug episode, per seed")):
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("states S (gridworld, A = 4, H = 3 sqrt(S))")
    ax.set_ylabel("seconds")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
  fig.tight_layout()
  result_files.save_figure(fig, path)
  plt.close(fig)


def hardware():
  cpu = platform.processor()
  try:
    with open("/proc/cpuinfo") as f:
      names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    cpu = names[0] if names else cpu
  except OSError:
    pass
  return {
    "platform": platform.platform(),
    "cpu": cpu,
    "cpu_count": os.cpu_count(),
    "jax_backend": jax.default_backend(),
    "jax": jax.__version__,
    "devices": [str(d) for d in jax.devices()],
    "python": platform.python_version(),
  }


def parse_args(argv):
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument("--quick", action="store_true", help="tiny sizes, for CI")
  p.add_argument(
    "--host-devices",
    type=int,
    default=None,
    help="CPU devices to create (command line only: set before jax starts)",
  )
  p.add_argument("--sections", default="kernel,step,inner,throughput,scaling,compile,memory,sweep")
  p.add_argument("--seeds", type=int, default=256)
  p.add_argument("--fw-iters", type=int, default=100)
  p.add_argument("--kernel-seeds", type=int, default=100)
  p.add_argument("--seed-by-seed", type=int, default=16, help="calls timed seed by seed")
  p.add_argument("--reps", type=int, default=7)
  p.add_argument("--numpy-reps", type=int, default=3)
  p.add_argument(
    "--scale-seeds", type=lambda s: [int(x) for x in s.split(",")], default=[16, 64, 256, 1024]
  )
  p.add_argument(
    "--throughput-seeds", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16, 256, 1024]
  )
  p.add_argument(
    "--scale-states", type=lambda s: [int(x) for x in s.split(",")], default=[5, 10, 20]
  )
  p.add_argument(
    "--scale-fw-iters", type=lambda s: [int(x) for x in s.split(",")], default=[25, 50, 100, 200]
  )
  p.add_argument("--memory-seeds", type=int, default=64)
  p.add_argument(
    "--memory-episodes", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1000, 10000]
  )
  p.add_argument("--slice-seeds", type=int, default=64)
  p.add_argument("--slice-episodes", type=int, default=2000)
  p.add_argument("--sweep-seeds", type=int, default=10_000)
  p.add_argument("--sweep-episodes", type=int, default=2)
  p.add_argument("--sweep-batch", type=int, default=500)
  p.add_argument(
    "--size-grid",
    type=lambda s: [int(x) for x in s.split(",")],
    default=[5, 10, 20, 35, 50],
    help="grid sides of --sections size",
  )
  p.add_argument(
    "--size-dense-max", type=int, default=20, help="largest grid side run in the dense layout"
  )
  p.add_argument("--size-seeds", type=int, default=16)
  p.add_argument(
    "--size-lp-grid",
    type=lambda s: [int(x) for x in s.split(",")],
    default=[3, 5, 7],
    help="grid sides at which OptCMDP's LP is timed",
  )
  p.add_argument("--out", default="results/benchmark.json")
  p.add_argument(
    "--replot", default=None, help="only draw the size figure of a saved report (JSON), next to it"
  )
  args = p.parse_args(argv)
  if args.quick:
    args.seeds, args.fw_iters, args.kernel_seeds, args.seed_by_seed = 8, 5, 8, 2
    args.reps, args.numpy_reps = 2, 1
    args.scale_seeds, args.scale_states, args.scale_fw_iters = [4, 8], [3, 5], [2, 4]
    args.throughput_seeds = [1, 8]
    args.memory_seeds, args.memory_episodes = 2, [10, 100]
    args.sweep_seeds, args.sweep_episodes, args.sweep_batch = 50, 1, 16
    args.slice_seeds, args.slice_episodes = 2, 5
    args.size_grid, args.size_dense_max, args.size_seeds = [3, 5], 5, 2
    args.size_lp_grid = [3]
  return args


def main(argv=None):
  args = parse_args(argv)
  if args.replot:  # the size figure of a saved report, next to it
    with open(args.replot) as f:
      plot_size(json.load(f)["size"], os.path.splitext(args.replot)[0] + ".png")
    return None
  sections = args.sections.split(",")
  hw = hardware()
  print(
    f"optaug-jax {oj.__version__} benchmark: {hw['cpu']} ({hw['cpu_count']} cores),"
    f" jax {hw['jax']} on {hw['jax_backend']}, {jax.device_count()} device(s), float32"
  )
  table = Table()
  Table.header()
  results = {"arguments": vars(args), "hardware": hw}
  for name in sections:
    results[name] = globals()[f"{name}_section"](table, args)
  results["rows"] = table.rows
  if "kernel" in results:
    k = results["kernel"]
    print(
      f"kernel target (<= 30 us/seed at 100 seeds): best fill {k['best_fill']}"
      f" {k['best_us_per_seed']:.1f} us/seed; NumPy {k['numpy_us']:.0f} us"
    )
  if "step" in results:
    r = results["step"]
    print(
      f"step ratios: vmapped vs NumPy {r['vmapped_vs_numpy']:.1f}x (target 50x),"
      f" vmapped vs seed by seed {r['vmapped_vs_seed_by_seed']:.1f}x (target 5x),"
      f" JAX 1 seed vs NumPy {r['jax_1_seed_vs_numpy']:.1f}x"
      + (
        f"; sharded vs NumPy {r['sharded_vs_numpy']:.1f}x,"
        f" sharded vs seed by seed {r['sharded_vs_seed_by_seed']:.1f}x"
        if "sharded_vs_numpy" in r
        else ""
      )
    )
  if "throughput" in results:
    r = results["throughput"]
    ms = r["media_streaming"]
    print(
      f"throughput: LMO {r['lmo_in_loop_us_per_seed_256']:.1f} us/seed at 256 in a"
      f" solver loop ({r['lmo_us_per_seed_256']:.1f} as one call; target 8);"
      + "".join(f" {k} {v:.1f}x;" for k, v in r["ratios"].items() if k != "targets")
      + f" media_streaming {ms['us_per_seed_episode']:.1f} us per seed-episode,"
      f" 10^5 episodes x {ms['seeds']} seeds projected {ms['projected_1e5_s']:.0f} s"
      " (target 3600 s)"
    )
  if args.out:  # one file, written whole or not at all
    result_files.write_report(args.out, results)
    if "size" in results:
      plot_size(results["size"], os.path.splitext(args.out)[0] + ".png")
  return results


if __name__ == "__main__":
  cli.main_guard("benchmark", main)
