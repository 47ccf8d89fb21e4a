"""Sensitivity studies of the augmented Lagrangian with jax.grad.

1. Price of safety: V*(alpha) and dV*/dalpha over a grid of thresholds, three ways: the LP's
   dual variable (HiGHS), the known-model ALM's limiting multiplier, and jax.grad of a
   differentiable estimate of V*(alpha) (envelope gradient of the inner optimum at the ALM's
   limiting multiplier, minus ||lambda||^2 / (2 eta)).
2. Last-iterate error of the known-model ALM after N iterations, as a function of eta.
3. An optax.adam loop that tunes the threshold alpha until V*(alpha) meets a cost target.
4. Agreement of the envelope identities and of finite differences (cvxpy, if installed),
   and the cost of a gradient relative to a forward solve in each mode.

  python experiments/sensitivity.py --out results/sensitivity      # ~2 minutes, 2 cores
  python experiments/sensitivity.py --quick                         # smaller grids

Writes DIR/sensitivity.json and DIR/sensitivity.png atomically, with DIR/manifest.json
(see experiment.result_files.ResultDir): a directory of another script is refused, and a
run of other settings replaces the previous run's files.
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)  # gradients and large eta: float64

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import optaug_jax as oj  # noqa: E402
from optaug_jax.experiment import cli, result_files  # noqa: E402

OUTPUTS = ("sensitivity.json", "sensitivity.png")


def limiting_multiplier(cmdp, alpha, *, eta, num_iters, inner):
  """Known-model ALM's last multiplier (-> lambda*(alpha)) and last cost value."""
  log = oj.analysis.alm_known_model(
    cmdp._replace(thresholds=alpha), eta, num_iters=num_iters, inner=inner
  )
  return log.multipliers[-1], log.cost_value[-1], log.constraint_values[-1]


def optimal_value_estimate(cmdp, alpha, *, eta, num_iters, inner):
  """`oj.analysis.optimal_value_estimate` at thresholds `alpha` (differentiable in alpha)."""
  return oj.analysis.optimal_value_estimate(
    cmdp._replace(thresholds=alpha), eta, num_iters=num_iters, inner=inner
  )


def price_of_safety(cmdp, alphas, *, eta, num_iters, inner):
  """V*, -dV*/dalpha from the LP, from ALM's multiplier, and from jax.grad, over `alphas`."""
  lp_values, lp_duals = [], []
  for a in np.asarray(alphas):
    sol = oj.solve_lp(cmdp._replace(thresholds=jnp.asarray([a])))
    lp_values.append(sol.value)
    lp_duals.append(sol.multipliers[0])
  fn = lambda a: limiting_multiplier(
    cmdp, jnp.asarray([a]), eta=eta, num_iters=num_iters, inner=inner
  )
  alm_lam, alm_values, _ = jax.jit(jax.vmap(fn))(jnp.asarray(alphas))
  value_and_grad = jax.jit(
    jax.vmap(
      jax.value_and_grad(
        lambda a: optimal_value_estimate(
          cmdp, jnp.asarray([a]), eta=eta, num_iters=num_iters, inner=inner
        )
      )
    )
  )
  est_values, est_grads = value_and_grad(jnp.asarray(alphas))
  return {
    "alpha": np.asarray(alphas).tolist(),
    "lp_value": lp_values,
    "lp_dual": lp_duals,
    "alm_multiplier": np.asarray(alm_lam[:, 0]).tolist(),
    "alm_last_cost_value": np.asarray(alm_values).tolist(),
    "grad_value_estimate": np.asarray(est_values).tolist(),
    "grad_minus_dV_dalpha": (-np.asarray(est_grads)).tolist(),
  }


