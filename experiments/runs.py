"""Running agents in the experiment scripts: the agents from the registry, chunked vmapped
runs with checkpoints, and the command line, problem and setup that the main experiments
(`cancellation.py`, `headline.py`) share.

Every script that runs agents builds them with `make_agents` (from `oj.agents.AGENTS`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import jax
import numpy as np

import optaug_jax as oj

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli  # noqa: E402  (this directory's modules)
import result_files  # noqa: E402


def make_agents(names, benchmark, *, num_episodes: int, options: dict) -> dict:
  """`{name: agent}` from the registry; each agent takes the options its factory accepts.

  `options` maps an option name to a value for every agent that accepts it, or to a dict
  `{agent name: value}` for agent-specific values.
  """
  agents = {}
  for name in names:
    accepted = oj.agents.agent_options(name)
    mine = {}
    for key, value in options.items():
      if isinstance(value, dict):
        if name in value:
          mine[key] = value[name]
      elif key in accepted:
        mine[key] = value
    agents[name] = oj.agents.make_agent(name, benchmark, num_episodes=num_episodes, **mine)
  return agents


def final_regrets(log, lp_value, thresholds) -> dict:
  """Mean over seeds of each final regret (`oj.regrets` of a `[seeds, K]` log)."""
  reg = oj.regrets(log, lp_value, thresholds)
  return {field: float(np.mean(np.asarray(getattr(reg, field))[..., -1]))
          for field in reg._fields}


def run_chunks(name, agent, cmdp, keys, state, *, done, total, chunk, max_chunks, seconds,
               consume, save, setting=None):
  """Runs `agent` vmapped over `keys` from `state` (at episode `done`) to `total`, in
  jitted chunks of `chunk` episodes: after each, `consume(log, done_before)` takes the
  chunk's host log and `save(done, state, seconds)` checkpoints. Stops early after
  `max_chunks` chunks (None: never). At the end, observed transitions that `setting`'s
  declared support excludes are named in a warning (`oj.support_violations`). Returns
  `(finished, seconds)`."""
  compiled = {}  # one compiled function per chunk length
  started = time.perf_counter() - seconds
  chunks = 0
  while done < total:
    if max_chunks is not None and chunks >= max_chunks:
      print(f"\n{name}: stopped after {chunks} chunks (--max-chunks); use --resume")
      return False, seconds
    n = min(chunk, total - done)
    if n not in compiled:
      compiled[n] = jax.jit(jax.vmap(
          lambda key, st, n=n: oj.run(agent, key, cmdp, num_episodes=n, state=st)),
          donate_argnums=1)
    state, log = compiled[n](keys, state)
    consume(jax.device_get(log), done)
    done += n
    chunks += 1
    seconds = time.perf_counter() - started
    save(done, state, seconds)
    cli.progress(name, done, total, started, keys.shape[0])
  sys.stdout.write("\n")
  if setting is not None and state is not None:
    oj.support_violations(state.counts, setting)  # warns, naming the pairs
  return True, seconds


def oscillation_panel(ax, episodes, gap, title):
  """Per-episode `max_i V(d_i) - alpha_i` of the first three seeds (`gap`: [seeds, n, I])."""
  for s in range(min(3, gap.shape[0])):
    ax.plot(episodes, gap[s].max(-1), lw=0.8, label=f"seed {s}")
  ax.axhline(0, color="k", lw=0.6)
  ax.set_title(title)
  ax.set_xlabel("episode k")
  ax.set_ylabel("max_i V(d_i) - alpha_i (per episode)")
  ax.legend(fontsize=8)


# The command line, problem and setup of the main experiments (cancellation.py, headline.py).


def build_problem(args) -> oj.benchmarks.Benchmark:
  """The chosen benchmark (the random family takes the size flags)."""
  kwargs = {}
  if args.benchmark == "random_family":
    kwargs = dict(seed=args.problem_seed, num_states=args.states, num_actions=args.actions,
                  horizon=args.horizon, num_constraints=args.constraints)
  if args.benchmark == "gridworld" and args.grid_size is not None:
    kwargs = dict(size=args.grid_size)
  return oj.benchmarks.make_benchmark(args.benchmark, **kwargs)


# --bonus-scale when not given: the main experiment's 0.1 in the paper's setting, the
# published radii (1.0) in Bura et al.'s.
DEFAULT_BONUS_SCALE = {"paper": 0.1, "bura2022": 1.0}


# OptDual and its multiplier-update variants: `--dual-eta` is their step.
DUAL_AGENTS = ("optdual", "optdual_optimistic", "pid_lagrangian", "nupi_lagrangian")


def agent_options(args) -> dict:
  """The flags as agent options (each agent takes those its factory accepts)."""
  eta = {name: args.dual_eta for name in DUAL_AGENTS}
  eta["optaug"] = args.eta
  inner = (oj.inner.exact() if args.inner == "exact"
           else oj.inner.frank_wolfe(num_iters=args.fw_iters, step_rule=args.step_rule))
  return {"setting": args.setting, "delta": args.delta, "bonus_scale": args.bonus_scale,
          "pretrain_episodes": {"optaug": args.pretrain}, "nu": args.nu,
          "inner": {"optaug": inner}, "unreached": args.unreached, "eta": eta}


def run_title(args) -> str:
  """A figure's identity line: problem, setting, radii, seeds and episodes."""
  problem = args.benchmark + (f" {args.grid_size}x{args.grid_size}"
                              if args.benchmark == "gridworld" and args.grid_size else "")
  return (f"{problem}, {args.setting} setting (bonus scale {args.bonus_scale:g}),"
          f" {args.seeds} seeds x {args.episodes} episodes")


