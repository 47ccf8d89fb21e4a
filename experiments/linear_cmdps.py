"""Linear CMDPs: OPSE, Ghosh et al.'s softmax agent, OptDual and OptAug on the three
benchmarks of Kitamura et al. (NeurIPS 2025), seeds vmapped, with their constants.

Per benchmark (`oj.linear.BENCHMARKS`, `--instances` instances from `--instance`: their
figures average 10 instances, seed `i` drawing instance `i`) and agent, `--seeds` seeds
(keys `PRNGKey(seed)`), `--episodes` K episodes in jitted chunks of `--chunk`: per seed
the cumulative strong regret `sum_k [V^pi_k(c) - V*]_+` (V*: the LP optimum, HiGHS), the
cumulative violation `sum_k [V^pi_k(d) - alpha]_+` (exact evaluation: their "regret" and
"violation regret"), OptAug's and OPSE's episodes with a violation, and OPSE's baseline
deployments. Constants (their notebook): random `C = 1, tau = 0.1`; streaming `C = 2, tau
= 0.1`; linear `C = 5, tau = 0.01`; every agent's bonus scales `C` (OPSE's compensation
too, `B_dagger = 1`, `C_lambda = 300`, 20 bisections); OptDual and OptAug `eta =
--eta`; every agent plays the baseline in its first episode.

  python experiments/linear_cmdps.py --out results/linear_cmdps                 # ~2 min
  python experiments/linear_cmdps.py --episodes 10000 --instances 10 --seeds 1 \\
      --chunk 500 --out DIR                                                       # theirs

Writes DIR/linear_cmdps.json (the config and, per benchmark and agent, the per-seed
values and the curves every `--chunk` episodes) after each (benchmark, agent), atomically;
a run with the same config resumes from it (the pairs done are not run again).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import cli, result_files

# benchmark: (bonus scale C, temperature tau): Kitamura et al.'s, and ours for the CMDP of
# 10^4 states (`oj.linear.latent_factors`, its defaults: S = 10^4, A = 4, d = 10, H = 10).
CONSTANTS = {**oj.linear.PUBLISHED_CONSTANTS, "latent_factors": (1.0, 0.01)}
BUILDERS = {**oj.linear.BENCHMARKS, "latent_factors": oj.linear.latent_factors}
AGENTS = ("opse", "ghosh_softmax", "optdual_linear", "optaug_linear")
OUTPUTS = ("linear_cmdps.json",)


def make_agent(name, bench, eta, scale=None, tau=None):
  default_scale, default_tau = CONSTANTS[bench.name]
  scale = default_scale if scale is None else scale
  tau = default_tau if tau is None else tau
  common = dict(cost_bonus=scale, constraint_bonus=scale, temperature=tau, pretrain_episodes=1)
  model, pi = bench.value.model, bench.value.safe_policy
  if name == "opse":
    return oj.linear.opse(model, pi, compensation_bonus=scale, **common)
  if name == "ghosh_softmax":
    return oj.linear.ghosh_softmax(model, pi, **common)
  return getattr(oj.linear, name)(model, pi, eta=eta, **common)


class _Bench:
  def __init__(self, name, instance):
    self.name, self.value = name, BUILDERS[name](instance)


def _optimum(cmdp):
  """`V*`: HiGHS's LP, or the Lagrangian dual by DP for a sparse CMDP (10^4 states)."""
  return oj.linear.dual_optimum(cmdp).value if cmdp.is_sparse else oj.solve_lp(cmdp).value


