"""`benchmark.py`'s `kernel`, `step` and `inner` sections: the extended-DP backward pass per
fill, the OptAug episode step at 1 seed, seed by seed, vmapped and sharded against NumPy,
and the step per inner method."""

from __future__ import annotations

import time

import jax
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import numpy_reference as npr
from optaug_jax.experiment import timing


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
  for method in timing.FILL_METHODS:
    fn = jax.jit(jax.vmap(lambda r, lo, up, m=method: oj.TransitionSet(lo, up, fill=m).lmo(r, 0)))
    compiled, c = timing.compile_timed(fn, reward, lower, upper)
    t = timing.median_time(lambda: compiled(reward, lower, upper), args.reps * 3)
    out[method] = table.add(
      "kernel",
      f"extended LMO (backward + forward), fill={method}",
      seeds=b,
      time_s=t,
      sizes=sizes,
      compile_s=c,
      memory=timing.memory(compiled),
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
  best = min(timing.FILL_METHODS, key=lambda m: out[m]["time_per_seed_s"])
  return {
    "best_fill": best,
    "best_us_per_seed": out[best]["time_per_seed_s"] * 1e6,
    "numpy_us": t * 1e6,
    "target_us_per_seed": 30.0,
  }


def step_section(table, args):
  s, a, h, i, t_fw, n = 10, 4, 10, 2, args.fw_iters, args.seeds
  cmdp, policy, slack = timing.problem(s, a, h, i)
  make = lambda fill: oj.optaug(
    num_episodes=1000,
    safe_policy=policy,
    pretrain_episodes=20,
    slack=slack,
    inner=oj.inner.frank_wolfe(num_iters=t_fw),
    eta=100.0,
    fill=fill,
  )
  agent = make(timing.DEFAULT_FILL)
  state = timing.warm_state(agent, cmdp)
  sizes = f"S={s} A={a} H={h} I={i} T={t_fw}"
  single, _ = timing.step_fns(agent, cmdp)
  keys = jax.random.split(jax.random.PRNGKey(2), n)
  compiled1, c1 = timing.compile_timed(single, state, keys[0])
  t1 = timing.median_time(lambda: compiled1(state, keys[0]), args.reps)
  table.add(
    "step",
    "JAX, 1 seed",
    seeds=1,
    time_s=t1,
    sizes=sizes,
    fw_iters=t_fw,
    compile_s=c1,
    memory=timing.memory(compiled1),
  )
  m = min(n, args.seed_by_seed)

  def seed_by_seed():
    return [compiled1(state, keys[j]) for j in range(m)]

  t_loop = timing.median_time(seed_by_seed, max(1, args.reps // 2))
  loop = table.add(
    "step", f"JAX, seed by seed ({m} calls)", seeds=m, time_s=t_loop, sizes=sizes, fw_iters=t_fw
  )
  fills = {}
  for method in timing.FILL_METHODS if not args.quick else (timing.DEFAULT_FILL,):
    fills[method] = timing.time_step(
      table, f"JAX, vmapped, fill={method}", make(method), cmdp, state, n, args.reps, sizes, t_fw
    )
  vmapped = fills[timing.DEFAULT_FILL]
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
    states = jax.device_put(timing.batch(state, n), on_seeds)
    dkeys = jax.device_put(keys, on_seeds)
    compiled, c = timing.compile_timed(fn, states, dkeys)
    t = timing.median_time(lambda: compiled(states, dkeys), args.reps)
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
      (*np_cmdp, 0),
      tuple(c.copy() for c in counts),
      np.zeros(i),
      100.0,
      radii=(1000, 0.1, 1.0),
      num_iters=t_fw,
      step_rule="linesearch",
    )

  t_np = timing.median_time(numpy_step, args.numpy_reps)
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
  cmdp, policy, slack = timing.problem(s, a, h, i)
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
    state = timing.warm_state(agent, cmdp, warm=25)  # past pre-training: every step solves
    single, batched = timing.step_fns(agent, cmdp)
    sizes = f"S={s} A={a} H={h} I={i}"
    compiled1, c1 = timing.compile_timed(single, state, keys[0])
    t1 = timing.median_time(lambda: compiled1(state, keys[0]), args.reps)
    info = compiled1(state, keys[0])[1]
    calls = int(info.extras["dp_calls"])
    table.add(
      "inner", f"step, {name}, 1 seed ({calls} DPs)", seeds=1, time_s=t1, sizes=sizes, compile_s=c1
    )
    states = timing.batch(state, n)
    compiled, c = timing.compile_timed(batched, states, keys)
    t = timing.median_time(lambda: compiled(states, keys), args.reps)
    table.add(
      "inner",
      f"step, {name}, vmapped ({calls} DPs)",
      seeds=n,
      time_s=t,
      sizes=sizes,
      compile_s=c,
      memory=timing.memory(compiled),
    )
    out[name] = {"dp_calls": calls, "one_seed_s": t1, "vmapped_per_seed_s": t / n, "seeds": n}
  return out