def build_parser(description: str) -> argparse.ArgumentParser:
  """The flags of the experiment (shared with `headline.py`, which changes defaults)."""
  p = argparse.ArgumentParser(description=description, formatter_class=cli.HelpFormatter)
  p.add_argument("--benchmark", default="media_streaming",
                 choices=sorted(oj.benchmarks.BENCHMARKS), help="the CMDP")
  p.add_argument("--agents", default="optaug,optdual,optprimaldual", type=cli.agent_list,
                 help=f"comma-separated subset of: {', '.join(sorted(oj.agents.AGENTS))}"
                      " (optcmdp is slow: one HiGHS LP per seed and episode, sequential)")
  p.add_argument("--seeds", type=cli.positive_int, default=32,
                 help="independent runs per agent (vmapped)")
  p.add_argument("--episodes", type=cli.positive_int, default=3000,
                 help="episodes per run (K)")
  p.add_argument("--chunk", type=cli.positive_int, default=250,
                 help="episodes per jitted chunk (a checkpoint after each)")
  p.add_argument("--out", default="results/cancellation",
                 help="the run's directory (DIR): one run's files and manifest.json; a fresh"
                      " run of other settings removes the previous run's outputs first; a"
                      " directory of another script is refused")
  p.add_argument("--resume", action="store_true",
                 help="continue from DIR's checkpoints (same settings only; a refused resume"
                      " leaves DIR as it was)")
  p.add_argument("--max-chunks", type=cli.positive_int, default=None,
                 help="stop each agent after this many chunks (simulates an interruption);"
                      " default: run to the end")
  p.add_argument("--seed", type=int, default=0, help="seed of the episode keys")
  p.add_argument("--setting", default="paper", choices=oj.SETTINGS,
                 help="what the agents know and their confidence convention: 'paper' (learned"
                      " costs, counts per step, all next states possible, log(6SAHK/delta),"
                      " delta 0.1) or 'bura2022' (Bura et al. 2022's experiments: known costs"
                      " and next-state support, counts pooled over steps, log(6S^2HK/delta),"
                      " delta 0.01)")
  p.add_argument("--delta", type=float, default=None,
                 help="confidence parameter; default: the setting's (0.1 paper, 0.01"
                      " bura2022)")
  p.add_argument("--bonus-scale", type=float, default=None,
                 help="multiplier of every confidence radius; default: 0.1 in the paper"
                      " setting, 1.0 (the published radii) in bura2022")
  p.add_argument("--pretrain", type=cli.non_negative_int, default=300,
                 help="OptAug's pre-training episodes K' (its safe baseline)")
  p.add_argument("--eta", default=100.0, type=cli.parse_eta,
                 help="OptAug's eta: a positive float or 'paper' (the paper's schedule,"
                      " which needs --x64)")
  p.add_argument("--nu", type=float, default=0.5, help="nu of the paper's eta schedule")
  p.add_argument("--fw-iters", type=cli.positive_int, default=50,
                 help="Frank-Wolfe steps (with --inner frank_wolfe)")
  p.add_argument("--step-rule", default="linesearch", choices=oj.inner.STEP_RULES,
                 help="Frank-Wolfe's step (with --inner frank_wolfe)")
  p.add_argument("--inner", default="exact", choices=("exact", "frank_wolfe"),
                 help="OptAug's inner solver: oj.inner.exact() or the paper's Frank-Wolfe"
                      " (oj.inner.frank_wolfe, --fw-iters steps of --step-rule)")
  p.add_argument("--unreached", default="greedy", choices=oj.inner.UNREACHED,
                 help="OptAug's policy where its inner solution's occupancy is 0: the"
                      " extended DP's action on the gradient there ('greedy'), or uniform"
                      " (the choice of results committed before 2026-11-24)")
  p.add_argument("--dual-eta", default=None, type=cli.parse_eta,
                 help="the step of OptDual and its variants (" + ", ".join(DUAL_AGENTS[1:])
                      + "): a positive float or 'paper'; default: 'paper'")
  p.add_argument("--x64", action="store_true", help="float64 (needed for --eta paper)")
  # random benchmark
  for flag, default, symbol in (("--states", 10, "S"), ("--actions", 4, "A"),
                                ("--horizon", 10, "H"), ("--constraints", 1, "I")):
    p.add_argument(flag, type=cli.positive_int, default=default,
                   help=f"{symbol} of --benchmark random_family")
  p.add_argument("--problem-seed", type=int, default=0, help="seed of --benchmark random_family")
  p.add_argument("--grid-size", type=cli.positive_int, default=None,
                 help="side of --benchmark gridworld (default 5; sparse layout above 10: with"
                      " --setting bura2022 the agents count in its 5 slots per row)")
  return p


