"""OptAug's episode against OptDual's, side by side in one process: time and extended DPs.

For each problem, both agents run vmapped over the same seeds; OptAug's pre-training is
short (`--pretrain`) and not timed. Two windows are timed (compilation excluded: the
window's jitted chunk is called once to compile it, then timed on a second call):

- early: the first `--early` episodes after OptAug's pre-training (OptDual: the same
  episodes);
- late: `--window` episodes after `--late-after` episodes. The state at `--late-after` is
  saved (`--cache DIR/<problem>_<agent>_<episodes>.npz`, with the run's identity, verified
  when read) so the long prefix is paid once.

Printed and saved (`--out`, JSON with the hardware and the arguments): seconds per
seed-episode of each agent, their ratio, and OptAug's extended DPs per episode (mean over
seeds and episodes, the mean over episodes of the maximum over the vmapped seeds, which is
what a batch pays, and the largest), and the fraction of its solves certified.

  python experiments/episode_cost.py                    # every problem, 16 seeds
  python experiments/episode_cost.py --problems media_streaming,lost_sales --late-after 0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time

import jax
import numpy as np

import optaug_jax as oj

PROBLEMS = {
  # name: (benchmark, its kwargs, setting, bonus scale)
  "media_streaming": ("media_streaming", {}, "paper", 0.1),
  "gridworld10_dense": ("gridworld", {"size": 10}, "bura2022", 1.0),
  "gridworld20_sparse": ("gridworld", {"size": 20}, "bura2022", 1.0),
  "queue": ("queue", {}, "bura2022", 1.0),
  "lost_sales": ("lost_sales", {}, "bura2022", 0.1),
}


def _agents(bench, setting, bonus, episodes, pretrain, eta):
  common = dict(setting=setting, bonus_scale=bonus)
  return {
    "optaug": oj.agents.make_agent(
      "optaug", bench, num_episodes=episodes, pretrain_episodes=pretrain, eta=eta, **common
    ),
    "optdual": oj.agents.make_agent("optdual", bench, num_episodes=episodes, **common),
  }


def _chunk(agent, cmdp, n):
  # The CMDP is an argument, not a closed-over constant: XLA would constant-fold through
  # its arrays (minutes of compilation at S = 100 or more).
  run = lambda key, state, model: oj.run(agent, key, model, num_episodes=n, state=state)
  fn = jax.jit(jax.vmap(run, in_axes=(0, 0, None)))
  return lambda keys, state: fn(keys, state, cmdp)


def _keys(seeds, stage):
  base = jax.random.split(jax.random.PRNGKey(0), seeds)
  return jax.vmap(lambda k: jax.random.fold_in(k, stage))(base)


def _advance(agent, cmdp, state, seeds, episodes, chunk, stage):
  """Runs `episodes` episodes in chunks (untimed); returns the state."""
  done = 0
  while done < episodes:
    n = min(chunk, episodes - done)
    state, _ = _chunk(agent, cmdp, n)(_keys(seeds, stage + done), state)
    done += n
  return jax.block_until_ready(state)


def _identity(args, problem, name):
  text = json.dumps(
    {"problem": problem, "agent": name, "seeds": args.seeds, "pretrain": args.pretrain,
     "eta": args.eta, "late_after": args.late_after, "chunk": args.chunk,
     "x64": bool(jax.config.jax_enable_x64), "versions": [oj.__version__, jax.__version__]},
    sort_keys=True,
  )
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cached_state(args, problem, name, agent, cmdp, init):
  """The state after `--late-after` episodes, from the cache when it holds this run's."""
  path = os.path.join(args.cache, f"{problem}_{name}_{args.late_after}.npz")
  ident = _identity(args, problem, name)
  leaves, treedef = jax.tree.flatten(init)
  if os.path.exists(path):
    with np.load(path) as f:
      if str(f["identity"]) == ident and len(f.files) == len(leaves) + 1:
        return jax.tree.unflatten(treedef, [f[f"leaf{i}"] for i in range(len(leaves))])
    print(f"  {path}: another run's state; recomputing", flush=True)
  state = _advance(agent, cmdp, init, args.seeds, args.late_after, args.chunk, stage=1)
  os.makedirs(args.cache, exist_ok=True)
  tmp = path + ".tmp.npz"
  np.savez(tmp, identity=ident,
           **{f"leaf{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(state))})
  os.replace(tmp, path)
  return state


def _timed(agent, cmdp, state, seeds, episodes, stage):
  """Seconds per seed-episode of one call (compiled first) and its log."""
  fn = _chunk(agent, cmdp, episodes)
  keys = _keys(seeds, stage)
  jax.block_until_ready(fn(keys, state))  # compiles (and warms up)
  start = time.perf_counter()
  _, log = fn(keys, state)
  jax.block_until_ready(log)
  return (time.perf_counter() - start) / (seeds * episodes), log


def _dp_stats(log):
  dp = np.asarray(log.extras["dp_calls"])  # [seeds, episodes]
  return {
    "dp_mean": float(dp.mean()),
    "dp_vmapped_max_mean": float(dp.max(axis=0).mean()),
    "dp_max": int(dp.max()),
    "certified": float(np.asarray(log.certified).mean()),
  }


def measure(args, problem):
  bench_name, kwargs, setting_name, bonus = PROBLEMS[problem]
  bench = oj.benchmarks.make_benchmark(bench_name, **kwargs)
  cmdp = bench.cmdp
  setting = oj.named_setting(setting_name, cmdp)
  total = args.pretrain + max(args.early, args.late_after + args.window)
  agents = _agents(bench, setting, bonus, total, args.pretrain, args.eta)
  row = {"problem": problem, "S": cmdp.num_states, "A": cmdp.num_actions, "H": cmdp.horizon,
         "sparse": cmdp.next_states is not None, "setting": setting_name, "bonus_scale": bonus}
  for window in ("early", "late"):
    if window == "late" and args.late_after <= 0:
      continue
    for name, agent in agents.items():
      # OptAug's pre-training, untimed (OptDual plays the same number of episodes).
      start = _advance(agent, cmdp, None, args.seeds, args.pretrain, args.chunk, stage=2)
      if window == "late":
        start = _cached_state(args, problem, name, agent, cmdp, start)
      n = args.early if window == "early" else args.window
      seconds, log = _timed(agent, cmdp, start, args.seeds, n, stage=3)
      row[f"{window}_{name}_s"] = seconds
      if name == "optaug":
        row.update({f"{window}_{k}": v for k, v in _dp_stats(log).items()})
    row[f"{window}_ratio"] = row[f"{window}_optaug_s"] / row[f"{window}_optdual_s"]
  return row


def _print(row):
  parts = [f"{row['problem']:20s} S={row['S']:4d}"]
  for w in ("early", "late"):
    if f"{w}_ratio" in row:
      parts.append(
        f"{w}: {row[f'{w}_ratio']:.2f}x ({1e3 * row[f'{w}_optaug_s']:.3f} /"
        f" {1e3 * row[f'{w}_optdual_s']:.3f} ms), DPs {row[f'{w}_dp_mean']:.2f}"
        f" (vmapped max {row[f'{w}_dp_vmapped_max_mean']:.2f}, max {row[f'{w}_dp_max']}),"
        f" certified {row[f'{w}_certified']:.4f}"
      )
  print(" | ".join(parts), flush=True)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--problems", default=",".join(PROBLEMS),
                 help=f"comma-separated subset of: {', '.join(PROBLEMS)}")
  p.add_argument("--seeds", type=int, default=16)
  p.add_argument("--pretrain", type=int, default=20, help="OptAug's pre-training (untimed)")
  p.add_argument("--eta", type=float, default=20.0, help="OptAug's constant eta")
  p.add_argument("--early", type=int, default=500, help="episodes of the early window")
  p.add_argument("--late-after", type=int, default=10_000,
                 help="episodes before the late window (0: no late window)")
  p.add_argument("--window", type=int, default=200, help="episodes of the late window")
  p.add_argument("--chunk", type=int, default=1000, help="episodes per untimed chunk")
  p.add_argument("--cache", default="results/episode_cost_states")
  p.add_argument("--out", default="results/episode_cost.json")
  p.add_argument("--x64", action="store_true")
  args = p.parse_args(argv)
  problems = args.problems.split(",")
  unknown = sorted(set(problems) - set(PROBLEMS))
  if unknown:
    p.error(f"--problems: unknown {', '.join(unknown)}; choose from {', '.join(PROBLEMS)}")
  for flag in ("seeds", "early", "window", "chunk"):
    if getattr(args, flag) < 1:
      p.error(f"--{flag}: must be >= 1, got {getattr(args, flag)}")
  if args.pretrain < 1 or args.late_after < 0:
    p.error("--pretrain must be >= 1 and --late-after >= 0")
  if args.x64:
    jax.config.update("jax_enable_x64", True)
  print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores,"
        f" jax {jax.__version__} on {jax.devices()[0].platform}; {args.seeds} seeds vmapped,"
        f" float{64 if args.x64 else 32}; early: {args.early} episodes after {args.pretrain}"
        f" of pre-training; late: {args.window} after {args.late_after}", flush=True)
  rows = []
  for problem in problems:
    rows.append(measure(args, problem))
    _print(rows[-1])
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
      json.dump({"args": vars(args), "machine": {"cpu": platform.processor(),
                 "cores": os.cpu_count(), "platform": jax.devices()[0].platform,
                 "jax": jax.__version__, "optaug_jax": oj.__version__}, "rows": rows},
                f, indent=1)
  return rows


if __name__ == "__main__":
  sys.exit(0 if main() else 1)
