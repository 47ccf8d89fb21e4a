"""How exact is the exact inner method? Random inner problems against Clarabel.

Two tables:

1. `--table issue`: the reliability probe's rows (H, S, A = 3, 3, 2; boxes p +- U(0, 0.3);
   thresholds 0.5 H mean(d); lambda = 0; I, eta in {(2, 1e4), (2, 1e5), (3, 1e3), (3, 1e6)};
   60 instances a row; float64; `tol=0.0`): solves whose certificate exceeds 1e-6 of
   `1 + |objective|`, and the worst relative certificate.
2. `--table classes`: the property test's classes (I = 1..3; eta 1e-2..1e8 log-uniform;
   lambda 0 or random over three scales; box radius U(0, 0.5)), `--instances` each dtype,
   against Clarabel: uncertified solves, the worst relative certificate, the worst
   relative error of certified solves, and the largest amount by which an error exceeded
   its certificate (Clarabel's own accuracy is ~1e-10; float32 rounds the objective at
   ~1e-7 of its terms).

3. `--table larger`: S, A, H = 10, 4, 10, I = 2 (`--constraints`), boxes p +- U(0, 0.2), lambda = 0,
   256 instances vmapped per eta in (1e2, 1e4, 1e6) and dtype: uncertified solves (relative
   certificate above 1e-8 in float64, 1e-4 in float32), the worst one, mean DP calls.

Run from any checkout (`PYTHONPATH=<checkout> python experiments/inner_exactness.py`) to
compare two versions side by side (`exact_solve` calls the exact solver in the API of
either side of the inner solvers' move to values). Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import pathlib
import time
from typing import Any, NamedTuple

import numpy as np


class Solved(NamedTuple):
  """What the tables read of a solve, under the names of either API."""

  objective: Any
  occupancy: Any
  dp_calls: Any
  gap: Any


def exact_solve(oj, c, d, lo, up, s0, al, lam, eta):
  """The exact solver stopping on its proof (`oj.inner.exact()`; before the inner solvers
  became values, `method="dual", tol=0.0`), without the transitions."""
  if hasattr(oj, "inner") and hasattr(oj.inner, "exact"):
    box = oj.TransitionSet(lo, up)
    problem = oj.inner.InnerProblem(
      cost=c, constraint_costs=d, thresholds=al, transitions=box, initial_state=s0
    )
    sol = oj.solve_inner(
      problem, lam, eta, solver=oj.inner.exact(), gradient=None, with_transitions=False
    )
  else:
    sol = oj.solve_inner(
      c, d, lo, up, s0, al, lam, eta, method="dual", tol=0.0, with_transitions=False
    )
  return Solved(
    sol.objective, sol.occupancy, sol.dp_calls, sol.gap if hasattr(sol, "gap") else sol.fw_gap
  )


def _tests_references():
  """`tests/references.py` (the property test's instances and its Clarabel/SCS reference), by
  file path: this script runs the test's comparison at the tables' sizes."""
  import importlib.util

  path = pathlib.Path(__file__).parent.parent / "tests" / "references.py"
  spec = importlib.util.spec_from_file_location("optaug_tests_references", path)
  assert spec is not None and spec.loader is not None
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument(
    "--table",
    choices=("issue", "classes", "larger"),
    default="issue",
    help="which table (default: issue)",
  )
  parser.add_argument(
    "--instances",
    type=int,
    default=500,
    help="instances per dtype for --table classes (default: 500)",
  )
  parser.add_argument("--seed", type=int, default=0, help="seed of the instances (default: 0)")
  parser.add_argument(
    "--constraints",
    type=int,
    default=2,
    help="I of --table larger (default: 2)",
  )
  args = parser.parse_args(argv)

  import jax

  jax.config.update("jax_enable_x64", True)
  import optaug_jax as oj

  ref = _tests_references()
  instance = ref.random_inner_instance

  solve = jax.jit(lambda *a: exact_solve(oj, *a))

  print(f"optaug_jax from {pathlib.Path(oj.__file__).parent}")
  if args.table == "larger":
    larger(args.seed, num_constraints=args.constraints)
    return
  if args.table == "issue":
    print("| I | eta | certificate > 1e-6 (1 + |objective|) | worst relative certificate |")
    print("|---|---|---|---|")
    for num_constraints, eta in ((2, 1e4), (2, 1e5), (3, 1e3), (3, 1e6)):
      rng = np.random.default_rng(args.seed)
      misses, worst = 0, 0.0
      for _ in range(60):
        inst = instance(rng, num_constraints, radius=0.3, lam_scale=0.0, threshold_share=0.5)
        sol = solve(*inst, eta)
        rel = float(sol.gap) / (1.0 + abs(float(sol.objective)))
        misses += rel > 1e-6
        worst = max(worst, rel)
      print(f"| {num_constraints} | {eta:g} | {misses}/60 | {worst:.2g} |", flush=True)
    return

  print(
    "| dtype | instances | uncertified | worst relative certificate | worst relative error"
    " (certified) | largest error - certificate |"
  )
  print("|---|---|---|---|---|---|")
  for dtype in (np.float64, np.float32):
    rng = np.random.default_rng(args.seed)
    uncertified, understated = 0, -np.inf
    worst_gap = worst_error = 0.0
    started = time.time()
    for _ in range(args.instances):
      num_constraints = int(rng.integers(1, 4))
      eta = float(10.0 ** rng.uniform(-2, 8))
      lam_scale = float(rng.choice([0.0, 1e-2, 1.0, 1e2]))
      inst = instance(rng, num_constraints, radius=rng.uniform(0, 0.5), lam_scale=lam_scale)
      inst = tuple(np.asarray(x, dtype) if isinstance(x, np.ndarray) else x for x in inst)
      sol = solve(*inst, dtype(eta))
      optimum, _ = ref.inner_cvxpy(*inst, eta)
      q = np.asarray(sol.occupancy, np.float64)
      c, d, _, _, _, alpha, lam = (np.asarray(x, np.float64) for x in inst)
      shifted = np.maximum(lam / eta + np.einsum("ihsa,hsa->i", d, q) - alpha, 0.0)
      value = float(np.sum(c * q) + 0.5 * eta * np.sum(shifted**2))  # in float64
      scale = 1.0 + abs(optimum)
      error = (value - optimum) / scale
      gap = float(sol.gap) / scale
      worst_gap = max(worst_gap, gap)
      certified = getattr(sol, "certified", None)  # older versions: the same test here
      if certified is None:
        certified = gap <= (1e-8 if dtype == np.float64 else 1e-4)
      if bool(certified):
        worst_error = max(worst_error, error)
      else:
        uncertified += 1
      understated = max(understated, error - gap)
    print(
      f"| {np.dtype(dtype).name} | {args.instances} | {uncertified} | {worst_gap:.2g} |"
      f" {worst_error:.2g} | {understated:.2g} |  ({time.time() - started:.0f} s)",
      flush=True,
    )


def larger(seed, num_states=10, num_actions=4, horizon=10, num_constraints=2, count=256):
  """The `--table larger` rows (vmapped, as agents batch seeds)."""
  import jax
  import jax.numpy as jnp

  import optaug_jax as oj

  rng = np.random.default_rng(seed)
  shape = (count, horizon, num_states, num_actions)
  p = rng.dirichlet(np.ones(num_states), size=shape)
  r = 0.2 * rng.uniform(size=p.shape)
  lower, upper = np.clip(p - r, 0, 1), np.clip(p + r, 0, 1)
  c = rng.uniform(size=shape)
  d = rng.uniform(size=(count, num_constraints) + shape[1:])
  alpha = 0.5 * horizon * d.reshape(count, num_constraints, -1).mean(-1)
  lam = np.zeros((count, num_constraints))
  print(
    "| dtype | eta | uncertified of 256 | worst relative certificate | mean DP calls |"
    " ms per solve (256 vmapped, second call) |"
  )
  print("|---|---|---|---|---|---|")
  for dtype in (np.float64, np.float32):
    for eta in (1e2, 1e4, 1e6):
      solve = jax.jit(
        jax.vmap(
          lambda c, d, lo, up, al, lam, eta=eta, dtype=dtype: exact_solve(
            oj, c, d, lo, up, 0, al, lam, dtype(eta)
          )
        )
      )
      inputs = [jnp.asarray(x, dtype) for x in (c, d, lower, upper, alpha, lam)]
      jax.block_until_ready(solve(*inputs))  # compile
      start = time.perf_counter()
      out = jax.block_until_ready(solve(*inputs))
      ms = 1e3 * (time.perf_counter() - start) / count
      rel = np.asarray(out.gap, np.float64) / (1 + np.abs(np.asarray(out.objective)))
      bad = rel > (1e-8 if dtype == np.float64 else 1e-4)
      print(
        f"| {np.dtype(dtype).name} | {eta:g} | {int(bad.sum())} | {rel.max():.2g} |"
        f" {np.mean(np.asarray(out.dp_calls)):.1f} | {ms:.2f} |",
        flush=True,
      )


if __name__ == "__main__":
  main()