def last_iterate_error_vs_eta(cmdp, etas, *, num_iters, inner, lp_value):
  """|V(pi_N) - V*| and [D q_N - alpha]_+ of the known-model ALM after N iterations."""
  fn = lambda e: oj.analysis.alm_known_model(cmdp, e, num_iters=num_iters, inner=inner)
  logs = jax.jit(jax.vmap(fn))(jnp.asarray(etas))
  gap = np.abs(np.asarray(logs.cost_value) - lp_value)  # [eta, N]
  violation = np.max(np.maximum(np.asarray(logs.constraint_values - cmdp.thresholds), 0), -1)
  return {
    "eta": list(map(float, etas)),
    "objective_gap": gap.tolist(),
    "violation": violation.tolist(),
  }


def tune_threshold(cmdp, target, *, eta, num_iters, inner, steps, learning_rate):
  """optax.adam on alpha so that V*(alpha) = target (loss (V*(alpha) - target)^2)."""
  loss = lambda a: (
    (optimal_value_estimate(cmdp, a, eta=eta, num_iters=num_iters, inner=inner) - target) ** 2
  )
  opt = optax.adam(learning_rate)
  alpha = cmdp.thresholds
  state = opt.init(alpha)

  @jax.jit
  def step(alpha, state):
    value, grad = jax.value_and_grad(loss)(alpha)
    updates, state = opt.update(grad, state)
    alpha = jnp.clip(optax.apply_updates(alpha, updates), 0.0, cmdp.horizon)
    return alpha, state, value

  history = []
  for _ in range(steps):
    alpha, state, value = step(alpha, state)
    history.append((float(alpha[0]), float(value)))
  lp_value = oj.solve_lp(cmdp._replace(thresholds=alpha)).value
  return {
    "target": target,
    "alpha": float(alpha[0]),
    "lp_value_at_alpha": lp_value,
    "history": history,
  }


def agreement_and_cost(cmdp_big, *, num_iters, reps):
  """Identity errors and gradient cost relative to a forward solve (Frank-Wolfe's
  `num_iters` steps), per mode (the exact solver with a budget of `num_iters`)."""
  p = cmdp_big.transitions
  lower, upper = jnp.clip(p - 0.1, 0, 1), jnp.clip(p + 0.1, 0, 1)
  lam = jnp.full(cmdp_big.thresholds.shape, 0.5)
  problem = oj.inner.InnerProblem.of_cmdp(cmdp_big)._replace(
    lower=lower, upper=upper, initial_state=0
  )
  args = (problem, lam, jnp.asarray(10.0))
  solver = oj.inner.exact(num_iters=num_iters, tol=None)

  def forward(problem, la, et):
    return oj.solve_inner(
      problem, la, et, solver=oj.inner.frank_wolfe(num_iters=num_iters), gradient="unrolled"
    ).objective

  timings = {}
  fwd = jax.jit(forward)
  jax.block_until_ready(fwd(*args))
  t0 = time.perf_counter()
  for _ in range(reps):
    jax.block_until_ready(fwd(*args))
  timings["forward_s"] = (time.perf_counter() - t0) / reps
  result = {}
  for mode in ["unrolled", "envelope"]:
    sens = jax.jit(
      lambda *a, mode=mode: oj.analysis.inner_sensitivities(*a, solver=solver, gradient=mode)
    )
    out = jax.block_until_ready(sens(*args))
    t0 = time.perf_counter()
    for _ in range(reps):
      jax.block_until_ready(sens(*args))
    timings[f"value_and_grad_{mode}_s"] = (time.perf_counter() - t0) / reps
    q = np.asarray(out.occupancy)
    lam_plus = np.asarray(out.next_multipliers)
    rel = lambda x, y: float(np.max(np.abs(np.asarray(x) - y)) / max(np.max(np.abs(y)), 1e-300))
    result[mode] = {
      "gap": float(out.gap),
      "rel_err_d_alpha": rel(out.thresholds, -lam_plus),
      "rel_err_d_lambda": rel(out.multipliers, lam_plus / 10.0),
      "rel_err_d_cost": rel(out.cost, q),
      "rel_err_d_constraint_costs": rel(
        out.constraint_costs, lam_plus[:, None, None, None] * q[None]
      ),
    }
  for mode in ["unrolled", "envelope"]:
    timings[f"ratio_{mode}"] = timings[f"value_and_grad_{mode}_s"] / timings["forward_s"]
  return {
    "identities": result,
    "timing": timings,
    "sizes": dict(
      S=cmdp_big.num_states,
      A=cmdp_big.num_actions,
      H=cmdp_big.horizon,
      I=cmdp_big.num_constraints,
      fw_iters=num_iters,
    ),
  }


