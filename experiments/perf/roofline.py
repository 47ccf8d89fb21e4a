"""The device's roofline for an episode: the bandwidth it streams, what one step of a loop
costs before it reads anything, and each problem's floors on them.

Measured in one process on the default device (CPU or accelerator), each number the median
of `--reps` calls after one warm-up call:

- stream: a jitted sum over a float32 array of each size in `--sizes-mib` (read, GB/s) and
  a jitted `2 * x` (read and write, GB/s counted over both). Small sizes sit in the
  caches; the largest size's read is the bandwidth of the floors below.
- loop steps: a `lax.fori_loop` of `--steps` iterations over a 1,024-float vector whose
  body is k dependent reductions (`x - mean(x) / 2`, k times), for k = 1, 2, 4, 8: the
  time per iteration. The least of them is what a step of a scan costs on this device when
  it does almost nothing (on a GPU the loop's own bookkeeping and a launch or two; on a
  CPU a few instructions). On the H200 it did not grow with k (XLA fuses the chain
  differently for each k), so no per-reduction cost is fitted.
- dispatch: one call of a jitted scalar function, end to end.
- floors, per problem of `--problems` (episode_cost.py's table): the bytes of one seed's
  confidence-set bounds (`2 x H x S x A x N` of float32, lower and upper, `N` the next
  states of a row: its slots in the sparse layout), the time to read them once at the
  stream bandwidth (the "bandwidth floor", per seed-episode), and a "step floor": the
  `3 x H` sequential steps of one episode (one extended DP, the play, the evaluation) at the
  least step's time, shared by the seeds of a vmapped batch (per seed-episode at `--seeds`).
- with `--cost FILE.json` (episode_cost.py's `--out`): each of its rows' early ms per
  seed-episode, for OptAug and OptDual, over the two floors at that file's seed count;
  with `--measured ROOFLINE.json` (this script's earlier `--out`, on the device that ran
  the rows), that device's bandwidth and loop step instead of this machine's.

Printed and saved (`--out`, JSON with the arguments and the hardware, its manifest beside
it, as the other scripts' results):

  python experiments/perf/roofline.py --out results/roofline.json
  python experiments/perf/roofline.py --sizes-mib 1,16,256,4096 --cost rows_1024.json \\
      --out results/roofline_gpu.json    # on an accelerator, after episode_cost.py
"""

from __future__ import annotations

import argparse
import os

import jax
import jax.numpy as jnp

import optaug_jax as oj
from optaug_jax.experiment import cli, cost_table, result_files, timing

KS = (1, 2, 4, 8)  # dependent reductions per loop step


def _say(text):
  print(text, flush=True)


