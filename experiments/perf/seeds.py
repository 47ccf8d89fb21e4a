"""Hundreds of seeds: the cost of a seed-episode at 16, 64 and 256 vmapped seeds, and with
`oj.run_sharded(..., batch_size=B)` (`auto`: the batch from the memory budget), with each
configuration's peak resident memory, and the episode against the hardware's floor.

For each problem (`episode_cost.py`'s table, imported: `--problems`, default
gridworld20_sparse and reservoir) and agent (optaug, optdual: built as `episode_cost.py`
builds them, `--eta`, the exact inner solver, each problem's setting and bonus), each
configuration (seeds, batch size) runs in a fresh subprocess (`--one`), so that its peak
resident memory is its own:

- the agents' initial states, vmapped over the seeds (`oj.agents.init_agent`), and one
  jitted chunk of `--episodes` episodes (`optaug_jax.experiment.cost_table.chunk`:
  `jit(vmap(run))` over every seed, or `run_sharded`'s `lax.map` over vmapped batches of `B` seeds);
- the first call compiles and plays the pre-training (OptAug's `pretrain_episodes` is one
  chunk, as in `episode_cost.py`; OptDual plays as many episodes), untimed; the next
  `--reps` calls (the early window after it, each from the state the last one left) are
  timed: ms per seed-episode, the median over the calls;
- the process's CPU time over the same calls (every thread), per seed-episode: on a core
  shared with other processes the wall time is inflated, the CPU time much less;
- peak RSS: `ru_maxrss` of the subprocess (compilation included), and the peak over the
  timed calls alone (`VmHWM`, reset through `/proc/self/clear_refs` before them, where the
  kernel allows it) and what it adds to the RSS they start from (`+timed`: the memory the
  episodes need beyond the compiled program's); OptAug's extended DPs per episode (the
  mean, and the mean over episodes of the maximum over each vmapped batch of seeds: what a
  batch pays).

The floor (measured in the same run, in the parent, before the children): the time to read
one seed's confidence set once, `2 x H x S x A x N` bounds (lower and upper, `N` the next
states of a row: its slots in the sparse layout) of the float dtype, at the bandwidth this
machine streams (`_bandwidth`: a jitted sum over 512 MiB of float32, the median of 10
calls). "floors" is the seed-episode's wall time over it.

Printed: a table (seeds, batch size, wall and CPU ms per seed-episode, each one's ratio to
the smallest seed count vmapped, floors, peak RSS, the first call's seconds, OptAug's
DPs); saved (`--out`, JSON rewritten after each configuration) with the arguments, the
bandwidth and the hardware.

  taskset -c 1 python experiments/perf/seeds.py --out results/perf_seeds.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def _ints(text):
  return [int(x) for x in text.split(",") if x]


def parse_args(argv=None):
  p = argparse.ArgumentParser(
    prog="seeds.py",
    description=__doc__,
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  p.add_argument(
    "--problems",
    default="gridworld20_sparse,reservoir",
    help="comma-separated names of episode_cost.py's problem table (default: %(default)s)",
  )
  p.add_argument("--agents", default="optaug,optdual", help="(default: %(default)s)")
  p.add_argument("--seeds", default="16,64,256", help="vmapped seed counts (default: %(default)s)")
  p.add_argument(
    "--batch-sizes",
    default="16,32",
    help="run_sharded's batch_size, at the largest --seeds; auto: chosen from the memory"
    " budget, the choice recorded (default: %(default)s)",
  )
  p.add_argument(
    "--episodes",
    type=int,
    default=5,
    help="episodes per jitted chunk; OptAug's pre-training is one chunk (default: %(default)s)",
  )
  p.add_argument(
    "--reps", type=int, default=2, help="timed chunks, the median (default: %(default)s)"
  )
  p.add_argument("--eta", type=float, default=20.0)
  p.add_argument("--inner-tol", type=float, default=0.0)
  p.add_argument("--timeout", type=float, default=900.0, help="seconds per configuration")
  p.add_argument("--out", default="results/perf_seeds.json")
  p.add_argument("--one", help=argparse.SUPPRESS)  # PROBLEM,AGENT,SEEDS,BATCH (a child)
  return p.parse_args(argv)


def _status_kib(field):
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith(field + ":"):
          return int(line.split()[1])
  except OSError:
    pass
  return None


def _reset_peak() -> bool:
  """Resets `VmHWM` to the current RSS (Linux >= 4.0); False where not allowed."""
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
    return True
  except OSError:
    return False


def _batch_max_mean(dp, batch_size):
  """The mean over episodes of the maximum over each batch of seeds (`[seeds, episodes]`),
  averaged over the batches: the DPs a vmapped batch pays."""
  size = batch_size if isinstance(batch_size, int) and batch_size else dp.shape[0]
  groups = [dp[i : i + size] for i in range(0, dp.shape[0], size)]
  return float(sum(g.max(axis=0).mean() * len(g) for g in groups) / dp.shape[0])


def one(args):
  """A child: one configuration, its row printed as one JSON line (`ROW {...}`)."""
  import jax
  import numpy as np

  import optaug_jax as oj
  from optaug_jax._src import memory
  from optaug_jax.experiment import cost_table as ec
  from optaug_jax.experiment import timing

  problem, name, seeds, batch_size = args.one.split(",")
  seeds = int(seeds)
  batch_size = "auto" if batch_size == "auto" else int(batch_size) or None
  bench_name, kwargs, setting_name, bonus = ec.entry(problem)
  start = time.perf_counter()
  bench = ec.benchmark(bench_name, kwargs)
  cmdp = bench.cmdp
  setting = oj.named_setting(setting_name, cmdp)
  n = args.episodes
  total = n * (1 + args.reps)
  agent = ec.agents(bench, setting, bonus, total, n, args.eta, [name], args.inner_tol)[name]
  fn = ec.chunk(agent, cmdp, n, batch_size)
  chosen = []  # what batch_size="auto" chose
  fitting = memory.fitting

  def spy(*a):
    out = fitting(*a)
    chosen.append(out[1])
    return out

  memory.fitting = spy
  state = timing.batch(oj.agents.init_agent(agent, cmdp), seeds)
  h, s, a, n_next = state.counts.transitions.shape[1:]
  bounds_bytes = 2 * cmdp.horizon * s * a * n_next * np.dtype(cmdp.cost.dtype).itemsize
  built = time.perf_counter() - start
  rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
  start = time.perf_counter()
  state, _ = jax.block_until_ready(fn(ec.keys(seeds, 0), state))  # compile + pre-training
  first = time.perf_counter() - start
  rss_compiled = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
  reset = _reset_peak()
  rss_start = _status_kib("VmRSS")
  times, cpu, dps = [], [], []
  for rep in range(args.reps):
    keys = ec.keys(seeds, 1 + rep)
    start, start_cpu = time.perf_counter(), time.process_time()
    state, log = jax.block_until_ready(fn(keys, state))
    times.append(time.perf_counter() - start)
    cpu.append(time.process_time() - start_cpu)
    if "dp_calls" in log.extras:
      dps.append(np.asarray(log.extras["dp_calls"]))
  seconds = float(np.median(times))
  row = {
    "problem": problem,
    "agent": name,
    "S": cmdp.num_states,
    "A": cmdp.num_actions,
    "H": cmdp.horizon,
    "I": int(cmdp.constraint_costs.shape[0]),
    "seeds": seeds,
    "batch_size": batch_size,
    "auto_chose": (chosen[0] or "all at once") if chosen else None,
    "episodes_per_chunk": n,
    "bounds_bytes_per_seed": int(bounds_bytes),  # 2 x H x S x A x N of the dtype: the floor
    "optaug_jax": os.path.dirname(oj.__file__),  # which copy of the library ran
    "ms_per_seed_episode": 1e3 * seconds / (seeds * n),
    "chunk_seconds": times,
    # CPU seconds of the process (every thread): the measure that other processes on the
    # same core do not inflate.
    "cpu_ms_per_seed_episode": 1e3 * float(np.median(cpu)) / (seeds * n),
    "build_s": built,
    "compile_and_pretrain_s": first,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    "rss_after_build_mib": rss_built,
    "peak_rss_through_compile_mib": rss_compiled,
    "peak_rss_timed_mib": _status_kib("VmHWM") / 1024.0 if reset else None,
    # What the timed calls needed above the RSS they started from (compiled, pre-trained).
    "timed_extra_mib": (_status_kib("VmHWM") - rss_start) / 1024.0 if reset else None,
  }
  if dps:
    dp = np.concatenate(dps, axis=1)
    row["dp_mean"] = float(dp.mean())
    row["dp_batch_max_mean"] = _batch_max_mean(dp, batch_size)
    row["dp_mean_per_chunk"] = [float(d.mean()) for d in dps]
  print("ROW " + json.dumps(row), flush=True)


def _configs(args):
  seeds = _ints(args.seeds)
  sizes = [b if b == "auto" else int(b) for b in args.batch_sizes.split(",") if b]
  for problem in args.problems.split(","):
    for name in args.agents.split(","):
      for s in seeds:
        yield problem, name, s, 0
      for b in sizes:
        yield problem, name, max(seeds), b


def _child(args, config):
  argv = [sys.executable, os.path.abspath(__file__), "--one", ",".join(map(str, config))]
  for flag in ("episodes", "reps", "eta", "inner_tol"):
    argv += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
  try:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout)
  except subprocess.TimeoutExpired:
    return {"error": f"timed out after {args.timeout:g} s"}
  rows = [line[4:] for line in out.stdout.splitlines() if line.startswith("ROW ")]
  if out.returncode or not rows:
    return {"error": f"exit status {out.returncode}: {out.stderr.strip()[-600:]}"}
  return json.loads(rows[-1])


def _print_row(row):
  cells = f"{row['problem']:19s} {row['agent']:8s} {row['seeds']:5d} {row['batch_size'] or '-':>5}"
  if "error" in row:
    print(f"{cells}  {row['error']}", flush=True)
    return
  timed = row["timed_extra_mib"]
  dp = f"{row['dp_mean']:6.2f} {row['dp_batch_max_mean']:9.2f}" if "dp_mean" in row else ""
  print(
    f"{cells} {row['ms_per_seed_episode']:10.3f} {row.get('ratio_to_smallest', 0):6.2f}x"
    f" {row['cpu_ms_per_seed_episode']:10.3f} {row.get('cpu_ratio_to_smallest', 0):6.2f}x"
    f" {row.get('floors', 0):6.1f}"
    f" {row['peak_rss_mib']:8.0f} {'-' if timed is None else f'{timed:9.0f}'}"
    f" {row['compile_and_pretrain_s']:8.1f} {dp}",
    flush=True,
  )


def _library_version() -> dict:
  """The checkout's commit and its uncommitted changes under optaug_jax/ (the numbers move
  with the inner solver: a run records which library it measured)."""
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True)
  try:
    head = git("rev-parse", "HEAD").stdout.strip()
    dirty = git("status", "--porcelain", "--", "optaug_jax").stdout.split("\n")
  except OSError:
    return {}
  return {"commit": head, "uncommitted_in_optaug_jax": [d.strip() for d in dirty if d.strip()]}


def _bandwidth(mib=512, reps=10) -> float:
  """GB/s this machine streams: a jitted sum over `mib` MiB of float32 (the median call)."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  x = jnp.ones((mib * 2**18,), jnp.float32)
  total = jax.jit(jnp.sum)
  jax.block_until_ready(total(x))
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    jax.block_until_ready(total(x))
    times.append(time.perf_counter() - start)
  return x.nbytes / float(np.median(times)) / 1e9