def run_pair(bench, name, args, optimum):
  """`{metric: [per seed]}` and the curves of one agent on one benchmark."""
  agent = make_agent(name, bench, args.eta, args.bonus_scale, args.temperature)
  cmdp = bench.value.model.cmdp
  keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(args.seeds, dtype=jnp.uint32))
  start = jax.jit(jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=0)[0]))
  play = jax.jit(
    jax.vmap(lambda k, s: oj.run(agent, k, cmdp, num_episodes=args.chunk, state=s)),
    donate_argnums=1,
  )
  state, done, started = start(keys), 0, time.perf_counter()
  regret = np.zeros(args.seeds)
  violation, violating, deployments = (
    np.zeros(args.seeds),
    np.zeros(args.seeds),
    np.zeros(args.seeds),
  )
  weak_regret, weak_violation = np.zeros(args.seeds), np.zeros(args.seeds)
  curves = {"episodes": [], "regret": [], "violation": []}
  alpha = float(cmdp.thresholds[0])
  while done < args.episodes:
    state, logs = play(keys, state)
    cost = np.asarray(logs.cost_value, np.float64)
    excess = np.asarray(logs.constraint_values[..., 0], np.float64) - alpha
    regret += np.maximum(cost - optimum, 0.0).sum(-1)
    violation += np.maximum(excess, 0.0).sum(-1)
    violating += (excess > 1e-6).sum(-1)
    weak_regret += (cost - optimum).sum(-1)
    weak_violation += excess.sum(-1)
    if "safe_deployment" in logs.extras:
      deployments += np.asarray(logs.extras["safe_deployment"]).sum(-1)
    done += args.chunk
    for key, value in (("episodes", done), ("regret", regret), ("violation", violation)):
      curves[key].append(value if key == "episodes" else np.mean(value))
    cli.progress(f"{bench.name} {name}", done, args.episodes, started, args.seeds)
  values = dict(regret=regret, violation=violation, violating_episodes=violating)
  values.update(weak_regret=weak_regret, weak_violation=weak_violation)
  values["safe_deployments"] = deployments
  out = {k: np.asarray(v).tolist() for k, v in values.items()}
  return out, {k: np.asarray(v).tolist() for k, v in curves.items()}, time.perf_counter() - started


def _fit(episodes, curve):
  """`(c, share)` of the least squares `R(t) = a + b sqrt(t) + c t` on a mean curve from its
  second point: the linear coefficient and the linear part's share of the growth."""
  t, y = np.asarray(episodes[1:], np.float64), np.asarray(curve[1:], np.float64)
  coef = np.linalg.lstsq(np.stack([np.ones_like(t), np.sqrt(t), t], 1), y, rcond=None)[0]
  linear, root = coef[2] * (t[-1] - t[0]), coef[1] * (np.sqrt(t[-1]) - np.sqrt(t[0]))
  return float(coef[2]), float(linear / max(abs(linear) + abs(root), 1e-12))