def parse_args(argv=None):
  p = argparse.ArgumentParser(
    prog="roofline.py",
    description=__doc__,
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  p.add_argument(
    "--sizes-mib", default="1,4,16,64,256,1024", help="stream sizes, MiB (default: %(default)s)"
  )
  p.add_argument("--steps", type=int, default=2000, help="loop iterations (default: %(default)s)")
  p.add_argument("--reps", type=int, default=10, help="timed calls (default: %(default)s)")
  p.add_argument(
    "--problems",
    default="media_streaming,gridworld20_sparse,queue,lost_sales,delivery,reservoir,random_i2",
    help="episode_cost.py's problems whose floors to state (default: %(default)s)",
  )
  p.add_argument("--seeds", type=int, default=16, help="seeds of the step floor without --cost")
  p.add_argument("--cost", help="an episode_cost.py --out file: its rows against the floors")
  p.add_argument(
    "--measured",
    help="an earlier roofline.py --out file: its device's numbers, not this machine's (to"
    " place a device's --cost rows on another machine)",
  )
  p.add_argument("--out", default="results/roofline.json", help="(default: %(default)s)")
  return p.parse_args(argv)


def stream(mib, reps):
  """(read GB/s, read-and-write GB/s) over `mib` MiB of float32."""
  x = jnp.ones((int(mib * 2**18),), jnp.float32)
  read = timing.median_time(lambda: _sum(x), reps)
  write = timing.median_time(lambda: _double(x), reps)
  return x.nbytes / read / 1e9, 2 * x.nbytes / write / 1e9


_sum = jax.jit(jnp.sum)
_double = jax.jit(lambda x: 2 * x)


def loop_steps(steps, reps):
  """{k: seconds per iteration} of a fori_loop with k dependent reductions per step."""
  out = {}
  for k in KS:

    def body(_, x, k=k):
      for _ in range(k):
        x = x - jnp.mean(x) / 2
      return x

    run = jax.jit(lambda x, body=body: jax.lax.fori_loop(0, steps, body, x))
    x = jnp.ones((1024,), jnp.float32)
    out[k] = timing.median_time(lambda run=run, x=x: run(x), reps) / steps
  return out


def _measured(path):
  """(streams, loop steps, dispatch) of an earlier roofline.py file."""
  old = result_files.read_file(path, "--measured")
  streams = {float(m): (s["read"], s["read_write"]) for m, s in old["stream_gb_s"].items()}
  per_step = {int(k): t for k, t in old["loop_step_s"].items()}
  return streams, per_step, old["dispatch_s"]


def _measured_on(path):
  """Where the numbers were measured: this machine, or an earlier file's device."""
  if not path:
    return None
  old = result_files.read_file(path, "--measured")
  return {"file": path, "device": old.get("device"), "hardware": old.get("hardware")}


def bounds_bytes(problem):
  """(bytes of one seed's confidence-set bounds, H) of an episode_cost.py problem."""
  name, kwargs, setting, bonus = cost_table.entry(problem)
  bench = cost_table.benchmark(name, kwargs)
  agent = cost_table.agents(
    bench, oj.named_setting(setting, bench.cmdp), bonus, 10, 1, 20.0, ["optdual"], 0.0
  )["optdual"]
  s, a, n = oj.agents.init_agent(agent, bench.cmdp).counts.transitions.shape[-3:]
  h = bench.cmdp.horizon  # the bounds are per step (the counts are shared by the steps)
  return 2 * h * s * a * n * 4, h


def floors(args, bandwidth, base):
  """{problem: floors} of `--problems`, and of `--cost`'s rows against them."""
  cost = result_files.read_file(args.cost, "--cost") if args.cost else None
  seeds = cost["args"]["seeds"] if cost else args.seeds
  rows = {}
  names = [r["problem"] for r in cost["rows"]] if cost else args.problems.split(",")
  for problem in names:
    nbytes, h = bounds_bytes(problem)
    row = {
      "bounds_bytes_per_seed": nbytes,
      "bandwidth_floor_ms": 1e3 * nbytes / (bandwidth * 1e9),
      "step_floor_ms": 1e3 * 3 * h * base / seeds,
      "seeds": seeds,
    }
    rows[problem] = row
  for r in cost["rows"] if cost else ():
    row = rows[r["problem"]]
    for agent in ("optaug", "optdual"):
      ms = 1e3 * r[f"early_{agent}_s"]
      row[f"{agent}_ms"] = ms
      row[f"{agent}_bandwidth_floors"] = ms / row["bandwidth_floor_ms"]
      row[f"{agent}_step_floors"] = ms / row["step_floor_ms"]
  return rows


def main(argv=None):
  args = parse_args(argv)
  settings = {k: v for k, v in vars(args).items() if k != "out"}
  run_dir = result_files.result_file(args.out, "roofline", settings)  # before any work
  with run_dir.running():
    if args.measured:
      streams, per_step, dispatch = _measured(args.measured)
    else:
      sizes = [float(s) for s in args.sizes_mib.split(",") if s]
      streams = {mib: stream(mib, args.reps) for mib in sizes}
      per_step = loop_steps(args.steps, args.reps)
      one = jax.jit(lambda x: x + 1)
      dispatch = timing.median_time(lambda: one(jnp.float32(0)), args.reps)
    for mib, (read, both) in streams.items():
      _say(f"stream {mib:8g} MiB: read {read:9.1f} GB/s, read+write {both:9.1f} GB/s")
    bandwidth = streams[max(streams)][0]
    base = min(per_step.values())
    for k, t in per_step.items():
      _say(f"loop step, {k} dependent reductions: {1e6 * t:8.2f} us")
    _say(f"dispatch of a jitted scalar call: {1e6 * dispatch:.1f} us")
    rows = floors(args, bandwidth, base)
    for problem, row in rows.items():
      cells = (
        f"{problem:19s} bounds {row['bounds_bytes_per_seed'] / 1e6:7.3f} MB/seed,"
        f" bandwidth floor {1e3 * row['bandwidth_floor_ms']:8.2f} us,"
        f" step floor at {row['seeds']} seeds {1e3 * row['step_floor_ms']:8.2f} us"
      )
      for agent in ("optaug", "optdual"):
        if f"{agent}_ms" in row:
          cells += (
            f" | {agent} {row[f'{agent}_ms']:.4f} ms: {row[f'{agent}_bandwidth_floors']:.1f}"
            f" / {row[f'{agent}_step_floors']:.1f} floors"
          )
      _say(cells)
    payload = {
      "args": vars(args),
      "hardware": timing.hardware(),
      "device": str(jax.devices()[0]),
      "measured_on": _measured_on(args.measured),
      "stream_gb_s": {str(m): {"read": r, "read_write": w} for m, (r, w) in streams.items()},
      "bandwidth_gb_s": bandwidth,
      "loop_step_s": {str(k): t for k, t in per_step.items()},
      "loop_step_least_s": base,
      "dispatch_s": dispatch,
      "floors": rows,
    }
    run_dir.write_json(os.path.basename(args.out), payload, indent=1)
    run_dir.complete()
  return payload


if __name__ == "__main__":
  cli.main_guard("roofline", main)
