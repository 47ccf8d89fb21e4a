"""What the scripts give each agent (`AGENT_RULE`): the flags as agent options
(`agent_options`), the kind of an agent (`agent_kind`), the agents a flag reaches
(`flag_takers`), and each agent's resolved options as printed and written
(`resolved_agent_options`, `options_line`). `arguments` re-exports them."""

from __future__ import annotations

import numpy as np

import optaug_jax as oj
from optaug_jax._src.experiment import problems

# OptDual, its multiplier-update variants and OptDual on linear CMDPs: `--dual-eta` is
# their step.
DUAL_AGENTS = (
  "optdual",
  "optdual_optimistic",
  "pid_lagrangian",
  "nupi_lagrangian",
  "optdual_linear",
)
# OptAug and OptAug on linear CMDPs: `--eta` is their step, `--pretrain` their K'.
OPTAUG_AGENTS = ("optaug", "optaug_linear")
# The agents of `oj.linear` (they take `--temperature` and `--linear-bonus`, a constant eta).
LINEAR_AGENTS = ("optaug_linear", "optdual_linear", "opse", "ghosh_softmax")


AGENT_RULE = (
  "What an agent receives: every option the scripts give a built-in agent of its kind"
  " reaches your agent when its factory accepts it (names it, or takes **kwargs). A"
  " factory is of OptAug's kind (--eta as eta, --pretrain as pretrain_episodes, --inner"
  " with --fw-iters and --step-rule as inner) unless it has the attribute agent_kind ="
  ' "dual" (--dual-eta as eta, like optdual). Every agent that accepts them gets the'
  " shared options: setting, delta, bonus_scale, nu, unreached, num_episodes, and the"
  " baseline's safe_policy and slack. A flag given on the command line that no listed"
  " agent takes is refused; each agent's resolved options are printed at the start and"
  " written to the run's summary"
)

# The flags that reach agents: destination -> (the option, the kind of agent it reaches:
# "optaug", "dual", or None for every agent that accepts the option).
AGENT_FLAGS = {
  "eta": ("eta", "optaug"),
  "dual_eta": ("eta", "dual"),
  "pretrain": ("pretrain_episodes", "optaug"),
  "inner": ("inner", "optaug"),
  "fw_iters": ("inner", "optaug"),
  "step_rule": ("inner", "optaug"),
  "setting": ("setting", None),
  "delta": ("delta", None),
  "bonus_scale": ("bonus_scale", None),
  "nu": ("nu", None),
  "unreached": ("unreached", None),
  "temperature": ("temperature", None),
  "linear_bonus": ("cost_bonus", None),
}


def add_flags(p) -> None:
  """The flags of the linear agents (`oj.linear`)."""
  p.add_argument(
    "--temperature",
    type=float,
    default=None,
    help="the softmax temperature tau of the linear agents (optaug_linear, optdual_linear,"
    " opse, ghosh_softmax); default: Kitamura et al.'s for their benchmarks"
    " (oj.linear.PUBLISHED_CONSTANTS), else the agents' (0.1)",
  )
  p.add_argument(
    "--linear-bonus",
    type=float,
    default=None,
    help="the linear agents' bonus scale C, for each of their bonuses (0: no optimism);"
    " default: Kitamura et al.'s for their benchmarks, else the agents' (1.0)",
  )


def _linear_options(args) -> dict:
  """`{option: {agent: value}}` of `--temperature` and `--linear-bonus` (their defaults:
  the published constants of the benchmark, if any)."""
  scale, tau = oj.linear.PUBLISHED_CONSTANTS.get(args.benchmark, (None, None))
  tau = args.temperature if args.temperature is not None else tau
  scale = args.linear_bonus if args.linear_bonus is not None else scale
  out: dict = {}
  for name in args.agents:
    wanted = {"temperature": tau}
    wanted.update(dict.fromkeys(("cost_bonus", "constraint_bonus", "compensation_bonus"), scale))
    for option, value in wanted.items():
      if value is not None and _accepts(name, option):
        out.setdefault(option, {})[name] = value
  return out


def agent_kind(name: str) -> str | None:
  """`"optaug"` (OptAug, and your own agents unless they say otherwise), `"dual"` (OptDual
  and its variants, your own with `agent_kind = "dual"`), or None (the other built-ins:
  they take the shared options only)."""
  if name in OPTAUG_AGENTS:
    return "optaug"
  if name in DUAL_AGENTS:
    return "dual"
  return problems.user_agent_kind(name)


