"""Helpers shared by the experiment scripts: flags, agents from the registry, configs.

Every script that runs agents builds them with `make_agents` (from `oj.agents.AGENTS`),
takes step sizes with one flag convention (`parse_eta`: a positive float, or `paper` for
the paper's schedule), and records what determines its numbers with `run_config`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform

import jax
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
