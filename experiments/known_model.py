"""ALM vs dual descent on a KNOWN CMDP: last-iterate objective gap and violation.

No estimation error: what remains is the outer method. The augmented Lagrangian method's
last iterate converges; dual projected descent oscillates (its averages converge).

  python experiments/known_model.py --out results/known_model     # ~30 s on 2 cores

Writes DIR/known_model.json and DIR/known_model.png atomically, with DIR/manifest.json
(see experiment.result_files.ResultDir): a directory of another script is refused, and a
run of other settings replaces the previous run's files.
"""

from __future__ import annotations

import argparse

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import optaug_jax as oj  # noqa: E402
from optaug_jax.experiment import cli, problems, result_files  # noqa: E402

OUTPUTS = ("known_model.json", "known_model.png")


def plot(results, run_dir):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(12, 4))
  for method, style in [("alm", "-"), ("dual_descent", ":")]:
    for eta, r in results[method].items():
      label = f"{'ALM' if method == 'alm' else 'dual descent'} eta={eta}"
      axes[0].plot(r["objective_gap"], style, label=label)
      axes[1].plot(r["violation"], style, label=label)
  axes[0].set(xlabel="iteration", ylabel="V(pi_n) - V* (last iterate)")
  axes[1].set(xlabel="iteration", ylabel="max_i V(d_i) - alpha_i (last iterate)")
  for ax in axes:
    ax.axhline(0, color="k", lw=0.6)
    ax.legend(fontsize=7)
  fig.tight_layout()
  run_dir.save_figure(fig, "known_model.png", dpi=110)
  plt.close(fig)


def main(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument(
    "--benchmark",
    default="random",
    help="'random' (the default): a fixed 5-state random CMDP (oj.random_cmdp); a"
    f" registered benchmark ({', '.join(sorted(oj.benchmarks.BENCHMARKS))}); or your own,"
    " MODULE:FUNCTION or path/to/file.py:FUNCTION (as the other scripts' --benchmark)",
  )
  p.add_argument("--iters", type=int, default=200)
  p.add_argument(
    "--inner-iters",
    type=int,
    default=500,
    help="budget of the exact inner solver (run in full: oj.inner.exact(tol=None))",
  )
  p.add_argument("--alm-etas", default="1,10,100")
  p.add_argument("--dual-etas", default="0.1,0.5,2")
  p.add_argument("--out", default="results/known_model")
  args = p.parse_args(argv)
  spec = problems.is_benchmark_spec(args.benchmark)
  if args.benchmark != "random" and not spec and args.benchmark not in oj.benchmarks.BENCHMARKS:
    p.error(
      f"--benchmark: {args.benchmark!r} is not 'random', a registered benchmark"
      f" ({', '.join(sorted(oj.benchmarks.BENCHMARKS))}) or MODULE:FUNCTION"
    )
  run_dir = result_files.result_dir(args, "known_model", OUTPUTS)

  if args.benchmark == "random":
    cmdp = oj.random_cmdp(
      jax.random.PRNGKey(2), num_states=5, num_actions=3, horizon=5, dtype=jnp.float64
    )
  elif spec:  # your own CMDP, in float64 as the rest of this script
    cmdp = problems.load_benchmark(args.benchmark).cmdp
    cmdp = jax.tree.map(
      lambda x: (
        jnp.asarray(x, jnp.float64) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x
      ),
      cmdp,
    )
  else:
    cmdp = oj.benchmarks.make_benchmark(args.benchmark, dtype=jnp.float64).cmdp
  lp = oj.solve_lp(cmdp)
  alpha = np.asarray(cmdp.thresholds)
  results = {
    "lp_value": lp.value,
    "lp_multipliers": lp.multipliers.tolist(),
    "alm": {},
    "dual_descent": {},
  }
  for eta in map(float, args.alm_etas.split(",")):
    inner = oj.inner.exact(num_iters=args.inner_iters, tol=None)
    log = jax.jit(
      lambda e: oj.analysis.alm_known_model(cmdp, e, num_iters=args.iters, inner=inner)
    )(eta)
    results["alm"][str(eta)] = {
      "objective_gap": (np.asarray(log.cost_value) - lp.value).tolist(),
      "violation": np.max(np.asarray(log.constraint_values) - alpha, -1).tolist(),
      "inner_gap": np.asarray(log.inner_gap).tolist(),
    }
  for eta in map(float, args.dual_etas.split(",")):
    log = jax.jit(lambda e: oj.analysis.dual_descent_known_model(cmdp, e, num_iters=args.iters))(
      eta
    )
    results["dual_descent"][str(eta)] = {
      "objective_gap": (np.asarray(log.cost_value) - lp.value).tolist(),
      "violation": np.max(np.asarray(log.constraint_values) - alpha, -1).tolist(),
    }

  with run_dir.running():
    run_dir.write_json("known_model.json", results, indent=None)
    plot(results, run_dir)
    run_dir.complete()
  tail = slice(args.iters // 2, args.iters)
  print(f"{args.benchmark}: V* = {lp.value:.4f}; over the second half of {args.iters} iterations:")
  for method, runs in results.items():
    if method not in ("alm", "dual_descent"):
      continue
    for eta, r in runs.items():
      gap, viol = np.abs(r["objective_gap"][tail]), np.maximum(r["violation"][tail], 0)
      print(
        f"  {method:12s} eta={eta:>6s}: max |gap| {gap.max():.2e}, max violation"
        f" {viol.max():.2e}, fraction violating > 1e-3: {np.mean(viol > 1e-3):.2f}"
      )
  return results


if __name__ == "__main__":
  cli.main_guard("known_model", main)
