"""Running agents: the agents from the registry (`make_agents`), chunked vmapped runs with
progress and checkpoints (`run_chunks`), and the set-up that the learning-run scripts share
(`setup`: config, problem, LP optimum, seed keys, agents; `started_agents`: each agent's
state from its checkpoint or from the start).

What the library refuses while the run is set up (the problem, its LP, the agents) is
reported as a `cli.UsageError` naming the flag, never as a traceback. The command line is
`arguments`', the problem `problems`', the figure panels `figures`'.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any, NamedTuple

import jax
import numpy as np

import optaug_jax as oj
from optaug_jax._src.experiment import (
  agent_flags,
  arguments,
  checkpoints,
  cli,
  problems,
  processes,
  result_files,
)


def make_agents(names, benchmark, *, num_episodes: int, options: dict) -> dict:
  """`oj.agents.make_agents` (the registry's): `{label: agent}`, each agent taking the
  options its factory accepts. `names` may hold your own factories as
  `path/to/file.py:FACTORY` or `MODULE:FACTORY` (registered under their labels:
  `problems.load_agent`; what they receive: `arguments.AGENT_RULE`); a spec that cannot be
  loaded, and a factory that raises or returns no `oj.agents.Agent`, raise a one-line
  `cli.UsageError` naming `--agents`."""
  labels = [problems.agent_label(name) for name in names]
  agents = {}
  for name, label in zip(names, labels):
    if problems.user_agent_spec(label) is None:
      agents.update(
        oj.agents.make_agents([label], benchmark, num_episodes=num_episodes, options=options)
      )
      continue
    try:
      agent = oj.agents.make_agents([label], benchmark, num_episodes=num_episodes, options=options)[
        label
      ]
    except Exception as e:  # your factory: any fault in it is reported in one line
      raise cli.UsageError(f"--agents {name}: {label}(...) raised {type(e).__name__}: {e}") from e
    if not isinstance(agent, oj.Agent):
      raise cli.UsageError(
        f"--agents {name}: {label}(...) returned {type(agent).__name__}; expected an"
        " oj.agents.Agent (init, plan, update)"
      )
    agents[label] = agent
  return agents


def final_regrets(log, lp_value, thresholds) -> dict:
  """Mean over seeds of each final regret (`oj.regrets` of a `[seeds, K]` log)."""
  reg = oj.regrets(log, lp_value, thresholds)
  return {field: float(np.mean(np.asarray(getattr(reg, field))[..., -1])) for field in reg._fields}


def run_chunks(name, agent, cmdp, keys, start: Started, args):
  """Runs `agent` vmapped over `keys` from `start` (its state at episode `start.done`) to
  `args.episodes`, in jitted chunks of `args.chunk` episodes (`processes.chunk_runner`: over
  every process's devices with `oj.run_sharded` when `args` asks for it): after each, the
  chunk's host log (whole, on every process) goes to `start.reduction` and process 0
  checkpoints to `start.checkpoint`. Stops early after `args.max_chunks` chunks (None:
  never). At the end, observed transitions that `--setting`'s declared support excludes
  are named in a warning (`oj.support_violations`). Returns `(finished, seconds)`."""
  reduce, total = start.reduction, args.episodes
  done, state, seconds = start.done, start.state, start.seconds
  compiled = {}  # one compiled function per chunk length
  several = jax.process_count() > 1  # gathers are collectives: every process takes part
  started = time.perf_counter() - seconds
  chunks = 0
  while done < total:
    result_files.raise_if_interrupted()  # a Ctrl-C that Python dropped in a callback
    if args.max_chunks is not None and chunks >= args.max_chunks:
      print(f"\n{name}: stopped after {chunks} chunks (--max-chunks); use --resume")
      return False, seconds
    n = min(args.chunk, total - done)
    if n not in compiled:
      compiled[n] = processes.chunk_runner(agent, cmdp, args, n)
    state, log = compiled[n](keys, state)
    reduce.consume(processes.gather(log), done)
    done += n
    chunks += 1
    seconds = time.perf_counter() - started
    whole = processes.gather(state) if several else state
    if processes.writes():  # process 0 writes the checkpoints
      checkpoints.save_checkpoint(
        start.checkpoint, start.identity, done, whole, reduce.arrays(), seconds
      )
    cli.RUN.checkpoint(name, done, total)  # for the line printed on Ctrl-C or a full disk
    cli.progress(name, done, total, started, keys.shape[0])
  sys.stdout.write("\n")
  if state is not None and hasattr(state, "counts"):  # a linear agent's has no counts
    counts = processes.gather(state.counts) if several else state.counts
    oj.support_violations(counts, oj.named_setting(args.setting, cmdp))  # warns, naming pairs
  return True, seconds


# A refused argument (`oj.ArgumentError.field`) -> the flag that sets it.
LIBRARY_OPTIONS = {
  "num_episodes": "--episodes",
  "pretrain_episodes": "--pretrain",
  "delta": "--delta",
  "bonus_scale": "--bonus-scale",
  "nu": "--nu",
  "inner": "--inner",
  "num_iters": "--fw-iters",
  "step_rule": "--step-rule",
  "unreached": "--unreached",
  "setting": "--setting",
  "setting.support": "--setting",
  "temperature": "--temperature",
  "cost_bonus": "--linear-bonus",
  "constraint_bonus": "--linear-bonus",
  "compensation_bonus": "--linear-bonus",
  "safe_policy": "--benchmark",
  "slack": "--benchmark",
}


def _library_refused(context: str, error: ValueError, agent: str | None = None):
  """A `cli.UsageError` for a ValueError the library raised on the run's flags: `context`,
  the flag behind the refused argument where the error names it (`oj.ArgumentError.field`),
  and its message."""
  message = str(error)
  name = getattr(error, "field", None)
  flag = LIBRARY_OPTIONS.get(name) if name else None
  if name == "eta" and agent is not None:
    flag = "--eta" if arguments.agent_kind(agent) == "optaug" else "--dual-eta"
  which = f" {flag}" if flag else ""
  return cli.UsageError(f"{context}: the library refuses{which or ' this run'} ({message})")


def setup(args, script: str, outputs):
  """Config, record (config.json's content), problem, LP optimum, seed keys, agents and the
  checked output directory (`result_files.ResultDir`) of a run. Writes nothing: the caller
  verifies its checkpoints, then writes inside `run_dir.running()`. Shared with
  `headline.py`.

  Raises `cli.UsageError` naming the flags when the library refuses the problem, its LP or
  an agent's options (the scripts' `cli.main_guard` prints it as one line, exit status 2),
  and `result_files.ResultDirError` for a directory this run may not use."""
  if args.x64:
    jax.config.update("jax_enable_x64", True)
  processes.initialize(args)  # before any JAX computation
  cli.RUN.start(None)
  bench = problems.build_problem(args)  # before the directory's check: its digest is a setting
  # Neither the processes (same numbers on any number: `processes`) nor the paths count.
  ignored = {"resume", "max_chunks", "out", *processes.FLAGS}
  if args.batch_size in (None, "auto"):  # runs before --batch-size: every seed at once
    ignored.add("batch_size")
  if args.benchmark != "random_family":  # the size flags describe the random family only
    ignored |= {"states", "actions", "horizon", "constraints"}
    if args.benchmark not in oj.linear.PUBLISHED_CONSTANTS:  # Kitamura et al.'s instance
      ignored.add("problem_seed")
  if not set(args.agents) & set(agent_flags.LINEAR_AGENTS):  # the linear agents' flags
    ignored |= {"temperature", "linear_bonus"}
  if args.benchmark != "gridworld" or args.grid_size is None:
    ignored |= {"grid_size"}
  ignored.add("agent_specs")  # the specs are in "agents"
  specs = getattr(args, "agent_specs", {})
  config = {k: v for k, v in vars(args).items() if k not in ignored}
  config.update(
    agents=",".join(specs.get(name, name) for name in args.agents),
    eta=cli.eta_flag(args.eta),
    dual_eta=cli.eta_flag(args.dual_eta),
    problem_digest=problems.problem_digest(bench),
  )
  run_dir = result_files.ResultDir(
    args.out, script, config, outputs, resume=args.resume, writer=processes.writes()
  ).check()
  cli.RUN.start(args.out)
  cmdp = bench.cmdp
  try:
    lp = oj.solve_lp(cmdp)
  except ValueError as e:
    raise _library_refused(f"--benchmark {args.benchmark}: its LP", e) from e
  record = result_files.run_config(config, bench, lp)
  record["script"] = script
  record["seed_keys"] = f"jax.random.split(PRNGKey({args.seed}), {args.seeds})"
  try:
    setting = oj.named_setting(args.setting, cmdp)
  except ValueError as e:
    raise _library_refused(f"--setting {args.setting} with --benchmark {args.benchmark}", e) from e
  try:
    record["setting"] = dataclasses.replace(setting, delta=args.delta).describe()
  except ValueError as e:
    raise _library_refused(f"--setting {args.setting} --delta {args.delta:g}", e) from e
  print(
    f"{args.benchmark} ({args.setting} setting): S={cmdp.num_states} A={cmdp.num_actions}"
    f" H={cmdp.horizon} I={cmdp.num_constraints}, V* = {lp.value:.4f}, alpha ="
    f" {np.round(np.asarray(cmdp.thresholds), 4)}, safe slack = {bench.slack:.4f}"
  )
  record["agent_options"] = arguments.resolved_agent_options(args, bench)
  for name, options in record["agent_options"].items():
    print(arguments.options_line(name, options))
  keys = jax.random.split(jax.random.PRNGKey(args.seed), args.seeds)
  agents = {}
  for name in args.agents:
    try:
      agents.update(
        make_agents(
          [specs.get(name, name)],
          bench,
          num_episodes=args.episodes,
          options=arguments.agent_options(args),
        )
      )
    except cli.UsageError:
      raise  # your own factory's fault, already in one line naming its spec
    except ValueError as e:
      raise _library_refused(f"--agents {name}", e, agent=name) from e
  return config, record, bench, lp, keys, agents, run_dir


class Started(NamedTuple):
  """Where one agent's run starts: its checkpoint file and identity, the episodes done, the
  vmapped state, the seconds spent so far, and its reduction (restored from the checkpoint
  when resuming)."""

  checkpoint: str
  identity: dict
  done: int
  state: Any
  seconds: float
  reduction: Any


def started_agents(args, config, record, agents, cmdp, keys, reduction) -> dict:
  """`{name: Started}` for every agent, before any runs: with `--resume`, each agent's
  verified checkpoint (a refused one stops the run with nothing written), else episode 0.
  `reduction()` makes an agent's fresh reduction (`reductions.FullLogs`, `LongRun`)."""
  out = {}
  for name, agent in agents.items():
    # What determines the numbers: every argument but the paths, the agent, the versions.
    identity = checkpoints.agent_identity(config, name, record)
    if problems.user_agent_spec(name) is not None:  # your own agent: its file and factory
      identity["agent_spec"] = problems.user_agent_spec(name)
    checkpoint = os.path.join(args.out, f"checkpoint_{name}.npz")
    init = jax.vmap(lambda key, agent=agent: oj.run(agent, key, cmdp, num_episodes=0)[0])(keys)
    reduce = reduction()
    done, state, seconds = 0, init, 0.0
    if args.resume and os.path.exists(checkpoint):
      done, state, arrays, seconds = checkpoints.load_checkpoint(
        checkpoint, identity, init, args.episodes, reduce.check
      )
      reduce.restore(arrays)
      print(f"{name}: resuming at episode {done} of {args.episodes}")
    out[name] = Started(checkpoint, identity, done, state, seconds, reduce)
    if done:
      cli.RUN.checkpoint(name, done, args.episodes)
  return out


def run_agent(name, agent, cmdp, keys, args, start: Started):
  """The agent's chunked vmapped run from `start`, each chunk fed to its reduction and
  checkpointed (`run_chunks`); `(reduction.result(), seconds)`, or `(None, seconds)` when
  stopped by --max-chunks."""
  finished, seconds = run_chunks(name, agent, cmdp, keys, start, args)
  return (start.reduction.result() if finished else None), seconds
