"""The problem of a run: a registered benchmark with the size flags (`build_problem`), or your
own CMDP as `--benchmark MODULE:FUNCTION` / `path/to/file.py:FUNCTION` (`load_benchmark`);
and your own agents as `--agents path/to/file.py:FACTORY` (`load_agent`). Both are imported
by one loader (`load_function`), whose errors name the flag.

The function is called with no arguments and returns an `oj.benchmarks.Benchmark`, an
`oj.CMDP` (its baseline is then `oj.safest_policy`), or a tuple `(cmdp, safe_policy)`; the
baseline must be strictly feasible (`oj.check_safe_policy`). The spec and a digest of the
problem's arrays (`problem_digest`) are part of the run's settings, so --resume refuses
another function, or the same function returning another CMDP. A file's own directory (for
MODULE:FUNCTION, the current directory) is appended to `sys.path`, so that your module
imports its neighbours as it does when it runs as a script.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys

import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax._src.experiment import cli, result_files


def build_problem(args) -> oj.benchmarks.Benchmark:
  """The chosen benchmark (the random family takes the size flags, the gridworld
  `--grid-size`; `MODULE:FUNCTION` is `load_benchmark`'s). Raises `cli.UsageError` naming
  the flags for what the library refuses."""
  if is_benchmark_spec(args.benchmark):
    return load_benchmark(args.benchmark)
  kwargs, flags = {}, f"--benchmark {args.benchmark}"
  if args.benchmark == "random_family":
    kwargs = dict(
      seed=args.problem_seed,
      num_states=args.states,
      num_actions=args.actions,
      horizon=args.horizon,
      num_constraints=args.constraints,
    )
    flags += (
      f" --states {args.states} --actions {args.actions} --horizon {args.horizon}"
      f" --constraints {args.constraints} --problem-seed {args.problem_seed}"
    )
  if args.benchmark in oj.linear.PUBLISHED_CONSTANTS:  # Kitamura et al.'s: an instance
    kwargs = dict(seed=args.problem_seed)
    flags += f" --problem-seed {args.problem_seed}"
  if args.benchmark == "gridworld" and args.grid_size is not None:
    kwargs = dict(size=args.grid_size)
    flags += f" --grid-size {args.grid_size}"
  try:
    return oj.benchmarks.make_benchmark(args.benchmark, **kwargs)
  except ValueError as e:
    raise cli.UsageError(f"{flags}: the library refuses this problem ({e})") from e


# --benchmark MODULE:FUNCTION: your own CMDP.

BENCHMARK_FORMS = (
  "an oj.benchmarks.Benchmark, an oj.CMDP (its baseline: oj.safest_policy),"
  " or a tuple (cmdp, safe_policy)"
)


def is_benchmark_spec(text: str) -> bool:
  """`MODULE:FUNCTION` or `path/to/file.py:FUNCTION` (not a registered name)."""
  return text not in oj.benchmarks.BENCHMARKS and ":" in text


_LOADED: dict = {}  # spec -> function (a file is executed once per process)


def is_function_spec(text: str) -> bool:
  """`MODULE:FUNCTION` or `path/to/file.py:FUNCTION` (a registered name has no colon)."""
  return ":" in text


def benchmark_function(spec: str):
  """The function named by `spec` for `--benchmark` (`load_function`)."""
  return load_function(spec, "--benchmark")


def load_function(spec: str, flag: str):
  """The function named by `spec` (`MODULE:FUNCTION` or `path/to/file.py:FUNCTION`),
  imported but not called; `cli.UsageError` naming `flag` (`--benchmark`, `--agents`) when
  it cannot be. A file is executed once per process (as the module `_<flag>_<digest>`)."""
  if spec in _LOADED:
    return _LOADED[spec]
  where, _, name = spec.rpartition(":")
  fail = lambda why: cli.UsageError(f"{flag} {spec}: {why}")
  if not where or not name.isidentifier():
    raise fail("expected MODULE:FUNCTION or path/to/file.py:FUNCTION")
  if where.endswith(".py") or os.sep in where or "/" in where:
    path = os.path.abspath(where)
    if not os.path.isfile(path):
      raise fail(f"no file {where} (from {os.getcwd()})")
    module_name = f"_{flag.strip('-')}_" + hashlib.sha256(path.encode()).hexdigest()[:16]
    if os.path.dirname(path) not in sys.path:  # its own imports, as when run as a script
      sys.path.append(os.path.dirname(path))
    module = sys.modules.get(module_name)
    if module is None:
      loader_spec = importlib.util.spec_from_file_location(module_name, path)
      assert loader_spec is not None and loader_spec.loader is not None  # a .py file
      module = importlib.util.module_from_spec(loader_spec)
      sys.modules[module_name] = module
      try:
        loader_spec.loader.exec_module(module)
      except Exception as e:  # the user's module: any fault in it is reported in one line
        del sys.modules[module_name]
        raise fail(f"running {where} raised {type(e).__name__}: {e}") from e
  else:
    if os.getcwd() not in sys.path:  # a module in the current directory, as `python -m`
      sys.path.append(os.getcwd())
    try:
      module = importlib.import_module(where)
    except ModuleNotFoundError as e:
      if e.name and (where == e.name or where.startswith(e.name + ".")):
        raise fail(
          f"no module named {e.name} (looked in the current directory and on"
          " sys.path; give path/to/file.py:FUNCTION for a file)"
        ) from e
      raise fail(f"importing {where} raised {type(e).__name__}: {e}") from e
    except Exception as e:
      raise fail(f"importing {where} raised {type(e).__name__}: {e}") from e
  function = getattr(module, name, None)
  if function is None:
    defined = sorted(
      k
      for k, v in vars(module).items()
      if callable(v) and not k.startswith("_") and getattr(v, "__module__", None) == module.__name__
    )
    raise fail(f"{where} has no {name} (it defines: {', '.join(defined) or 'no functions'})")
  if not callable(function):
    raise fail(f"{where}.{name} is a {type(function).__name__}, not a function")
  _LOADED[spec] = function
  return function


def load_benchmark(spec: str) -> oj.benchmarks.Benchmark:
  """Your own CMDP: `FUNCTION()` of `spec` as a checked `Benchmark` in the run's float dtype
  (float32, or float64 with --x64). Accepts `BENCHMARK_FORMS`; refuses (`cli.UsageError`
  naming `--benchmark`) another return, a batch of CMDPs, a CMDP that `oj.validate_cmdp`
  refuses, and a baseline that is not strictly feasible or whose stated slack exceeds its
  true slack (`oj.check_safe_policy`)."""
  function = benchmark_function(spec)
  fail = lambda why: cli.UsageError(f"--benchmark {spec}: {why}")
  name = spec.rpartition(":")[2]
  try:
    value = function()
  except Exception as e:  # the user's function: any fault in it is reported in one line
    raise fail(f"{name}() raised {type(e).__name__}: {e} (it is called with no arguments)") from e
  cmdp, policy, slack, features = _unpacked(value, name, fail)
  dtype = jnp.zeros(()).dtype  # the run's: float32, float64 with --x64
  try:
    cmdp = oj.validate_cmdp(
      oj.CMDP(
        transitions=jnp.asarray(cmdp.transitions, dtype),
        cost=jnp.asarray(cmdp.cost, dtype),
        constraint_costs=jnp.asarray(cmdp.constraint_costs, dtype),
        thresholds=jnp.asarray(cmdp.thresholds, dtype),
        initial_state=jnp.asarray(cmdp.initial_state, jnp.int32),
        next_states=None if cmdp.next_states is None else jnp.asarray(cmdp.next_states, jnp.int32),
      )
    )
  except (ValueError, TypeError) as e:
    raise fail(f"invalid CMDP: {e}") from e
  policy, true_slack = _baseline(cmdp, policy, slack, dtype, fail)
  if features is not None:
    features = jnp.asarray(features, dtype)
    try:
      oj.linear.validate_linear_cmdp(oj.linear.LinearCMDP(cmdp, features))
    except ValueError as e:
      raise fail(f"its features: {e}") from e
  return oj.benchmarks.Benchmark(
    cmdp=cmdp,
    safe_policy=policy,
    slack=float(true_slack if slack is None else slack),
    features=features,
  )


def _unpacked(value, name: str, fail):
  """`(cmdp, policy, slack, features)` of what your function returned (`BENCHMARK_FORMS`),
  refused (`fail(why)`) when it is none of them or a batch of CMDPs."""
  slack = features = None
  if isinstance(value, oj.benchmarks.Benchmark):
    features = value.features
    cmdp, policy, slack = value.cmdp, value.safe_policy, value.slack
  elif isinstance(value, oj.CMDP):
    cmdp, policy = value, None
  elif (
    isinstance(value, tuple)
    and len(value) == 2
    and isinstance(value[0], oj.CMDP)
    and not isinstance(value[1], oj.CMDP)
  ):
    cmdp, policy = value
  else:
    raise fail(f"{name}() returned {type(value).__name__}; expected {BENCHMARK_FORMS}")
  if not isinstance(cmdp, oj.CMDP):
    raise fail(
      f"{name}() returned a Benchmark whose cmdp is a {type(cmdp).__name__}; expected an oj.CMDP"
    )
  if np.ndim(cmdp.cost) > 3:
    raise fail(
      f"{name}() returned a batch of CMDPs (cost of shape {np.shape(cmdp.cost)});"
      " expected one CMDP (cost [H, S, A])"
    )
  if np.ndim(cmdp.cost) < 3:
    raise fail(
      f"{name}() returned a CMDP whose cost has {np.ndim(cmdp.cost)} axes (shape"
      f" {np.shape(cmdp.cost)}); expected 3, [H, S, A] (one cost per step, state and action)"
    )
  return cmdp, policy, slack, features


def _baseline(cmdp, policy, slack, dtype, fail):
  """The baseline (the safest policy when none is given) and its true slack, refused
  (`fail(why)`) when it is not strictly feasible or no policy is."""
  try:
    safest = policy is None
    if safest:
      policy, _ = oj.safest_policy(cmdp)
    policy = jnp.asarray(policy, dtype)
    true_slack = oj.check_safe_policy(cmdp, policy, slack)
  except (ValueError, TypeError) as e:
    excess = oj.lp.least_excess(cmdp) if safest else None
    if excess is not None and excess >= -1e-9:  # no policy is strictly feasible
      raise fail(
        f"the thresholds {np.round(np.asarray(cmdp.thresholds), 6).tolist()} are"
        + (
          f" infeasible: the closest policy exceeds them by {excess:.6g}"
          if excess > 1e-9
          else " met by no policy with room to spare (the best slack is 0)"
        )
        + " in the worst constraint (oj.lp.least_excess); raise them by more than that"
        " (OptAug needs a strictly feasible baseline)"
      ) from e
    raise fail(f"no safe baseline: {e}") from e
  return policy, true_slack


def problem_digest(bench) -> str:
  """SHA-256 of the problem a run solves: the CMDP's arrays, the baseline and its slack
  (`result_files.digest`). Part of the run's settings: --resume refuses another problem
  behind the same --benchmark (a `MODULE:FUNCTION` whose body changed)."""
  cmdp = bench.cmdp
  arrays = {f: np.asarray(getattr(cmdp, f)) for f in cmdp._fields if getattr(cmdp, f) is not None}
  arrays["safe_policy"] = np.asarray(bench.safe_policy)
  arrays["slack"] = np.asarray(float(bench.slack))
  if bench.features is not None:  # a linear CMDP's (a tabular one's digest is unchanged)
    arrays["features"] = np.asarray(bench.features)
  return result_files.digest(arrays)


# --agents path/to/file.py:FACTORY: your own agent.

AGENT_KINDS = ("optaug", "dual")  # a factory's `agent_kind` attribute (default "optaug")

_USER_AGENTS: dict = {}  # label -> (spec, function, kind): agents registered from a spec


def user_agent_spec(name: str) -> str | None:
  """The `--agents` spec that registered agent `name` (None: a built-in agent)."""
  entry = _USER_AGENTS.get(name)
  return None if entry is None else entry[0]


def user_agent_kind(name: str) -> str | None:
  """The kind (`AGENT_KINDS`) of the agent registered from a spec as `name` (None: a
  built-in agent)."""
  entry = _USER_AGENTS.get(name)
  return None if entry is None else entry[2]


def agent_label(spec: str) -> str:
  """The label of an `--agents` entry: its name for a registered agent, else the label
  under which `load_agent` registers its factory."""
  return load_agent(spec) if is_function_spec(spec) else spec


def load_agent(spec: str) -> str:
  """Registers the agent factory named by `spec` (`MODULE:FACTORY` or
  `path/to/file.py:FACTORY`, imported by `load_function`) and returns its label: the
  factory's `label` attribute, else its `__name__`. The label is the agent's name in the
  registry, tables, figures and files.

  The factory is called as `FACTORY(num_episodes=K, **options)` and returns an
  `oj.agents.Agent`; it receives the baseline's `safe_policy` and `slack` when it accepts
  them (names them, or takes `**kwargs`), and the options of its kind (`agent_kind`
  attribute: "optaug", the default, or "dual"; `arguments.agent_options`). Refuses
  (`cli.UsageError` naming `--agents`) a factory that does not take `num_episodes`, an
  unknown kind, and a label that is a registered agent's name or another spec's label.
  Loading the same spec again returns its label."""
  function = load_function(spec, "--agents")
  fail = lambda why: cli.UsageError(f"--agents {spec}: {why}")
  label = getattr(function, "label", None) or getattr(function, "__name__", None)
  if not isinstance(label, str) or not label.isidentifier():
    raise fail(f"its label {label!r} is not a name; give the factory a `label` attribute")
  known = _USER_AGENTS.get(label)
  if known is not None:
    if known[1] is function:
      return label
    raise fail(
      f"its label {label!r} is already the label of --agents {known[0]}; give one of the"
      " factories another `label` attribute"
    )
  if label in oj.agents.AGENTS:
    raise fail(
      f"its label {label!r} is a registered agent's name; rename the factory or give it"
      " another `label` attribute"
    )
  kind = getattr(function, "agent_kind", "optaug")
  if kind not in AGENT_KINDS:
    raise fail(f"agent_kind {kind!r}: expected one of {', '.join(map(repr, AGENT_KINDS))}")
  try:
    parameters = inspect.signature(function).parameters.values()
  except (TypeError, ValueError) as e:
    raise fail(f"its signature cannot be read ({e})") from e
  any_option = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
  named = {
    p.name
    for p in parameters
    if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
  }
  if not any_option and "num_episodes" not in named:
    raise fail(f"{label} must take num_episodes (the run's K) as a keyword argument")
  wanted = tuple(k for k in ("safe_policy", "slack") if any_option or k in named)
  oj.agents.register_agent(
    label,
    problem_args=lambda b: {k: getattr(b, k) for k in wanted},
    summary=f"your own agent ({spec})",
  )(function)
  _USER_AGENTS[label] = (spec, function, kind)
  return label
