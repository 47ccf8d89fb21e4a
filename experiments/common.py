"""Helpers shared by the experiment scripts: flags, agents from the registry, configs.

Every script that runs agents builds them with `make_agents` (from `oj.agents.AGENTS`),
takes step sizes with one flag convention (`parse_eta`: a positive float, or `paper` for
the paper's schedule), and records what determines its numbers with `run_config`.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj

PACKAGES = ("jax", "jaxlib", "optax", "chex", "numpy", "scipy", "optaug-jax")


def parse_eta(text: str) -> float | None:
  """A step-size flag: `paper` (the paper's schedule: `None`) or a positive float."""
  if str(text).strip().lower() == "paper":
    return None
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a positive number or 'paper', got {text!r}")
  if not np.isfinite(value) or value <= 0:
    raise argparse.ArgumentTypeError(f"expected a positive number or 'paper', got {text!r}")
  return value


def eta_flag(value: float | None) -> str:
  """The flag text of a parsed eta (inverse of `parse_eta`), for configs."""
  return "paper" if value is None else repr(value)


def agent_list(text: str) -> list[str]:
  """Comma-separated agent names, checked against the registry."""
  names = [a.strip() for a in text.split(",") if a.strip()]
  unknown = [n for n in names if n not in oj.agents.AGENTS]
  if unknown or not names:
    raise argparse.ArgumentTypeError(
        f"unknown agents {unknown}; choose from {sorted(oj.agents.AGENTS)}")
  return names


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


def versions() -> dict:
  """Installed versions of the packages that determine the numbers."""
  out = {}
  for p in PACKAGES:
    try:
      out[p] = importlib.metadata.version(p)
    except importlib.metadata.PackageNotFoundError:
      out[p] = None
  return out


def problem_record(benchmark, lp) -> dict:
  """The problem's real sizes, optimum and thresholds."""
  cmdp = benchmark.cmdp
  return {"states": cmdp.num_states, "actions": cmdp.num_actions, "horizon": cmdp.horizon,
          "constraints": cmdp.num_constraints, "lp_value": float(lp.value),
          "lp_multipliers": np.asarray(lp.multipliers).tolist(),
          "thresholds": np.asarray(cmdp.thresholds).tolist(),
          "safe_policy_slack": float(benchmark.slack), "dtype": str(cmdp.cost.dtype)}


def run_config(arguments: dict, benchmark, lp) -> dict:
  """What a saved result carries: arguments, problem, versions and machine."""
  return {"arguments": arguments, "problem": problem_record(benchmark, lp),
          "versions": versions(), "device": str(jax.devices()[0]),
          "machine": {"platform": platform.platform(), "processor": platform.processor()}}


def final_regrets(log, lp_value, thresholds) -> dict:
  """Mean over seeds of each final regret (`oj.regrets` of a `[seeds, K]` log)."""
  reg = oj.regrets(log, lp_value, thresholds)
  return {field: float(np.mean(np.asarray(getattr(reg, field))[..., -1]))
          for field in reg._fields}


def progress(name, done, total, started, seeds):
  """One overwritten line: episodes done, rate and time left."""
  elapsed = time.perf_counter() - started
  rate = done / max(elapsed, 1e-9)
  eta_s = (total - done) / max(rate, 1e-9)
  bar = "#" * int(30 * done / total)
  sys.stdout.write(f"\r{name:18s} [{bar:30s}] {done}/{total} episodes x {seeds} seeds,"
                   f" {rate:7.1f} ep/s, ETA {eta_s:6.0f} s ")
  sys.stdout.flush()


class CheckpointError(ValueError):
  """A checkpoint that cannot be used for this run (the message says why and what to do)."""


def digest(arrays: dict) -> str:
  """SHA-256 of the arrays (names, dtypes, shapes and bytes), in sorted order."""
  h = hashlib.sha256()
  for key in sorted(arrays):
    x = np.ascontiguousarray(arrays[key])
    h.update(f"{key}|{x.dtype.str}|{x.shape}|".encode())
    h.update(x.tobytes())
  return h.hexdigest()


def save_checkpoint(path, identity, done, state, arrays, seconds):
  """Writes the state's leaves, `arrays` and the run's identity atomically (temp, rename)."""
  arrays = dict(arrays)
  arrays.update({f"state_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(state))})
  arrays["done"] = np.asarray(done)
  meta = {"identity": identity, "seconds": seconds, "digest": digest(arrays)}
  tmp = path + ".tmp.npz"
  np.savez(tmp, meta=np.asarray(json.dumps(meta, sort_keys=True)), **arrays)
  os.replace(tmp, path)


def agent_identity(config: dict, name: str, record: dict) -> dict:
  """What determines one agent's numbers in a run: every argument but the list of the
  other agents, the agent's name, and the package versions."""
  return {**{k: v for k, v in config.items() if k != "agents"}, "agent": name,
          "versions": record["versions"]}


def load_checkpoint(path, identity, init_state, total, check_arrays):
  """`(done, state, arrays, seconds)` from `path`, verified against this run.

  Refuses with a `CheckpointError` naming the file: unreadable files, another run's
  checkpoint (naming the settings that differ), content that does not match its digest,
  an episode count outside (0, total], arrays that `check_arrays(arrays, done)` rejects
  (it returns the reason, or None), state that does not match this run's shapes or holds
  NaN or inf, or a state at another episode.
  """
  fix = "delete it, or run without --resume to start afresh"
  try:
    with np.load(path) as ck:
      arrays = {k: ck[k] for k in ck.files}
    meta = json.loads(str(arrays.pop("meta")))
  except Exception as e:  # pylint: disable=broad-except  (zip, pickle, EOF, JSON, key)
    raise CheckpointError(f"{path}: unreadable checkpoint ({type(e).__name__}: {e}); {fix}")
  saved = dict(meta.get("identity") or {})
  saved.pop("agents", None)  # checkpoints written before agent_identity carried the list
  if saved != identity:
    diff = sorted(k for k in set(saved) | set(identity) if saved.get(k) != identity.get(k))
    details = {k: (saved.get(k), identity.get(k)) for k in diff}
    raise CheckpointError(f"{path}: belongs to another run; differing settings (saved, now):"
                          f" {details}; {fix}")
  if digest(arrays) != meta.get("digest"):
    raise CheckpointError(f"{path}: content does not match its digest (edited or corrupted);"
                          f" {fix}")
  done = int(arrays["done"])
  if not 0 < done <= total:
    raise CheckpointError(f"{path}: records {done} episodes, outside (0, {total}]; {fix}")
  problem = check_arrays(arrays, done)
  if problem:
    raise CheckpointError(f"{path}: {problem}; {fix}")
  leaves, treedef = jax.tree.flatten(init_state)
  state_leaves = []
  for i, ref in enumerate(leaves):
    x = arrays.get(f"state_{i}")
    if x is None or x.shape != ref.shape or x.dtype != ref.dtype:
      raise CheckpointError(f"{path}: state leaf {i} does not match this run's state; {fix}")
    if np.issubdtype(x.dtype, np.floating) and not np.all(np.isfinite(x)):
      raise CheckpointError(f"{path}: state leaf {i} holds NaN or inf; {fix}")
    state_leaves.append(jnp.asarray(x))
  state = jax.tree.unflatten(treedef, state_leaves)
  if not np.all(np.asarray(state.episode) == done):
    raise CheckpointError(f"{path}: the state is at episode {np.unique(state.episode)}, the"
                          f" arrays at {done}; {fix}")
  return done, state, arrays, float(meta["seconds"])


def run_chunks(name, agent, cmdp, keys, state, *, done, total, chunk, max_chunks, seconds,
               consume, save):
  """Runs `agent` vmapped over `keys` from `state` (at episode `done`) to `total`, in
  jitted chunks of `chunk` episodes: after each, `consume(log, done_before)` takes the
  chunk's host log and `save(done, state, seconds)` checkpoints. Stops early after
  `max_chunks` chunks (None: never). Returns `(finished, seconds)`."""
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
    progress(name, done, total, started, keys.shape[0])
  sys.stdout.write("\n")
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
