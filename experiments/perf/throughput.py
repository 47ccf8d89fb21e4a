"""`benchmark.py`'s `throughput` and `profile` sections: the throughput targets in one run,
and XLA:CPU op time by kind from a `jax.profiler` trace."""

from __future__ import annotations

import jax
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import numpy_reference as npr
from optaug_jax.experiment import timing


def throughput_section(table, args):
  """The throughput targets' rows, measured in one run: the LMO per seed at 256 seeds; the
  OptAug episode per seed for each inner method at --throughput-seeds (S=10 A=4 H=10 I=2), with
  the NumPy reference step and seed by seed; the episode sampler alone; and the OptAug
  default (exact, I = 1) on media_streaming over 64 seeds: a --slice-episodes slice of
  `run` past pre-training, projected to 10^5 episodes."""
  s, a, h, i = 10, 4, 10, 2
  cmdp, policy, slack = timing.problem(s, a, h, i)
  sizes = f"S={s} A={a} H={h} I={i}"
  out = {"seeds": args.throughput_seeds}
  # The LMO, default fill, 256 seeds.
  reward, lower, upper = timing.lmo_inputs(256, s, a, h)
  fn = jax.jit(jax.vmap(lambda r, lo, up: oj.TransitionSet(lo, up).lmo(r, 0)))
  compiled, c = timing.compile_timed(fn, reward, lower, upper)
  t = timing.median_time(lambda: compiled(reward, lower, upper), args.reps * 3)
  out["lmo_us_per_seed_256"] = (
    table.add(
      "through",
      f"extended LMO, one call, fill={timing.DEFAULT_FILL}",
      seeds=256,
      time_s=t,
      sizes=f"S={s} A={a} H={h}",
      compile_s=c,
    )["time_per_seed_s"]
    * 1e6
  )
  compiled, c = timing.compile_timed(jax.jit(jax.vmap(timing.lmos_in_a_loop)), reward, lower, upper)
  t = timing.median_time(lambda: compiled(reward, lower, upper), args.reps * 3) / timing.LOOP_LMOS
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
  compiled, c = timing.compile_timed(sample, keys)
  t = timing.median_time(lambda: compiled(keys), args.reps * 3)
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
    state = timing.warm_state(agent, cmdp, warm=25)  # past pre-training: every step solves
    single, batched = timing.step_fns(agent, cmdp)
    row = {}
    for n in args.throughput_seeds:
      keys = jax.random.split(jax.random.PRNGKey(2), n)
      if n == 1:
        compiled, c = timing.compile_timed(single, state, keys[0])
        t = timing.median_time(lambda: compiled(state, keys[0]), args.reps)
      else:
        states = timing.batch(state, n)
        compiled, c = timing.compile_timed(batched, states, keys)
        t = timing.median_time(lambda: compiled(states, keys), args.reps)
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
  counts = tuple(
    np.array(x, np.float64) for x in timing.warm_state(agent, cmdp, warm=25).counts[:4]
  )
  np_rng = np.random.default_rng(0)
  t_np = timing.median_time(
    lambda: npr.optaug_step(
      np_rng,
      (*np_cmdp, 0),
      tuple(x.copy() for x in counts),
      np.zeros(i),
      100.0,
      radii=(1000, 0.1, 1.0),
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
  compiled, c = timing.compile_timed(go, keys, warm)
  t = timing.median_time(lambda: compiled(keys, warm), max(1, args.reps // 3))
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


def profile_section(table, args):
  """Where the time goes (the misses' explanation): XLA:CPU op time by kind for 20 LMOs
  in a solver loop and for one OptAug step per inner method, 256 seeds vmapped."""
  del table
  s, a, h, i = 10, 4, 10, 2
  n = min(256, args.seeds)
  jobs = {
    f"{timing.LOOP_LMOS} LMOs in a solver loop": (
      jax.jit(jax.vmap(timing.lmos_in_a_loop)),
      timing.lmo_inputs(n, s, a, h),
    )
  }
  cmdp, policy, slack = timing.problem(s, a, h, i)
  for name, kw in {
    "step, frank_wolfe": dict(inner=oj.inner.frank_wolfe(num_iters=args.fw_iters)),
    "step, exact": dict(inner=oj.inner.exact()),
  }.items():
    agent = oj.optaug(
      num_episodes=1000, safe_policy=policy, pretrain_episodes=20, slack=slack, eta=100.0, **kw
    )
    _, batched = timing.step_fns(agent, cmdp)
    jobs[name] = (
      batched,
      (
        timing.batch(timing.warm_state(agent, cmdp, warm=25), n),
        jax.random.split(jax.random.PRNGKey(2), n),
      ),
    )
  out = {}
  for name, (fn, fn_args) in jobs.items():
    compiled = fn.lower(*fn_args).compile()
    rows = timing.thunk_profile(compiled, fn_args)
    out[name] = [
      {"op": k, "us_per_call": t, "events_per_call": c, "share": sh} for k, t, c, sh in rows
    ]
    print(f"profile  {name}, {n} seeds (S={s} A={a} H={h} I={i}): op time by kind")
    for k, t, c, sh in rows:
      print(f"profile    {k:32s} {t:10.0f} us/call {c:8.0f} events/call {sh:6.1%}")
  return out
