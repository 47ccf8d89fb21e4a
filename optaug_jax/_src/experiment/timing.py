"""Measurement tools of the benchmarks (`experiments/benchmark.py`, `experiments/perf/`):
medians of timed calls after compilation, XLA's buffer sizes, the results table, the
problems and warm states the sections time, the LMO solver-loop inputs (also
`lmo_size.py`'s), op profiles, and the hardware record."""

from __future__ import annotations

import json
import os
import platform
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj


def median_time(fn, reps):
  """Median wall time of `fn()` over `reps` calls (after one warm-up call)."""
  jax.block_until_ready(fn())
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return float(np.median(times))


def compile_timed(jitted, *args):
  """(compiled, seconds to lower and compile)."""
  t0 = time.perf_counter()
  compiled = jitted.lower(*args).compile()
  return compiled, time.perf_counter() - t0


def memory(compiled):
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


def peak_rss_mib():
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def problem(s, a, h, i, dtype=jnp.float32):
  cmdp = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=s, num_actions=a, horizon=h, num_constraints=i, dtype=dtype
  )
  policy, slack = oj.safest_policy(cmdp)
  return cmdp, policy, float(slack)


def warm_state(agent, cmdp, warm=20):
  """A state after `warm` pre-training episodes (non-trivial counts), then exploring."""
  state, _ = oj.run(agent, jax.random.PRNGKey(1), cmdp, num_episodes=warm)
  return state


def batch(tree, n):
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


LOOP_LMOS = 20


def lmo_inputs(n, s, a, h):
  """`(reward, lower, upper)` of `n` random boxes of radius 0.1, float32, on the device."""
  rng = np.random.default_rng(0)
  p = rng.dirichlet(np.ones(s), size=(n, h, s, a))
  lower = jnp.asarray(np.clip(p - 0.1, 0, 1), jnp.float32)
  upper = jnp.asarray(np.clip(p + 0.1, 0, 1), jnp.float32)
  return jnp.asarray(rng.uniform(size=(n, h, s, a)), jnp.float32), lower, upper


def lmos_in_a_loop(reward, lower, upper, fill=oj.kernels.DEFAULT_FILL):
  """`LOOP_LMOS` LMOs on one box as the inner solvers call them (the box's preparation is
  hoisted out of the loop by XLA), each reward depending on the previous occupancy."""
  box = oj.TransitionSet(lower, upper, fill=fill)
  body = lambda _, q: box.lmo(reward + 1e-3 * q, 0).occupancy
  return jax.lax.fori_loop(0, LOOP_LMOS, body, jnp.zeros_like(reward))


# The profiler keeps at most this many complete ("X") events of a trace and drops the rest,
# without a word: the later ops of a long program (measured, jax 0.10.2: a loop of 200,000
# or 400,000 steps of four ops keeps 1,000,000 events, the first in time).
TRACE_EVENT_CAP = 1_000_000


class TraceTruncatedError(RuntimeError):
  """A trace at the profiler's event cap (`TRACE_EVENT_CAP`): its op times are short."""


def trace_events(compiled, args, calls):
  """The Perfetto trace events of `calls` calls of `compiled(*args)` under
  `jax.profiler.trace` (after one untraced call); `[]` where the trace has none.

  Raises `TraceTruncatedError` where the trace holds `TRACE_EVENT_CAP` complete events: the
  profiler dropped the rest, and sums over the events would miss the later ops.
  """
  import glob  # pylint: disable=g-import-not-at-top
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
  complete = sum(e.get("ph") == "X" for e in events)
  if complete >= TRACE_EVENT_CAP:
    raise TraceTruncatedError(
      f"the trace of {calls} call(s) reached the profiler's cap of {TRACE_EVENT_CAP:,} events"
      " and lost the rest: profile fewer calls or a shorter program"
    )
  return events


def thunk_profile(compiled, args, calls=3, top=8):
  """XLA:CPU time per kind of compiled op (thunk) over `calls` calls of `compiled`.

  Reads the Perfetto trace of `jax.profiler.trace`; a kind is the op's name without its
  numeric suffix (`ynn_fusion.7` -> `ynn_fusion`). Returns rows `(kind, us per call,
  events per call, share of the op time)`, largest first, or `[]` where the trace has no
  op events (other backends).
  """
  import collections  # pylint: disable=g-import-not-at-top

  events = trace_events(compiled, args, calls)
  skip = ("$", "ThunkExecutor", "PjitFunction", "CommonPjRt", "end:", "while")
  total: collections.Counter[str] = collections.Counter()
  count: collections.Counter[str] = collections.Counter()
  for e in events:
    name = e.get("name", "")
    if e.get("ph") != "X" or "dur" not in e or name.startswith(skip):
      continue
    kind = name.split(".")[0]
    total[kind] += e["dur"]
    count[kind] += 1
  ops = sum(total.values()) or 1.0
  return [(k, v / calls, count[k] / calls, v / ops) for k, v in total.most_common(top)]


def tree_bytes(tree) -> int:
  return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree)))


def fit_slope(xs, ys):
  """Slope of the least-squares line through `(log x, log y)`."""
  return float(np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)[0])


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


FILL_METHODS, DEFAULT_FILL = oj.kernels.FILL_METHODS, oj.kernels.DEFAULT_FILL


def step_fns(agent, cmdp):
  single = jax.jit(lambda st, k: oj.episode_step(agent, cmdp, st, k))
  batched = jax.jit(jax.vmap(lambda st, k: oj.episode_step(agent, cmdp, st, k)))
  return single, batched


def time_step(table, name, agent, cmdp, state, seeds, reps, sizes, fw_iters):
  _, batched = step_fns(agent, cmdp)
  states = batch(state, seeds)
  keys = jax.random.split(jax.random.PRNGKey(2), seeds)
  compiled, c = compile_timed(batched, states, keys)
  t = median_time(lambda: compiled(states, keys), reps)
  return table.add(
    "step",
    name,
    seeds=seeds,
    time_s=t,
    sizes=sizes,
    fw_iters=fw_iters,
    compile_s=c,
    memory=memory(compiled),
  )
