"""Extended-LMO time against the model's size, for each way of writing the greedy fill.

Times the extended DP (`TransitionSet.lmo`) on one problem (float32, dense random boxes: Dirichlet
transitions, radius uniform in [0, 0.2] per entry, clipped to [0, 1]) for every fill in
`oj.kernels.FILL_METHODS`, side by side: the calls of all fills are interleaved and each
time is the minimum of --calls calls (the machines here are shared and noisy; compare
numbers of one run only, and read the load average printed with them).

  size       S in --sizes (A=--actions, H=--horizon): ms per call per fill, and the
             slope of log(time) against log(entries H*S*A*S) fitted over the sizes in
             [--fit-from, --fit-to] (target for the default fill: <= 1.15 between S=100
             and S=400, and <= 30 ms at S=400, A=4, H=20); "unrolled" only up to
             --max-unrolled-states;
  loop       the "LMO in a solver loop" of `experiments/benchmark.py` (S=10, A=4, H=10,
             256 seeds vmapped, `common.LOOP_LMOS` LMOs whose rewards depend on the
             previous occupancy): us per seed and LMO for each fill, with the ratio to
             "matmul" (the default before "auto"; target: the default within 10%);
  crossover  (--crossover) "matmul" against "blocked" at --crossover-sizes, one problem
             (A=--actions, H=--horizon) and --crossover-seeds seeds in the solver loop
             (A=4, H=10): where the tuning constant `auto_blocked_min_states`
             (`oj.kernels.tuning_constants()`) comes from;
  unroll     (--unroll) the horizon scans unrolled against rolled, per fill, at
             --unroll-sizes, one problem and --crossover-seeds seeds in the solver
             loop: where `unroll_max_elements` comes from.

  python experiments/lmo_size.py                       # sizes 25,100,200,400 and the loop
  python experiments/lmo_size.py --crossover --unroll  # also the thresholds' measurements
  python experiments/lmo_size.py --sizes 10,20 --calls 2 --loop-seeds 8   # a smoke run

It prints a table; with --out it also writes the results as JSON (atomically).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import cli, result_files
from optaug_jax.experiment import (
  timing as common,  # benchmark.py's solver-loop inputs, LOOP_LMOS, the hardware record
)

FILLS = oj.kernels.FILL_METHODS
BASELINE = "matmul"  # the default fill before "auto"


def _load() -> str:
  one, five, _ = os.getloadavg()
  return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def _problem(s, a, h, seed=0):
  """`(reward, lower, upper)`, float32: dense random boxes around Dirichlet transitions."""
  rng = np.random.default_rng(seed)
  p = rng.dirichlet(np.ones(s), size=(h, s, a))
  radius = rng.uniform(0.0, 0.2, size=p.shape)
  lower = np.clip(p - radius, 0.0, 1.0)
  upper = np.clip(p + radius, 0.0, 1.0)
  reward = rng.uniform(size=(h, s, a))
  return tuple(jnp.asarray(x, jnp.float32) for x in (reward, lower, upper))


def interleaved_min(calls_by_name: dict, calls: int) -> dict:
  """Seconds per call of each `fn()` (after one warm-up each): the minimum of `calls`
  rounds, each round calling every function once, in turn."""
  for fn in calls_by_name.values():
    jax.block_until_ready(fn())
  best = {name: math.inf for name in calls_by_name}
  for _ in range(calls):
    for name, fn in calls_by_name.items():
      t0 = time.perf_counter()
      jax.block_until_ready(fn())
      best[name] = min(best[name], time.perf_counter() - t0)
  return best


def loglog_slope(entries, seconds) -> float:
  """Least-squares slope of log(seconds) against log(entries)."""
  return float(np.polyfit(np.log(entries), np.log(seconds), 1)[0])


def _lmo_fn(fill):
  return jax.jit(lambda r, lo, up: oj.TransitionSet(lo, up, fill=fill).lmo(r, 0))


def _loop_fn(fill):
  """`common.lmos_in_a_loop` with the fill as a choice, vmapped over seeds."""
  return jax.jit(jax.vmap(functools.partial(common.lmos_in_a_loop, fill=fill)))


def _compiled(fn, args):
  compiled = fn.lower(*args).compile()
  return lambda: compiled(*args)


def size_section(args):
  print(
    f"size: extended_lmo, one problem, A={args.actions} H={args.horizon}, float32,"
    f" ms per call (min of {args.calls} interleaved calls)"
  )
  print(f"  {'S':>5s} {'entries':>9s} " + " ".join(f"{f:>9s}" for f in args.fills))
  rows = []
  for s in args.sizes:
    problem = _problem(s, args.actions, args.horizon)
    fills = [f for f in args.fills if f != "unrolled" or s <= args.max_unrolled_states]
    best = interleaved_min({f: _compiled(_lmo_fn(f), problem) for f in fills}, args.calls)
    entries = args.horizon * s * args.actions * s
    rows.append(
      {
        "S": s,
        "entries": entries,
        "ms": {f: best[f] * 1e3 for f in fills},
        "load": os.getloadavg()[0],
      }
    )
    print(
      f"  {s:5d} {entries / 1e6:8.2f}M "
      + " ".join(f"{best[f] * 1e3:9.2f}" if f in best else f"{'-':>9s}" for f in args.fills),
      flush=True,
    )
  fit = [r for r in rows if args.fit_from <= r["S"] <= args.fit_to]
  slopes = {}
  if len(fit) >= 2:
    slopes = {
      f: loglog_slope([r["entries"] for r in fit], [r["ms"][f] for r in fit])
      for f in args.fills
      if all(f in r["ms"] for r in fit)
    }
    print(
      f"  slope of log(time) on log(entries), S in [{args.fit_from}, {args.fit_to}]: "
      + ", ".join(f"{f} {v:.2f}" for f, v in slopes.items())
    )
  print(f"  ({_load()})")
  return {"rows": rows, "slopes": slopes, "fit": [args.fit_from, args.fit_to]}


def loop_section(args):
  s, a, h, n = 10, 4, 10, args.loop_seeds
  inputs = common.lmo_inputs(n, s, a, h)
  fns = {f: _compiled(_loop_fn(f), inputs) for f in args.fills}
  best = interleaved_min(fns, args.calls)
  per = {f: best[f] / common.LOOP_LMOS / n * 1e6 for f in args.fills}
  print(
    f"loop: {common.LOOP_LMOS} LMOs in a solver loop, S={s} A={a} H={h}, {n} seeds"
    f" vmapped, us per seed and LMO (min of {args.calls} interleaved calls)"
  )
  base = per.get(BASELINE)
  for f in args.fills:
    ratio = f"  {per[f] / base:5.2f}x {BASELINE}" if base else ""
    tag = "  (default)" if f == oj.kernels.DEFAULT_FILL else ""
    print(f"  {f:10s} {per[f]:9.2f}{ratio}{tag}")
  print(f"  ({_load()})")
  out = {"seeds": n, "us_per_seed_lmo": per}
  if base and oj.kernels.DEFAULT_FILL in per:
    out["default_vs_matmul"] = per[oj.kernels.DEFAULT_FILL] / base
  return out


def crossover_section(args):
  pair = ("matmul", "blocked")
  print(
    f"crossover: {pair[0]} vs {pair[1]}; one problem (A={args.actions} H={args.horizon},"
    f" ms) and {args.crossover_seeds} seeds in the solver loop (A=4 H=10, us per seed"
    " and LMO)"
  )
  rows = []
  for s in args.crossover_sizes:
    problem = _problem(s, args.actions, args.horizon)
    inputs = common.lmo_inputs(args.crossover_seeds, s, 4, 10)
    fns = {}
    for f in pair:
      fns[("one", f)] = _compiled(_lmo_fn(f), problem)
      fns[("loop", f)] = _compiled(_loop_fn(f), inputs)
    best = interleaved_min(fns, args.calls)
    one = {f: best[("one", f)] * 1e3 for f in pair}
    loop = {f: best[("loop", f)] / common.LOOP_LMOS / args.crossover_seeds * 1e6 for f in pair}
    rows.append({"S": s, "one_ms": one, "loop_us_per_seed_lmo": loop})
    print(
      f"  S={s:4d}  one: {one['matmul']:8.3f} {one['blocked']:8.3f} ms"
      f" (matmul/blocked {one['matmul'] / one['blocked']:5.2f})   loop:"
      f" {loop['matmul']:8.2f} {loop['blocked']:8.2f} us"
      f" (matmul/blocked {loop['matmul'] / loop['blocked']:5.2f})",
      flush=True,
    )
  threshold = oj.kernels.tuning_constants()["auto_blocked_min_states"]
  print(f"  auto picks blocked from S' = {threshold}; ({_load()})")
  return rows


def unroll_section(args):
  print(
    f"unroll: horizon scans unrolled vs rolled; one problem (A={args.actions}"
    f" H={args.horizon}, ms) and {args.crossover_seeds} seeds in the solver loop (A=4"
    f" H=10, us per seed and LMO); the library unrolls while H * (elements of a step)"
    f" <= {oj.kernels.tuning_constants()['unroll_max_elements']}"
  )
  rows = []
  modes = (("unrolled", 2**62), ("rolled", 0))
  for s in args.unroll_sizes:
    problem = _problem(s, args.actions, args.horizon)
    inputs = common.lmo_inputs(args.crossover_seeds, s, 4, 10)
    fns = {}
    for f in ("matmul", "blocked"):
      for mode, limit in modes:
        with oj.kernels.tuning(unroll_max_elements=limit):
          fns[("one", f, mode)] = _compiled(_lmo_fn(f), problem)
          fns[("loop", f, mode)] = _compiled(_loop_fn(f), inputs)
    best = interleaved_min(fns, args.calls)
    one = {f"{f}/{m}": best[("one", f, m)] * 1e3 for f in ("matmul", "blocked") for m, _ in modes}
    loop = {
      f"{f}/{m}": best[("loop", f, m)] / common.LOOP_LMOS / args.crossover_seeds * 1e6
      for f in ("matmul", "blocked")
      for m, _ in modes
    }
    rows.append(
      {
        "S": s,
        "unrolled_elements": args.horizon * s * args.actions * s,
        "one_ms": one,
        "loop_us_per_seed_lmo": loop,
      }
    )
    print(
      f"  S={s:4d} H*step={args.horizon * s * args.actions * s:9d}  one: "
      + " ".join(f"{k} {v:7.3f}" for k, v in one.items()),
      flush=True,
    )
    print(f"  {'':25s}loop: " + " ".join(f"{k} {v:7.2f}" for k, v in loop.items()), flush=True)
  print(f"  ({_load()})")
  return rows


def parse_args(argv):
  ints = lambda text: [int(x) for x in text.split(",") if x]
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument(
    "--sizes", type=ints, default=[25, 100, 200, 400], help="numbers of states S of the size table"
  )
  p.add_argument("--actions", type=int, default=4)
  p.add_argument("--horizon", type=int, default=20)
  p.add_argument(
    "--fills",
    type=lambda t: t.split(","),
    default=list(FILLS),
    help="comma-separated fills (default: all of FILL_METHODS)",
  )
  p.add_argument("--calls", type=int, default=5, help="calls per timing (the minimum)")
  p.add_argument(
    "--max-unrolled-states",
    type=int,
    default=64,
    help="time the 'unrolled' fill (S' operations per step, unrolled at trace"
    " time) only up to this S: at S=400 it compiles for minutes and runs"
    " for seconds",
  )
  p.add_argument("--fit-from", type=int, default=100)
  p.add_argument("--fit-to", type=int, default=400)
  p.add_argument(
    "--loop-seeds", type=int, default=256, help="seeds of the solver-loop row (0: skip it)"
  )
  p.add_argument("--crossover", action="store_true")
  p.add_argument("--crossover-sizes", type=ints, default=[16, 24, 32, 40, 48, 64, 80, 100])
  p.add_argument(
    "--crossover-seeds",
    type=int,
    default=32,
    help="seeds of the solver loop in the crossover and unroll sections",
  )
  p.add_argument("--unroll", action="store_true")
  p.add_argument("--unroll-sizes", type=ints, default=[10, 16, 25, 32, 50, 100])
  p.add_argument("--out", default=None, help="write the results as JSON here")
  args = p.parse_args(argv)
  for f in args.fills:
    oj.kernels.resolve_fill(f, 0)  # refuses a name that is no fill formulation
  return args


def main(argv=None):
  args = parse_args(argv)
  hw = common.hardware()
  print(
    f"optaug-jax {oj.__version__}: {hw['cpu']} ({hw['cpu_count']} cores), jax"
    f" {hw['jax']} on {hw['jax_backend']}; default fill {oj.kernels.DEFAULT_FILL!r}"
    f" (blocked from S' = {oj.kernels.tuning_constants()['auto_blocked_min_states']}); {_load()}"
  )
  results = {
    "arguments": vars(args),
    "hardware": hw,
    "default_fill": oj.kernels.DEFAULT_FILL,
    "auto_blocked_min_states": oj.kernels.tuning_constants()["auto_blocked_min_states"],
    "unroll_max_elements": oj.kernels.tuning_constants()["unroll_max_elements"],
  }
  if args.sizes:
    results["size"] = size_section(args)
  if args.loop_seeds:
    results["loop"] = loop_section(args)
  if args.crossover:
    results["crossover"] = crossover_section(args)
  if args.unroll:
    results["unroll"] = unroll_section(args)
  results["load_after"] = os.getloadavg()[0]
  if args.out:  # one file, written whole or not at all
    result_files.write_report(args.out, results)
  return results


if __name__ == "__main__":
  cli.main_guard("lmo_size", main)
