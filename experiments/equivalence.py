"""OptAug's statistics before and after a change that alters its runs but not its law.

A change of the inner solver's path (fewer DPs to the same exact optimum) changes the last
bits of the solves, so runs diverge and can be compared as samples only. This script
records a sample (`--out`) and compares two (`--compare`).

The run: OptAug with what `experiments/headline.py` gives it by default (eta 100, 300
pre-training episodes, exact inner solve, greedy at unreached states, nu 0.5, bonus scale
1.0, the setting's delta), float32, on every registered benchmark (default arguments) in
the setting of its recorded runs (`RUNS`), seeds `--first-seed` .. + `--seeds` - 1
(keys `jax.random.PRNGKey(seed)`), vmapped, in jitted chunks. Per seed: the final strong
and weak cost regrets, the final strong and weak constraint regrets (max over
constraints), and the late positive violation, the mean over the episodes (9K/10, K] of
max_i [V^pi_k(d_i) - alpha_i]_+ (`experiment.reductions.LongRun`). `--out` (JSON,
written atomically after each benchmark, its manifest beside it): the config (per
benchmark K, setting, agent options, problem; seeds, versions, machine, and the library
imported: its file, its repository's commit and changed files), the values per seed, and
per benchmark the seconds (and those compiling), uncertified solves and DPs per episode.

K and setting (`RUNS`): factored 50,000, media_streaming 10,000, random_family 5,000 in
the paper's; inventory 5,000, gridworld (S = 25) 3,000, queue (S = 200, H = 50) 1,000 and
lost_sales (S = 200) 500 in bura2022 (known costs and support: sparse layouts). Every
registered benchmark has one constraint; two members of the random family with several
(`random_family_i2`, `random_family_i5`: `--constraints 2` and `5`, K 5,000 and 2,000, the
paper's setting) run the I >= 2 inner solve. A run took
14-16 minutes on one core of the 2-core CPU shared with one or two other processes (9 in a
probe with one; `taskset -c 1`), half of it compiling (20-140 s per benchmark). Past the
300 pre-training episodes everywhere, far past on the small CMDPs; on the S = 200 ones the
regrets are those of early learning (200-700 optimistic episodes).

The test (`compare`; `--compare BEFORE AFTER`): the records must hold other seeds
(overlapping ones are refused): independent samples, not pairs. Per (benchmark, metric), a
two-sided Mann-Whitney U test (`scipy.stats.mannwhitneyu`, default method: at 32 seeds the
normal approximation with tie and continuity corrections); the p-values of all pairs are
adjusted by Holm's step-down method, and a pair is rejected when its adjusted p is at most
`LEVEL` = 0.01 (family-wise). Values within `RTOL` = 1e-5 of the metric's largest |value|
of each other are ties (`ties`): float32 rounding of a law constant over seeds (lost_sales
at K = 500: its seeds' values agree to 2e-8 relative) is no difference; a metric of one tie
passes (p = 1); a NaN rejects. Power (simulated: normal samples, one shifted pair of 35): a
shift of 1, 1.25, 1.5 standard deviations of the seed spread is found with probability
0.49, 0.82, 0.97. `--compare` prints both means ± standard errors, p, the adjusted p and
the verdict; exit status 1 when a pair is rejected, 2 when the configs differ (K, setting,
agent options, problem) unless `--allow-other-config`: a negative control, such as a run
with `--agent-flags '--eta 1'` or `'--agents optdual'` (more of headline.py's flags).

  PYTHONPATH=/tmp/before taskset -c 1 python experiments/equivalence.py \\
      --library /tmp/before --out docs/results/statistics/before.json
  taskset -c 1 python experiments/equivalence.py --first-seed 1000 --out /tmp/after.json
  python experiments/equivalence.py --compare docs/results/statistics/before.json /tmp/after.json
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

import optaug_jax as oj
from optaug_jax.experiment import (
  arguments,
  cli,
  headline,
  problems,
  reductions,
  result_files,
  runs,
)

RUNS = {  # name: (the setting of its recorded runs in docs/results, K, headline.py's problem)
  "media_streaming": ("paper", 10_000, ("--benchmark", "media_streaming")),
  "factored": ("paper", 50_000, ("--benchmark", "factored")),
  "gridworld": ("bura2022", 3_000, ("--benchmark", "gridworld")),
  "queue": ("bura2022", 1_000, ("--benchmark", "queue")),
  "inventory": ("bura2022", 5_000, ("--benchmark", "inventory")),
  "lost_sales": ("bura2022", 500, ("--benchmark", "lost_sales")),
  "random_family": ("paper", 5_000, ("--benchmark", "random_family")),
  # Kitamura et al.'s (instance 0), tabular OptAug on their CMDPs (no recorded runs yet).
  "kitamura_random": ("paper", 2_000, ("--benchmark", "kitamura_random")),
  "kitamura_streaming": ("paper", 2_000, ("--benchmark", "kitamura_streaming")),
  "kitamura_linear": ("paper", 2_000, ("--benchmark", "kitamura_linear")),
  # Several constraints (the I >= 2 solve): the registered benchmarks have one each.
  "random_family_i2": ("paper", 5_000, ("--benchmark", "random_family", "--constraints", "2")),
  "random_family_i5": ("paper", 2_000, ("--benchmark", "random_family", "--constraints", "5")),
  # A user's own CMDP with two constraints (S = 200, sparse): the reservoir, bonus 0.1.
  "reservoir": (
    "bura2022",
    2_000,
    ("--benchmark", "experiments/own_cmdp/reservoir.py:reservoir", "--bonus-scale", "0.1"),
  ),
}
ASKED_FOR = ("reservoir",)  # run only when named: 14 minutes on one core
CHUNK = 500  # episodes per jitted call (a divisor of K; the numbers do not depend on it)
LEVEL = 0.01  # family-wise level of the test (Holm over every benchmark and metric)
RTOL = 1e-5  # a metric's values closer than RTOL x its largest |value| are ties (rounding)
METRICS = {
  "strong_cost": "final strong cost regret sum_k [V^pi_k(c) - V*]_+",
  "weak_cost": "final weak cost regret sum_k (V^pi_k(c) - V*)",
  "strong_constraint": "final strong constraint regret max_i sum_k [V^pi_k(d_i) - alpha_i]_+",
  "weak_constraint": "final weak constraint regret max_i sum_k (V^pi_k(d_i) - alpha_i)",
  "late_positive_violation": "mean over the episodes (9K/10, K] of max_i [V^pi_k(d_i) - alpha_i]_+",
}


def library() -> dict:
  """The optaug_jax actually imported: its file, and the git commit and the changed files
  (`git status --porcelain -- optaug_jax`) of the repository it lies in (None outside one)."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(oj.__file__)))

  def git(*argv):
    done = subprocess.run(["git", "-C", root, *argv], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None

  commit = git("rev-parse", "HEAD")
  changed = git("status", "--porcelain", "--", "optaug_jax")
  return {
    "file": oj.__file__,
    "root": root,
    "commit": commit.strip() if commit else None,
    "changed_files": None if changed is None else [line[3:] for line in changed.splitlines()],
    "version": oj.__version__,
  }


def agent_args(benchmark: str, episodes: int, seeds: int, flags=()):
  """headline.py's flags for OptAug alone on `benchmark` (a name of `RUNS`) in its setting,
  with its defaults resolved: what the script gives OptAug when no other flag is given.
  `flags`: more of headline.py's flags (a negative control: `--eta 1`, `--agents optdual`)."""
  setting, _, problem = RUNS[benchmark]
  argv = [*problem, "--setting", setting, "--agents", "optaug"]
  argv += ["--episodes", str(episodes), "--seeds", str(seeds), *flags]
  args = arguments.resolve_defaults(headline.parse_args(argv))
  if len(args.agents) != 1:
    raise cli.UsageError(f"one agent, got {','.join(args.agents)}")
  return args


def run_benchmark(benchmark, episodes, seeds, first_seed, *, flags=(), chunk=CHUNK):
  """OptAug (or the agent of `flags`) on `benchmark` (default arguments, float32) for
  `episodes` episodes, seeds `first_seed` ..: `(values, config, diagnostics)`, `values`
  `{metric: [per seed]}`."""
  if jax.config.jax_enable_x64:
    raise ValueError("float32 runs only: call it under jax.enable_x64(False)")
  args = agent_args(benchmark, episodes, seeds, flags)
  name = args.agents[0]
  bench = problems.build_problem(args)
  cmdp = bench.cmdp
  lp = oj.solve_lp(cmdp)
  options = arguments.agent_options(args)
  agent = runs.make_agents([name], bench, num_episodes=episodes, options=options)[name]
  seed_list = list(range(first_seed, first_seed + seeds))
  keys = jax.jit(jax.vmap(jax.random.PRNGKey))(jnp.asarray(seed_list, jnp.uint32))
  start = jax.jit(
    jax.vmap(lambda key, m: oj.run(agent, key, m, num_episodes=0)[0], in_axes=(0, None))
  )
  n = min(chunk, episodes)
  # The CMDP is an argument, not a constant (XLA would fold through its arrays).
  play = jax.jit(
    jax.vmap(
      lambda key, st, m: oj.run(agent, key, m, num_episodes=n, state=st), in_axes=(0, 0, None)
    ),
    donate_argnums=1,
  )
  trace = np.array(sorted({(9 * episodes) // 10, episodes}))
  reduce = reductions.LongRun(seeds, episodes, trace, 1, lp.value, cmdp.thresholds)
  started = time.perf_counter()
  state, done, uncertified, dps = start(keys, cmdp), 0, 0, []
  play = play.lower(keys, state, cmdp).compile()
  compiled = time.perf_counter() - started
  while done < episodes:
    state, log = play(keys, state, cmdp)
    log = jax.device_get(log)
    reduce.consume(log, done)
    uncertified += int(np.sum(~np.asarray(log.certified)))
    if "dp_calls" in log.extras:
      dps.append(float(np.mean(log.extras["dp_calls"])))
    done += n
    cli.progress(benchmark, done, episodes, started, seeds)
  seconds = time.perf_counter() - started
  rec = reduce.result()
  late = rec["trace_worst_positive_violation"][:, :, 0]
  values = {
    "strong_cost": rec["total_strong_cost"][:, 0],
    "weak_cost": rec["total_weak_cost"][:, 0],
    "strong_constraint": rec["total_strong_constraint"].max(-1),
    "weak_constraint": rec["total_weak_constraint"].max(-1),
    "late_positive_violation": (late[:, -1] - late[:, 0]) / (trace[-1] - trace[0]),
  }
  config = {
    "episodes": episodes,
    "setting": RUNS[benchmark][0],
    "agent_options": arguments.resolved_agent_options(args, bench)[name],
    "problem": result_files.problem_record(bench, lp),
  }
  diagnostics = {
    "seconds": seconds,
    "compile_seconds": compiled,
    "uncertified_solves": uncertified,
    "dp_calls_mean": float(np.mean(dps)) if dps else None,
  }
  jax.clear_caches()  # drop this benchmark's programs (memory mappings: vm.max_map_count)
  return {k: np.asarray(v, np.float64).tolist() for k, v in values.items()}, config, diagnostics


def holm(pvalues) -> np.ndarray:
  """Holm's step-down adjusted p-values: reject the hypotheses whose value is <= level."""
  p = np.asarray(pvalues, np.float64)
  adjusted, running = np.empty_like(p), 0.0
  for rank, i in enumerate(np.argsort(p, kind="stable")):
    running = max(running, min(1.0, (len(p) - rank) * p[i]))
    adjusted[i] = running
  return adjusted


def ties(x, y, rtol: float = RTOL):
  """`x` and `y` with the values of both closer than `rtol` x their largest |value| to the
  next one made equal (to the least of their run): float32 rounding is no difference."""
  pooled = np.concatenate([x, y])
  order = np.argsort(pooled, kind="stable")
  v = pooled[order]
  first = np.concatenate([[True], np.diff(v) > rtol * np.max(np.abs(v))])
  snapped = np.empty_like(pooled)
  snapped[order] = v[first][np.cumsum(first) - 1]
  return snapped[: len(x)], snapped[len(x) :]


def p_value(x, y, rtol: float = RTOL) -> float:
  """Two-sided Mann-Whitney U p-value of `ties(x, y)`; 1 when every value of both is one
  (zero spread to rounding), 0 with a NaN."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if np.isnan(x).any() or np.isnan(y).any():
    return 0.0
  x, y = ties(x, y, rtol)
  if np.ptp(np.concatenate([x, y])) == 0:
    return 1.0
  return float(scipy.stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)


def _mean_se(x):
  x = np.asarray(x, np.float64)
  return float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def compare(before: dict, after: dict, level: float = LEVEL) -> list[dict]:
  """The test of the module docstring on two records' `values` (`{benchmark: {metric:
  [per seed]}}`): a row per (benchmark, metric) of both, with both means and standard
  errors, p, Holm's adjusted p over all rows, and `rejected` (adjusted p <= `level`)."""
  rows = []
  for benchmark in [b for b in before if b in after]:
    for metric in [m for m in before[benchmark] if m in after[benchmark]]:
      x, y = before[benchmark][metric], after[benchmark][metric]
      row = dict(benchmark=benchmark, metric=metric, before=_mean_se(x), after=_mean_se(y))
      rows.append(dict(row, n=(len(x), len(y)), p=p_value(x, y)))
  for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
    row.update(p_holm=float(adjusted), rejected=bool(adjusted <= level))
  return rows


def _same_problem(a: dict, b: dict) -> bool:
  """The same problem record, its LP's floats to 1e-6 (another LP solve may round apart)."""
  floats = ("lp_value", "lp_multipliers", "thresholds", "safe_policy_slack")
  same = lambda k: np.allclose(a[k], b[k], rtol=1e-6) if k in floats else a[k] == b[k]
  return sorted(a) == sorted(b) and all(np.shape(a[k]) == np.shape(b[k]) and same(k) for k in a)


def _config_differences(a: dict, b: dict) -> list[str]:
  """What differs between two records' configs in what determines the samples' law."""
  out = []
  if sorted(a["benchmarks"]) != sorted(b["benchmarks"]):
    out.append(f"benchmarks {sorted(a['benchmarks'])} / {sorted(b['benchmarks'])}")
  for name in [n for n in a["benchmarks"] if n in b["benchmarks"]]:
    x, y = a["benchmarks"][name], b["benchmarks"][name]
    for key in ("episodes", "setting", "agent_options"):
      if x[key] != y[key]:
        out.append(f"{name}: {key}")
    if not _same_problem(x["problem"], y["problem"]):
      out.append(f"{name}: problem")
  for key in ("dtype", "metrics"):
    if a[key] != b[key]:
      out.append(key)
  return out


def _print_rows(rows, markdown: bool) -> None:
  ms = lambda v: f"{v[0]:.4g} ± {v[1]:.2g}"
  if markdown:
    print("| benchmark | metric | before | after | p | Holm p | verdict |")
    print("|---|---|---|---|---|---|---|")
  for r in rows:
    verdict = "REJECTED" if r["rejected"] else "pass"
    cells = [r["benchmark"], r["metric"], ms(r["before"]), ms(r["after"])]
    cells += [f"{r['p']:.3g}", f"{r['p_holm']:.3g}", verdict]
    widths = (16, 24, 22, 22, 9, 9, 8)
    plain = " ".join(
      f"{c:>{w}s}" if i > 1 else f"{c:{w}s}" for i, (c, w) in enumerate(zip(cells, widths))
    )
    print("| " + " | ".join(cells) + " |" if markdown else plain)


def run_compare(args) -> list[dict]:
  files = [result_files.read_file(path, "record") for path in args.compare]
  for path, record in zip(args.compare, files):
    if record.get("config", {}).get("script") != "statistics":
      raise cli.UsageError(f"--compare {path}: not a record of experiments/equivalence.py")
  a, b = (f["config"] for f in files)
  seeds = [set(range(c["first_seed"], c["first_seed"] + c["seeds"])) for c in (a, b)]
  if seeds[0] & seeds[1]:
    raise cli.UsageError(
      "--compare: the records share seeds; the test needs independent samples: run one"
      " again with another --first-seed"
    )
  differences = _config_differences(a, b)
  if differences and not args.allow_other_config:
    raise cli.UsageError(
      f"--compare: the configs differ ({'; '.join(differences)}); --allow-other-config"
      " compares them anyway (a negative control)"
    )
  for path, c in zip(args.compare, (a, b)):
    lib, flags = c["library"], " ".join(c.get("agent_flags", []))
    print(f"{path}: optaug_jax {lib['commit']} ({lib['root']}), agent flags '{flags}',", end="")
    print(f" seeds {c['first_seed']} + {c['seeds']}")
  if differences:
    print(f"the configs differ: {'; '.join(differences)}")
  rows = compare(files[0]["values"], files[1]["values"], args.level)
  _print_rows(rows, args.markdown)
  rejected = sum(r["rejected"] for r in rows)
  print(f"{rejected} of {len(rows)} rejected (Mann-Whitney U, Holm, level {args.level:g})")
  if rejected:
    raise SystemExit(1)
  return rows


def parse_args(argv=None):
  p = cli.ArgumentParser(
    prog="equivalence.py", description=__doc__, formatter_class=cli.HelpFormatter
  )
  p.add_argument("--seeds", type=cli.positive_int, default=32)
  p.add_argument("--first-seed", type=cli.seed, default=0, help="the first seed's number")
  p.add_argument(
    "--benchmarks",
    default=",".join(n for n in RUNS if n not in ASKED_FOR),
    help=f"a comma-separated subset; {', '.join(ASKED_FOR)} only when named",
  )
  p.add_argument("--episodes", type=cli.positive_int, help="K of all (default: RUNS)")
  p.add_argument("--chunk", type=cli.positive_int, default=CHUNK, help="a divisor of each K")
  p.add_argument(
    "--agent-flags",
    default="",
    metavar="FLAGS",
    help="more of headline.py's flags for the agent, e.g. '--eta 1' (a negative control)",
  )
  p.add_argument("--out", default="results/statistics.json", help="the record (JSON)")
  p.add_argument("--library", metavar="DIR", help="refuse another optaug_jax than DIR's")
  p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two records")
  p.add_argument("--level", type=cli.open_unit_float, default=LEVEL)
  p.add_argument("--allow-other-config", action="store_true", help="for a negative control")
  p.add_argument("--markdown", action="store_true", help="--compare's table in Markdown")
  args = p.parse_args(argv)
  args.benchmarks, args.agent_flags = args.benchmarks.split(","), shlex.split(args.agent_flags)
  if unknown := sorted(set(args.benchmarks) - set(RUNS)):
    p.error(f"--benchmarks: unknown {', '.join(unknown)}; choose from {', '.join(RUNS)}")
  for name in args.benchmarks:
    episodes = args.episodes or RUNS[name][1]
    if episodes % min(args.chunk, episodes):
      p.error(f"--chunk {args.chunk}: must divide K = {episodes} of {name}")
  if set(oj.benchmarks.BENCHMARKS) - set(RUNS):  # a new benchmark: give it a K
    p.error(f"registered benchmarks not in RUNS: {set(oj.benchmarks.BENCHMARKS) - set(RUNS)}")
  try:  # headline.py's own checks, refused now rather than mid-run
    name = args.benchmarks[0]
    agent_args(name, args.episodes or RUNS[name][1], args.seeds, args.agent_flags)
  except cli.UsageError as e:
    p.error(f"--agent-flags {shlex.join(args.agent_flags)}: {e}")
  return args


@cli.raises_usage_errors
def main(argv=None):
  args = parse_args(argv)
  if args.compare:
    return run_compare(args)
  lib = library()
  if args.library is not None:
    where = os.path.realpath(args.library)
    if os.path.commonpath([where, os.path.realpath(oj.__file__)]) != where:
      raise cli.UsageError(f"--library {args.library}: optaug_jax was imported from {oj.__file__}")
  skip = ("out", "compare", "markdown", "level", "allow_other_config")
  settings = {k: v for k, v in vars(args).items() if k not in skip}
  run_dir = result_files.result_file(args.out, "statistics", settings)
  cli.RUN.start(args.out)
  cli.RUN.keep(f"nothing written to {args.out} yet")
  machine = dict(platform=platform.platform(), processor=platform.machine(), cores=os.cpu_count())
  machine.update(cores_used=sorted(os.sched_getaffinity(0)), device=str(jax.devices()[0]))
  config = dict(script="statistics", benchmarks={}, seeds=args.seeds, first_seed=args.first_seed)
  config.update(agent_flags=args.agent_flags, dtype="float32", metrics=METRICS, library=lib)
  config.update(seed_keys="jax.random.PRNGKey(s), s = first_seed .. first_seed + seeds - 1")
  config.update(test=f"two-sided Mann-Whitney U per (benchmark, metric), Holm, level {LEVEL}")
  config.update(jax=jax.__version__, versions=result_files.versions(), machine=machine)
  print(f"optaug_jax from {lib['file']} (commit {lib['commit']}, changed: {lib['changed_files']})")
  record = {"config": config, "values": {}, "diagnostics": {}}
  with run_dir.running():
    for name in args.benchmarks:
      episodes = args.episodes or RUNS[name][1]
      values, bench_config, diagnostics = run_benchmark(
        name, episodes, args.seeds, args.first_seed, flags=args.agent_flags, chunk=args.chunk
      )
      config["benchmarks"][name] = bench_config
      record["values"][name] = values
      record["diagnostics"][name] = diagnostics
      run_dir.write_json(os.path.basename(args.out), record, indent=1)
      cli.RUN.keep(f"the values of {', '.join(record['values'])} in {args.out}")
      print(f"{name}: {diagnostics['seconds']:.0f} s, {diagnostics}", flush=True)
    run_dir.complete()
  return record


if __name__ == "__main__":
  cli.main_guard("equivalence", main)