def report(record, out):
  """A markdown table per benchmark (means over seeds and instances, the fits of the mean
  curves) and a figure of the curves, DIR/linear_cmdps.png."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  results = record["results"]
  fig, axes = plt.subplots(
    len(results), 2, figsize=(10, 3.2 * len(results)), squeeze=False, constrained_layout=True
  )
  lines = []
  for row, (bench, agents) in enumerate(results.items()):
    lines.append(f"\n{bench}\n")
    lines.append(
      "| agent | cost regret | weak | constraint regret | weak | violating episodes |"
      " mean [v]+ | c (regret) | c (violation) |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for name, entry in agents.items():
      v, curves = entry["values"], entry["curves"]
      episodes = curves["episodes"]
      mean = {k: float(np.mean(x)) for k, x in v.items()}
      stderr = {k: float(np.std(x) / np.sqrt(max(len(x) - 1, 1))) for k, x in v.items()}
      fits = [_fit(episodes, curves[key]) for key in ("regret", "violation")]
      cells = [f"{mean[k]:.4g} ± {stderr[k]:.2g}" for k in ("regret", "weak_regret")]
      cells += [f"{mean[k]:.4g} ± {stderr[k]:.2g}" for k in ("violation", "weak_violation")]
      cells += [f"{mean['violating_episodes']:.0f}", f"{mean['violation'] / episodes[-1]:.3g}"]
      cells += [f"{c:.3g} ({share:.0%})" for c, share in fits]
      lines.append(f"| {name} | " + " | ".join(cells) + " |")
      for col, key in enumerate(("regret", "violation")):
        axes[row, col].plot(episodes, curves[key], label=name)
    for col, title in enumerate(("cumulative cost regret", "cumulative constraint regret")):
      axes[row, col].set_title(f"{bench}: {title}")
      axes[row, col].set_xlabel("episode")
      axes[row, col].legend(fontsize=8)
  fig.savefig(os.path.join(out, "linear_cmdps.png"), dpi=110)
  text = "\n".join(lines)
  print(text)
  return text


def main(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument("--benchmarks", default=",".join(oj.linear.PUBLISHED_CONSTANTS))
  p.add_argument("--agents", default=",".join(AGENTS))
  p.add_argument("--instance", type=cli.seed, default=0, help="the benchmarks' first instance")
  p.add_argument(
    "--instances",
    type=cli.positive_int,
    default=1,
    help="instances --instance .. + N - 1, --seeds seeds on each (Kitamura et al.: 10"
    " instances, one seed each: --instances 10 --seeds 1)",
  )
  p.add_argument("--seeds", type=cli.positive_int, default=10)
  p.add_argument("--episodes", type=cli.positive_int, default=1000)
  p.add_argument("--chunk", type=cli.positive_int, default=100, help="a divisor of --episodes")
  p.add_argument("--eta", type=cli.positive_float, default=1.0, help="OptDual's and OptAug's")
  p.add_argument(
    "--bonus-scale", type=float, default=None, help="every bonus's C (default: CONSTANTS)"
  )
  p.add_argument("--temperature", type=float, default=None, help="tau (default: CONSTANTS)")
  p.add_argument("--out", default="results/linear_cmdps")
  p.add_argument("--report", action="store_true", help="only the tables and figure of DIR's record")
  args = p.parse_args(argv)
  if args.report:
    return report(json.loads(open(os.path.join(args.out, OUTPUTS[0])).read()), args.out)
  args.benchmarks, args.agents = args.benchmarks.split(","), args.agents.split(",")
  for flag, given, known in (
    ("--benchmarks", args.benchmarks, CONSTANTS),
    ("--agents", args.agents, AGENTS),
  ):
    if unknown := sorted(set(given) - set(known)):
      p.error(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
  if args.episodes % args.chunk:
    p.error(f"--chunk {args.chunk}: must divide --episodes {args.episodes}")
  config = {k: v for k, v in vars(args).items() if k not in ("out", "report")}
  config.update(constants=CONSTANTS, jax=jax.__version__, optaug_jax=oj.__version__)
  path = os.path.join(args.out, OUTPUTS[0])
  record = {"config": config, "results": {}}
  if os.path.exists(path):  # resume: the pairs of a run of the same config
    old = json.loads(open(path).read())
    if old.get("config") == json.loads(json.dumps(config)):
      record = old
      print(f"resuming {path}: {sum(len(v) for v in record['results'].values())} pairs done")
  run_dir = result_files.result_dir(args, "linear_cmdps", OUTPUTS)
  with run_dir.running():
    for name in args.benchmarks:
      done = record["results"].setdefault(name, {})
      benches = [_Bench(name, args.instance + i) for i in range(args.instances)]
      optima = [_optimum(b.value.model.cmdp) for b in benches]
      for agent in [a for a in args.agents if a not in done]:
        runs = [run_pair(b, agent, args, optimum) for b, optimum in zip(benches, optima)]
        values = {k: sum((r[0][k] for r in runs), []) for k in runs[0][0]}  # instance-major
        curves = {k: np.mean([r[1][k] for r in runs], axis=0).tolist() for k in runs[0][1]}
        seconds = sum(r[2] for r in runs)
        done[agent] = {"values": values, "curves": curves, "seconds": seconds, "optima": optima}
        run_dir.write_json(OUTPUTS[0], record, indent=None)
        mean = {k: float(np.mean(v)) for k, v in values.items()}
        print(
          f"{name:20s} {agent:15s} " + " ".join(f"{k} {v:.4g}" for k, v in mean.items()), flush=True
        )
    run_dir.complete()
  report(record, args.out)
  return record


if __name__ == "__main__":
  cli.main_guard("linear_cmdps", main)