def _accepts(name: str, option: str) -> bool:
  return oj.agents.accepts_any_option(name) or option in oj.agents.agent_options(name)


def flag_takers(args, dest: str) -> list[str]:
  """The agents of `args.agents` that the flag `dest` (a key of `AGENT_FLAGS`) reaches."""
  option, kind = AGENT_FLAGS[dest]
  return [
    name
    for name in args.agents
    if (kind is None or agent_kind(name) == kind) and _accepts(name, option)
  ]


def agent_options(args) -> dict:
  """The flags as agent options for `oj.agents.make_agents` (`AGENT_RULE`): the options of
  a kind per agent, the shared ones for every agent that accepts them. Your own agents
  (registered from `--agents` specs: `problems.load_agent`) must be in `args.agents`."""
  inner = (
    oj.inner.exact()
    if args.inner == "exact"
    else oj.inner.frank_wolfe(num_iters=args.fw_iters, step_rule=args.step_rule)
  )
  names = list(args.agents)
  eta = {name: args.dual_eta for name in DUAL_AGENTS}
  eta.update(dict.fromkeys(OPTAUG_AGENTS, args.eta))
  pretrain = dict.fromkeys(OPTAUG_AGENTS, args.pretrain)
  inners = {"optaug": inner}
  for name in names:
    if problems.user_agent_kind(name) is None:
      continue  # a built-in agent: as above
    kind = agent_kind(name)
    if _accepts(name, "eta"):
      eta[name] = args.eta if kind == "optaug" else args.dual_eta
    if kind == "optaug" and _accepts(name, "pretrain_episodes"):
      pretrain[name] = args.pretrain
    if kind == "optaug" and _accepts(name, "inner"):
      inners[name] = inner
  return {
    "setting": args.setting,
    "delta": args.delta,
    "bonus_scale": args.bonus_scale,
    "pretrain_episodes": pretrain,
    "nu": args.nu,
    "inner": inners,
    "unreached": args.unreached,
    "eta": eta,
    **_linear_options(args),
  }


def _describe(value):
  """An option's value as JSON (and as text: `resolved_agent_options`)."""
  if hasattr(value, "item") and np.ndim(value) == 0:  # a NumPy or JAX scalar
    value = value.item()
  if isinstance(value, float):
    return float(f"{value:.6g}")  # the float32 slack 2.4000000953674316 as 2.4
  if value is None or isinstance(value, (bool, int, str)):
    return value
  if hasattr(value, "shape"):
    return f"array{tuple(np.shape(value))}"
  return type(value).__name__ if not hasattr(value, "_asdict") else repr(value)


def _describe_problem_arg(bench, key, value):
  if key == "safe_policy":
    return "the benchmark's"
  if key == "model":  # a linear agent's: the benchmark's features or one-hot ones
    features = "one-hot" if getattr(bench, "features", None) is None else "the benchmark's"
    return f"LinearCMDP({features} features, d={value.num_features})"
  return _describe(value)


def _describe_inner(args) -> str:
  if args.inner == "exact":
    return "exact"
  return f"frank_wolfe(num_iters={args.fw_iters}, step_rule={args.step_rule})"


def resolved_agent_options(args, bench=None) -> dict:
  """`{agent: {option: value}}`: what each agent of `args.agents` receives from the flags
  (after `resolve_defaults`) and, with `bench`, from the problem (`slack`, `safe_policy`),
  as JSON values (eta None: "paper"; the inner solver by its flags)."""
  options = agent_options(args)
  out = {}
  for name in args.agents:
    mine = {"num_episodes": args.episodes}
    if bench is not None:
      for key, value in oj.agents.AGENTS[name].problem_args(bench).items():
        if _accepts(name, key):
          mine[key] = _describe_problem_arg(bench, key, value)
    for key, value in options.items():
      if isinstance(value, dict):
        if name not in value:
          continue
        value = value[name]
      elif not _accepts(name, key):
        continue
      if key == "eta":
        mine[key] = "paper" if value is None else float(value)
      elif key == "inner":
        mine[key] = _describe_inner(args)
      else:
        mine[key] = _describe(value)
    out[name] = mine
  return out


def options_line(name: str, options: dict) -> str:
  """`name: option=value, ...` (the line printed per agent at the start of a run)."""
  return f"{name}: " + ", ".join(f"{k}={v}" for k, v in options.items())
