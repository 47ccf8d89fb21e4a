"""Inner solvers against Clarabel: error and certificate versus extended-DP calls.

For the paper's Frank-Wolfe (exact line search) and the exact dual method, on inner problems
taken from real runs (the optimistic model and multipliers of an OptAug run after
`--episodes` episodes: media_streaming for I = 1, a random-family CMDP for I = 2, 3), for
eta in 1 .. 1e6: the true error `objective - optimum` (optimum by cvxpy/Clarabel in z-space)
and the method's certificate, against the number of extended DPs. Prints the table of DP
calls needed to reach 1e-6 and 1e-9 and writes DIR/inner_solver.json and a figure, each
atomically, with DIR/manifest.json (experiment.result_files.ResultDir: a directory of another
script is refused; a run of other settings replaces the previous run's files). float64.

  python experiments/inner_solver.py --out results/inner_solver   # ~10 min on 2 cores
  python experiments/inner_solver.py --quick                      # a smoke run

Needs cvxpy and clarabel (the `experiments` or `reference` extra).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

if importlib.util.find_spec("cvxpy") is None or importlib.util.find_spec("clarabel") is None:
  sys.exit('experiments/inner_solver.py needs cvxpy and clarabel: pip install -e ".[experiments]"')

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import optaug_jax as oj  # noqa: E402
from optaug_jax.experiment import cli, result_files  # noqa: E402

TOLERANCES = (1e-6, 1e-9)
OUTPUTS = ("inner_solver.json", "inner_solver.png")


def realistic_problem(num_constraints: int, episodes: int, seed: int = 0):
  """(cost, constraint_costs, lower, upper, s1, alpha, lambda, name) of an OptAug run."""
  if num_constraints == 1:
    bench = oj.benchmarks.make_benchmark("media_streaming", dtype=jnp.float64)
    name = "media_streaming"
  else:
    bench = oj.benchmarks.random_family(
      seed=seed,
      num_states=5,
      num_actions=3,
      horizon=5,
      num_constraints=num_constraints,
      dtype=jnp.float64,
    )
    name = f"random S=5 A=3 H=5 I={num_constraints}"
  agent = oj.optaug(
    num_episodes=10 * episodes,
    safe_policy=bench.safe_policy,
    pretrain_episodes=episodes // 4,
    slack=bench.slack,
    eta=100.0,
    bonus_scale=0.1,
  )
  state, _ = oj.run(agent, jax.random.PRNGKey(seed), bench.cmdp, num_episodes=episodes)
  model = oj.optimistic_model(state.counts, num_episodes=10 * episodes, delta=0.1, bonus_scale=0.1)
  lam = jnp.asarray(state.multipliers)  # the run's own lambda_k
  problem = oj.inner.InnerProblem.of_model(model, bench.cmdp.thresholds, bench.cmdp.initial_state)
  return problem, lam, name


SOLVERS = {"frank_wolfe": oj.inner.frank_wolfe, "exact": lambda n: oj.inner.exact(n, tol=None)}


def sweep(case, eta, method, budgets):
  """[(dp_calls, error placeholder, certificate, objective)] for each iteration budget of
  `SOLVERS[method]` (the exact solver runs its whole budget)."""
  problem, lam, _ = case
  rows = []
  for n in budgets:
    solve = jax.jit(
      lambda pr, la, et, n=n: oj.solve_inner(
        pr, la, et, solver=SOLVERS[method](n), gradient="unrolled"
      )
    )
    sol = solve(problem, lam, jnp.asarray(eta))
    rows.append(
      {
        "budget": n,
        "dp_calls": int(sol.dp_calls),
        "objective": float(sol.objective),
        "certificate": float(sol.gap),
      }
    )
  return rows


def calls_to_reach(rows, tol):
  for r in rows:
    if r["error"] <= tol:
      return r["dp_calls"]
  return None


def main(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument("--etas", default="1,1e2,1e4,1e6")
  p.add_argument("--constraints", default="1,2,3")
  p.add_argument(
    "--episodes",
    type=int,
    default=1500,
    help="episodes of the OptAug run whose optimistic model is solved",
  )
  p.add_argument("--fw-budgets", default="1,3,10,30,100,300,1000,3000,10000")
  p.add_argument("--dual-budgets-1", default="5,10,20,30,40,50,58")
  p.add_argument("--dual-budgets-2", default="5,10,20,40,60,80,120")
  p.add_argument("--quick", action="store_true", help="tiny sweep (smoke test)")
  p.add_argument("--out", default="results/inner_solver")
  args = p.parse_args(argv)
  if args.quick:
    args.etas, args.constraints, args.episodes = "1,1e4", "1,2", 100
    args.fw_budgets, args.dual_budgets_1, args.dual_budgets_2 = "3,30", "10,58", "10,40"
  run_dir = result_files.result_dir(args, "inner_solver", OUTPUTS)
  etas = [float(e) for e in args.etas.split(",")]
  budgets = {"frank_wolfe": [int(t) for t in args.fw_budgets.split(",")]}
  started = time.perf_counter()
  results = []
  for num_constraints in [int(i) for i in args.constraints.split(",")]:
    problem = realistic_problem(num_constraints, args.episodes)
    dual_budgets = args.dual_budgets_1 if num_constraints == 1 else args.dual_budgets_2
    budgets["exact"] = [int(t) for t in dual_budgets.split(",")]
    pr, lam, _ = problem
    for eta in etas:
      optimum, _ = oj.lp.solve_inner_reference(
        pr.cost, pr.constraint_costs, pr.lower, pr.upper, pr.initial_state, pr.thresholds, lam, eta
      )
      scale = max(1.0, abs(optimum))
      for method in ("frank_wolfe", "exact"):
        rows = sweep(problem, eta, method, budgets[method])
        for r in rows:
          r["error"] = (r["objective"] - optimum) / scale
          r["certificate"] /= scale
        entry = {
          "constraints": num_constraints,
          "problem": problem[-1],
          "eta": eta,
          "method": method,
          "optimum": optimum,
          "rows": rows,
        }
        entry.update({f"dp_calls_to_{tol:g}": calls_to_reach(rows, tol) for tol in TOLERANCES})
        results.append(entry)
        print(
          f"I={num_constraints} eta={eta:8g} {method:11s} "
          + " ".join(f"{r['dp_calls']}:{r['error']:.1e}" for r in rows),
          flush=True,
        )
  seconds = time.perf_counter() - started
  print_table(results)
  with run_dir.running():
    run_dir.write_json(
      "inner_solver.json",
      {
        "arguments": vars(args),
        "versions": result_files.versions(),
        "seconds": seconds,
        "error_definition": "(objective - Clarabel optimum) / max(1, |optimum|)",
        "results": results,
      },
    )
    plot(results, etas, run_dir)
    run_dir.complete()
  return results


def print_table(results):
  print("\nDP calls to reach a relative error of 1e-6 / 1e-9 ('-': not within the budgets)")
  etas = sorted({r["eta"] for r in results})
  print(f"{'I':>2s} {'method':12s} " + " ".join(f"{f'eta={e:g}':>14s}" for e in etas))
  for i in sorted({r["constraints"] for r in results}):
    for method in ("frank_wolfe", "exact"):
      cells = []
      for e in etas:
        r = next(
          x for x in results if x["constraints"] == i and x["eta"] == e and x["method"] == method
        )
        fmt = lambda v: "-" if v is None else str(v)
        cells.append(f"{fmt(r['dp_calls_to_1e-06']) + ' / ' + fmt(r['dp_calls_to_1e-09']):>14s}")
      print(f"{i:2d} {method:12s} " + " ".join(cells))


def plot(results, etas, run_dir):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  constraints = sorted({r["constraints"] for r in results})
  fig, axes = plt.subplots(1, len(constraints), figsize=(5 * len(constraints), 4), squeeze=False)
  colors = {e: f"C{k}" for k, e in enumerate(etas)}
  for ax, i in zip(axes[0], constraints):
    for r in results:
      if r["constraints"] != i:
        continue
      calls = [row["dp_calls"] for row in r["rows"]]
      err = [max(abs(row["error"]), 1e-16) for row in r["rows"]]
      cert = [max(row["certificate"], 1e-16) for row in r["rows"]]
      style = "-o" if r["method"] == "exact" else "--s"
      ax.loglog(
        calls, err, style, color=colors[r["eta"]], ms=3, label=f"{r['method']}, eta={r['eta']:g}"
      )
      ax.loglog(calls, cert, ":", color=colors[r["eta"]], lw=0.8)
    ax.axhline(1e-9, color="gray", lw=0.5)
    ax.set(
      xlabel="extended-DP calls",
      ylabel="|objective - optimum| / max(1, |optimum|)",
      title=f"I = {i}: {next(r['problem'] for r in results if r['constraints'] == i)}",
    )
    ax.legend(fontsize=6)
  fig.suptitle("solid/dashed: true error against Clarabel; dotted: the method's certificate")
  fig.tight_layout()
  run_dir.save_figure(fig, "inner_solver.png", dpi=110)
  plt.close(fig)


if __name__ == "__main__":
  cli.main_guard("inner_solver", main)
