"""Frank-Wolfe accuracy on the inner problem: gap and error vs the cvxpy optimum.

For eta in 1, 10, 100, 1000 and both step rules, the FW gap and the true error
`objective - optimum` (cvxpy/Clarabel optimum of the paper's z-space program) after T
iterations, beside the paper's bound T = 2 eta I S^2 A H / epsilon (Corollary "set-T").

  python experiments/inner_solver.py --out results/inner_solver   # needs cvxpy
"""

from __future__ import annotations

import argparse
import json
import os

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import optaug_jax as oj  # noqa: E402


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--etas", default="1,10,100,1000")
  p.add_argument("--iters", default="1,3,10,30,100,300,1000,3000")
  p.add_argument("--out", default="results/inner_solver")
  args = p.parse_args(argv)
  s, a, h, i = 3, 2, 3, 2
  cmdp = oj.random_cmdp(jax.random.PRNGKey(3), num_states=s, num_actions=a, horizon=h,
                        num_constraints=i, dtype=jnp.float64)
  rng = np.random.default_rng(3)
  p_true = np.asarray(cmdp.transitions)
  radius = 0.2 * rng.uniform(size=p_true.shape)
  lower, upper = np.clip(p_true - radius, 0, 1), np.clip(p_true + radius, 0, 1)
  lower, upper = jnp.asarray(lower), jnp.asarray(upper)
  lam = jnp.asarray([0.3, 0.0])
  iters = [int(t) for t in args.iters.split(",")]
  results = {}
  print(f"S={s} A={a} H={h} I={i}; error = objective - cvxpy optimum; paper's T for eps=1e-2"
        " in the last column")
  for eta in map(float, args.etas.split(",")):
    optimum, _ = oj.lp.solve_inner_reference(cmdp.cost, cmdp.constraint_costs, lower, upper, 0,
                                        cmdp.thresholds, lam, eta)
    paper_t = 2 * eta * i * s**2 * a * h / 1e-2
    for rule in ["standard", "linesearch"]:
      rows = []
      for t in iters:
        sol = oj.solve_inner(cmdp.cost, cmdp.constraint_costs, lower, upper, 0,
                             cmdp.thresholds, lam, eta, num_iters=t, step_rule=rule)
        rows.append({"T": t, "fw_gap": float(sol.fw_gap),
                     "error": float(sol.objective) - optimum})
      results[f"{eta:g}/{rule}"] = {"optimum": optimum, "paper_T_eps_1e-2": paper_t,
                                    "rows": rows}
      print(f"eta={eta:6g} {rule:10s} " + " ".join(
          f"T={r['T']}:{r['error']:.1e}" for r in rows) + f"  (paper T: {paper_t:.1e})")
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, "inner_solver.json"), "w") as f:
    json.dump(results, f, indent=2)
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, axes = plt.subplots(1, 2, figsize=(12, 4))
  for key, r in results.items():
    t = [row["T"] for row in r["rows"]]
    style = "-" if key.endswith("linesearch") else "--"
    axes[0].loglog(t, [max(row["error"], 1e-16) for row in r["rows"]], style, label=key)
    axes[1].loglog(t, [max(row["fw_gap"], 1e-16) for row in r["rows"]], style, label=key)
  axes[0].set(xlabel="Frank-Wolfe iterations T", ylabel="objective - optimum (cvxpy)")
  axes[1].set(xlabel="Frank-Wolfe iterations T", ylabel="FW gap (certificate)")
  for ax in axes:
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(os.path.join(args.out, "inner_solver.png"), dpi=110)
  plt.close(fig)
  return results


if __name__ == "__main__":
  main()
