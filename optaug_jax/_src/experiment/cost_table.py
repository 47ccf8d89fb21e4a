"""The episode-cost table's problems and agents, shared by `experiments/episode_cost.py`,
the perf scripts (`perf/seeds.py`, `perf/certificate_probe.py`) and
`experiments/compiled_programs.py`: each named problem's benchmark, setting and bonus
scale, the agents built as the table times them, and one jitted chunk of a vmapped run."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

import optaug_jax as oj
from optaug_jax._src.experiment import arguments as script_flags
from optaug_jax._src.experiment import cli, problems

RANDOM_I2 = {"num_states": 200, "num_actions": 4, "horizon": 10, "num_constraints": 2}
RANDOM_I5 = {"num_states": 100, "num_actions": 4, "horizon": 10, "num_constraints": 5}
PROBLEMS = {
  # name: (benchmark, its kwargs, setting, bonus scale)
  "media_streaming": ("media_streaming", {}, "paper", 0.1),
  "gridworld10_dense": ("gridworld", {"size": 10}, "bura2022", 1.0),
  "gridworld20_sparse": ("gridworld", {"size": 20}, "bura2022", 1.0),
  "queue": ("queue", {}, "bura2022", 1.0),
  "lost_sales": ("lost_sales", {}, "bura2022", 0.1),
  # A CMDP written as a user would (S = 216, a battery): `--benchmark MODULE:FUNCTION` form.
  "delivery": ("experiments/own_cmdp/delivery.py:delivery", {}, "bura2022", 0.1),
  # Several constraints (timed only when named: not in DEFAULT_PROBLEMS). A reservoir with a
  # flood and a drought budget (S = 200, A = 5, H = 30, 6 slots, both binding).
  "reservoir": ("experiments/own_cmdp/reservoir.py:reservoir", {}, "bura2022", 0.1),
  # random_family is dense (Dirichlet rows, no sparse layout): member 0 at mid size.
  "random_i2": ("random_family", RANDOM_I2, "bura2022", 1.0),
  "random_i5": ("random_family", RANDOM_I5, "bura2022", 1.0),
}
DEFAULT_PROBLEMS = tuple(PROBLEMS)[:6]  # the others only when named (minutes each)


def sizes(kwargs) -> str:
  """`S=200 A=4 H=10 I=2` of random_family's size arguments."""
  short = {"num_states": "S", "num_actions": "A", "horizon": "H", "num_constraints": "I"}
  return " ".join(f"{short[k]}={v}" for k, v in kwargs.items())


def entry(problem):
  """`(benchmark, kwargs, setting, bonus scale)` of a `--problems` entry: a named row of
  `PROBLEMS`, or one's own CMDP as `path.py:FUNCTION` / `MODULE:FUNCTION` (`--benchmark`),
  timed with the support-aware setting (`bura2022`) at bonus 1 unless `--bonus`."""
  return PROBLEMS.get(problem) or (problem, {}, "bura2022", 1.0)


def benchmark(name, kwargs):
  """A registered benchmark, or a user's `path.py:FUNCTION` (as the scripts' --benchmark)."""
  if ":" in name:
    return problems.load_benchmark(name)
  return oj.benchmarks.make_benchmark(name, **kwargs)


AGENTS = ("optaug", "optaug_cold", "optdual")  # optaug_cold: optaug(warm_start=False)


def agents(bench, setting, bonus, episodes, pretrain, eta, names, inner_tol, warm_cuts=False):
  """`{name: agent}` of `names` as the table times them: OptAug (constant `eta`, the exact
  inner solve at `inner_tol`, `pretrain` episodes of the baseline; `optaug_cold` without
  the warm start), OptDual (the paper's step), or your own agent by its kind."""
  common = dict(setting=setting, bonus_scale=bonus)
  inner = oj.inner.exact(tol=inner_tol, warm_cuts=warm_cuts)
  optaug = functools.partial(
    oj.agents.make_agent,
    "optaug",
    bench,
    num_episodes=episodes,
    pretrain_episodes=pretrain,
    eta=eta,
    inner=inner,
    **common,
  )
  make: dict[str, Callable[[], Any]] = {
    "optaug": optaug,
    "optaug_cold": functools.partial(optaug, warm_start=False),
    "optdual": lambda: oj.agents.make_agent("optdual", bench, num_episodes=episodes, **common),
  }
  for name in names:
    if name not in make:  # your own agent (--agents path/to/file.py:FACTORY): by its kind
      make[name] = functools.partial(own_agent, name, bench, episodes, pretrain, eta, inner, common)
  return {name: make[name]() for name in names}


def own_agent(name, bench, episodes, pretrain, eta, inner, common):
  """Your own agent `name` (registered from its `--agents` spec), given what the built-in
  agent of its kind gets here (`arguments.AGENT_RULE`): OptAug's kind --eta,
  pretrain_episodes and the inner solver, OptDual's kind neither (optdual takes the paper's
  step here); both the setting and the bonus scale."""
  options = dict(common)
  if script_flags.agent_kind(name) == "optaug":
    options.update(eta=eta, pretrain_episodes=pretrain, inner=inner)
  takes = lambda k: oj.agents.accepts_any_option(name) or k in oj.agents.agent_options(name)
  options = {k: v for k, v in options.items() if takes(k)}
  spec = problems.user_agent_spec(name)
  try:
    return oj.agents.make_agent(name, bench, num_episodes=episodes, **options)
  except Exception as e:  # your factory: any fault in it is reported in one line
    raise cli.UsageError(f"--agents {spec}: {name}(...) raised {type(e).__name__}: {e}") from e


def chunk(agent, cmdp, n, batch_size=None):
  # The CMDP is an argument, not a closed-over constant: XLA would constant-fold through
  # its arrays (minutes of compilation at S = 100 or more). `batch_size`: `run_sharded`'s
  # `lax.map` over vmapped batches of that many seeds (the same numbers, bit for bit).
  if batch_size:
    run_sharded = functools.partial(oj.run_sharded, agent, num_episodes=n, batch_size=batch_size)
    return lambda keys, state: run_sharded(keys, cmdp, state=state)
  run = lambda key, state, model: oj.run(agent, key, model, num_episodes=n, state=state)
  fn = jax.jit(jax.vmap(run, in_axes=(0, 0, None)))
  return lambda keys, state: fn(keys, state, cmdp)


def keys(seeds, stage):
  base = jax.random.split(jax.random.PRNGKey(0), seeds)
  return jax.vmap(lambda k: jax.random.fold_in(k, stage))(base)