def plot(results, run_dir):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 3, figsize=(15, 4))
  pos = results["price_of_safety"]
  axes[0].plot(pos["alpha"], pos["lp_value"], "k-", label="V*(alpha) (LP)")
  axes[0].plot(pos["alpha"], pos["grad_value_estimate"], "C1--", label="differentiable estimate")
  axes[0].set_xlabel("threshold alpha")
  axes[0].set_ylabel("optimal cost")
  axes[0].legend()
  axes[1].plot(pos["alpha"], pos["lp_dual"], "k-", label="LP dual lambda*")
  axes[1].plot(pos["alpha"], pos["alm_multiplier"], "C0o", ms=4, label="ALM limiting multiplier")
  axes[1].plot(pos["alpha"], pos["grad_minus_dV_dalpha"], "C1x", label="-jax.grad V*(alpha)")
  axes[1].set_xlabel("threshold alpha")
  axes[1].set_ylabel("price of safety -dV*/dalpha")
  axes[1].legend()
  err = results["eta_sweep"]
  for j, eta in enumerate(err["eta"]):
    axes[2].semilogy(np.maximum(np.asarray(err["objective_gap"][j]), 1e-12), label=f"eta={eta:g}")
  axes[2].set_xlabel("ALM iteration n")
  axes[2].set_ylabel("|V(pi_n) - V*| (last iterate)")
  axes[2].legend(fontsize=7)
  fig.tight_layout()
  run_dir.save_figure(fig, "sensitivity.png", dpi=110)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("--out", default="results/sensitivity")
  parser.add_argument("--quick", action="store_true", help="small grids, for tests")
  parser.add_argument("--seed", type=int, default=2)
  args = parser.parse_args(argv)
  run_dir = result_files.result_dir(args, "sensitivity", OUTPUTS)
  grid, n_iter, inner_iters, steps, reps = (
    (25, 40, 1000, 150, 5) if not args.quick else (5, 15, 200, 5, 1)
  )
  # The exact solver with a fixed budget and no stopping rule beyond its own exact end.
  inner = oj.inner.exact(num_iters=inner_iters, tol=None)

  cmdp = oj.random_cmdp(
    jax.random.PRNGKey(args.seed), num_states=3, num_actions=2, horizon=3, dtype=jnp.float64
  )
  lp = oj.solve_lp(cmdp)
  alpha0 = float(cmdp.thresholds[0])
  # From just above the safest policy's constraint value (feasible) to the unconstrained
  # optimum's (where the constraint stops binding).
  _, v_safe = oj.policy_values(cmdp, oj.safest_policy(cmdp)[0])
  _, v_free = oj.policy_values(cmdp, cmdp.transition_set().optimal_policy(cmdp.cost))
  lo, hi = float(v_safe[0]), float(v_free[0])
  alphas = np.linspace(lo + 0.05 * (hi - lo), hi, grid)
  results = {
    "config": {
      **vars(args),
      "lp_value": lp.value,
      "alpha": alpha0,
      "jax": jax.__version__,
      "optaug_jax": oj.__version__,
    }
  }
  t0 = time.perf_counter()
  results["price_of_safety"] = price_of_safety(cmdp, alphas, eta=5.0, num_iters=n_iter, inner=inner)
  pos = results["price_of_safety"]
  err_alm = np.abs(np.subtract(pos["alm_multiplier"], pos["lp_dual"]))
  err_grad = np.abs(np.subtract(pos["grad_minus_dV_dalpha"], pos["lp_dual"]))
  results["price_of_safety_agreement"] = {
    "num_thresholds": grid,
    "num_alm_within_1e-6": int(np.sum(err_alm < 1e-6)),
    "num_grad_within_1e-6": int(np.sum(err_grad < 1e-6)),
    "median_abs_err_grad": float(np.median(err_grad)),
    "note": "V*(alpha) is piecewise linear; next to a kink the dual is not unique and the"
    " ALM converges slowly, which is where the larger errors are",
  }
  results["price_of_safety_max_abs_err"] = {
    "alm_vs_lp_dual": float(np.max(np.abs(np.subtract(pos["alm_multiplier"], pos["lp_dual"])))),
    "grad_vs_lp_dual": float(
      np.max(np.abs(np.subtract(pos["grad_minus_dV_dalpha"], pos["lp_dual"])))
    ),
    "estimate_vs_lp_value": float(
      np.max(np.abs(np.subtract(pos["grad_value_estimate"], pos["lp_value"])))
    ),
  }
  results["eta_sweep"] = last_iterate_error_vs_eta(
    cmdp, [0.1, 0.5, 2.0, 10.0, 50.0], num_iters=n_iter, inner=inner, lp_value=lp.value
  )
  target = 0.5 * (lp.value + oj.solve_lp(cmdp._replace(thresholds=cmdp.thresholds * 1.3)).value)
  results["tune_threshold"] = tune_threshold(
    cmdp, target, eta=5.0, num_iters=n_iter, inner=inner, steps=steps, learning_rate=0.05
  )
  big = oj.random_cmdp(
    jax.random.PRNGKey(0),
    num_states=10,
    num_actions=4,
    horizon=10,
    num_constraints=2,
    dtype=jnp.float64,
  )
  results["agreement_and_cost"] = agreement_and_cost(big, num_iters=100, reps=reps)
  results["seconds"] = time.perf_counter() - t0

  with run_dir.running():
    run_dir.write_json("sensitivity.json", results)
    plot(results, run_dir)
    run_dir.complete()
  e = results["price_of_safety_max_abs_err"]
  a = results["price_of_safety_agreement"]
  print(
    f"price of safety over {grid} thresholds: -jax.grad V*(alpha) within 1e-6 of the LP"
    f" dual at {a['num_grad_within_1e-6']}/{grid} (ALM multiplier:"
    f" {a['num_alm_within_1e-6']}/{grid}), median error {a['median_abs_err_grad']:.1e};"
    f" max errors (next to kinks of V*): grad {e['grad_vs_lp_dual']:.2e},"
    f" ALM {e['alm_vs_lp_dual']:.2e}, value {e['estimate_vs_lp_value']:.2e}"
  )
  last_gap = [g[-1] for g in results["eta_sweep"]["objective_gap"]]
  print(
    "last-iterate |V(pi_N) - V*| after",
    n_iter,
    "ALM iterations:",
    ", ".join(f"eta={e:g}: {g:.1e}" for e, g in zip(results["eta_sweep"]["eta"], last_gap)),
  )
  t = results["tune_threshold"]
  print(
    f"adam: target V* = {t['target']:.4f}; tuned alpha = {t['alpha']:.4f},"
    f" LP value there = {t['lp_value_at_alpha']:.4f}"
  )
  ac = results["agreement_and_cost"]
  for mode, r in ac["identities"].items():
    print(
      f"{mode:9s}: identities max rel err alpha {r['rel_err_d_alpha']:.1e}, lambda"
      f" {r['rel_err_d_lambda']:.1e}, c {r['rel_err_d_cost']:.1e}, D"
      f" {r['rel_err_d_constraint_costs']:.1e} (gap {r['gap']:.1e}); value_and_grad"
      f" / forward = {ac['timing'][f'ratio_{mode}']:.2f}x"
    )
  print(
    f"forward solve {ac['timing']['forward_s'] * 1e3:.2f} ms at {ac['sizes']};"
    f" results in {args.out}/ ({results['seconds']:.0f} s)"
  )
  return results


if __name__ == "__main__":
  cli.main_guard("sensitivity", main)