def _write(path, payload):
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(payload, f, indent=1)
  os.replace(tmp, path)


def main(argv=None):
  args = parse_args(argv)
  if args.one:
    return one(args)
  from optaug_jax.experiment import timing  # imports jax: the parent only reads the hardware

  payload = {
    "config": vars(args),
    "bandwidth_gb_s": _bandwidth(),
    "hardware": timing.hardware(),
    "library": _library_version(),
    "rows": [],
  }
  try:
    payload["hardware"]["affinity"] = sorted(os.sched_getaffinity(0))
  except AttributeError:
    pass
  print(
    f"{'problem':19s} {'agent':8s} {'seeds':>5s} {'batch':>5s} {'wall ms':>10s} {'ratio':>7s}"
    f" {'cpu ms':>10s} {'ratio':>7s} {'floors':>6s} {'peak MiB':>8s} {'+timed MiB':>9s}"
    f" {'1st call':>8s} {'DPs':>6s} {'batch max':>9s}",
    flush=True,
  )
  base = {}
  for config in _configs(args):
    row = _child(args, config)
    row = {**dict(zip(("problem", "agent", "seeds", "batch_size"), config)), **row}
    row["batch_size"] = row["batch_size"] or None
    key = (row["problem"], row["agent"])
    if key not in base and row["batch_size"] is None and "error" not in row:
      base[key] = row  # the smallest vmapped seed count, all at once
    if "error" not in row and key in base:
      for k in ("", "cpu_"):
        row[f"{k}ratio_to_smallest"] = (
          row[f"{k}ms_per_seed_episode"] / base[key][f"{k}ms_per_seed_episode"]
        )
    if "error" not in row:
      floor_ms = 1e3 * row["bounds_bytes_per_seed"] / (payload["bandwidth_gb_s"] * 1e9)
      row["floor_ms"], row["floors"] = floor_ms, row["ms_per_seed_episode"] / floor_ms
    _print_row(row)
    payload["rows"].append(row)
    _write(args.out, payload)
  return payload


if __name__ == "__main__":
  main()