def check_args(parser, args):
  """Refuses flag combinations that cannot work (argparse's error: usage and one line)."""
  if args.eta is None and not args.x64:
    parser.error("--eta paper: the paper's schedule reaches eta = 1e7 and more, which"
                 " float32 does not resolve; add --x64, or give a constant eta (e.g."
                 " --eta 100)")
  return args


def resolve_defaults(args):
  """Fills the setting-dependent defaults (`--delta`, `--bonus-scale`) in place."""
  if args.bonus_scale is None:
    args.bonus_scale = DEFAULT_BONUS_SCALE[args.setting]
  if args.delta is None:
    args.delta = oj.Setting(log_factor=args.setting).resolved_delta
  return args


def setup(args, script: str, outputs):
  """Config, record (config.json's content), problem, LP optimum, seed keys, agents and the
  checked output directory (`result_files.ResultDir`) of a run. Writes nothing: the caller
  verifies its checkpoints, then writes inside `run_dir.running()`. Shared with
  `headline.py`."""
  if args.x64:
    jax.config.update("jax_enable_x64", True)
  ignored = {"resume", "max_chunks", "out"}
  if args.benchmark != "random_family":  # the size flags describe the random family only
    ignored |= {"states", "actions", "horizon", "constraints", "problem_seed"}
  if args.benchmark != "gridworld" or args.grid_size is None:
    ignored |= {"grid_size"}
  config = {k: v for k, v in vars(args).items() if k not in ignored}
  config.update(agents=",".join(args.agents), eta=cli.eta_flag(args.eta),
                dual_eta=cli.eta_flag(args.dual_eta))
  run_dir = result_files.ResultDir(args.out, script, config, outputs, resume=args.resume).check()
  bench = build_problem(args)
  cmdp = bench.cmdp
  lp = oj.solve_lp(cmdp)
  record = result_files.run_config(config, bench, lp)
  record["script"] = script
  record["seed_keys"] = f"jax.random.split(PRNGKey({args.seed}), {args.seeds})"
  record["setting"] = dataclasses.replace(oj.named_setting(args.setting, cmdp),
                                          delta=args.delta).describe()
  print(f"{args.benchmark} ({args.setting} setting): S={cmdp.num_states} A={cmdp.num_actions}"
        f" H={cmdp.horizon} I={cmdp.num_constraints}, V* = {lp.value:.4f}, alpha ="
        f" {np.round(np.asarray(cmdp.thresholds), 4)}, safe slack = {bench.slack:.4f}")
  keys = jax.random.split(jax.random.PRNGKey(args.seed), args.seeds)
  agents = make_agents(args.agents, bench, num_episodes=args.episodes,
                              options=agent_options(args))
  return config, record, bench, lp, keys, agents, run_dir


def started_agents(args, config, record, agents, start):
  """`{name: (checkpoint, identity, start(name, agent, checkpoint, identity))}` for every
  agent, before any runs: a refused checkpoint stops the run with nothing written."""
  out = {}
  for name, agent in agents.items():
    # What determines the numbers: every argument but the paths, the agent, the versions.
    identity = result_files.agent_identity(config, name, record)
    checkpoint = os.path.join(args.out, f"checkpoint_{name}.npz")
    out[name] = checkpoint, identity, start(name, agent, checkpoint, identity)
  return out
