"""Performance table of optaug-jax, measured side by side in one run.

Sections (every time is the median of several calls after compilation; machines here are
noisy, so compare the ratios printed, which come from the same run):

  kernel   extended-DP backward pass (S=10, A=4, H=10), 100 seeds vmapped, for each way
           of writing the shared-order greedy fill (`oj.kernels.FILL_METHODS`), and NumPy;
  step     one OptAug-CMDP episode step (S=10, A=4, H=10, I=2, fw_iters=100): JAX at 1
           seed, seed by seed, 256 seeds vmapped (each fill), sharded over the host's
           devices, and the NumPy step (`experiment.numpy_reference`);
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

import jax
from perf import scaling, steps, throughput
from perf import size as size_sections

import optaug_jax as oj
from optaug_jax.experiment import cli, result_files, timing

SECTIONS = {
  "kernel": steps.kernel_section,
  "step": steps.step_section,
  "inner": steps.inner_section,
  "throughput": throughput.throughput_section,
  "profile": throughput.profile_section,
  "scaling": scaling.scaling_section,
  "compile": scaling.compile_section,
  "memory": scaling.memory_section,
  "sweep": scaling.sweep_section,
  "size": size_sections.size_section,
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
      size_sections.plot_size(json.load(f)["size"], os.path.splitext(args.replot)[0] + ".png")
    return None
  sections = args.sections.split(",")
  hw = timing.hardware()
  print(
    f"optaug-jax {oj.__version__} benchmark: {hw['cpu']} ({hw['cpu_count']} cores),"
    f" jax {hw['jax']} on {hw['jax_backend']}, {jax.device_count()} device(s), float32"
  )
  table = timing.Table()
  timing.Table.header()
  results = {"arguments": vars(args), "hardware": hw}
  for name in sections:
    results[name] = SECTIONS[name](table, args)
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
      size_sections.plot_size(results["size"], os.path.splitext(args.out)[0] + ".png")
  return results


if __name__ == "__main__":
  cli.main_guard("benchmark", main)
