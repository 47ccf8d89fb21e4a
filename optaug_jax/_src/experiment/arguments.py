"""The command line that the learning-run scripts share (`headline.py`, `cancellation.py`):
the parser (`build_parser`), the flags checked against each other before any work
(`parse`, `check_args`: argparse's usage and one line naming the flags, exit status 2),
the setting-dependent defaults (`resolve_defaults`), and the flags as agent options
(`agent_options`) and as a figure title (`run_title`)."""

from __future__ import annotations

import argparse
import os

import numpy as np

import optaug_jax as oj
from optaug_jax._src.experiment import agent_flags, benchmark_flags, cli, problems, processes

# Re-exported (the scripts' names for them).
AGENT_RULE = agent_flags.AGENT_RULE
RANDOM_FAMILY_FLAGS = benchmark_flags.RANDOM_FAMILY_FLAGS
LP_AGENTS = benchmark_flags.LP_AGENTS
agent_kind = agent_flags.agent_kind
agent_options = agent_flags.agent_options
options_line = agent_flags.options_line
resolved_agent_options = agent_flags.resolved_agent_options

# --bonus-scale when not given (cancellation.py): 0.1 in the paper's setting, the tuned bonus
# of its recorded media_streaming and random-family runs (docs/results/ms64, rand64); the
# published radii (1.0) in Bura et al.'s. headline.py sets 1.0 in both (the paper's radii).
DEFAULT_BONUS_SCALE = {"paper": 0.1, "bura2022": 1.0}


def run_title(args) -> str:
  """A figure's identity line: problem, setting, radii, seeds and episodes (a CMDP of
  one's own by its file's name and function, not the path it was given by)."""
  where, _, function = args.benchmark.rpartition(":")
  benchmark = f"{os.path.basename(where)}:{function}" if where else args.benchmark
  problem = benchmark + (
    f" {args.grid_size}x{args.grid_size}"
    if args.benchmark == "gridworld" and args.grid_size
    else ""
  )
  return (
    f"{problem}, {args.setting} setting (bonus scale {args.bonus_scale:g}),"
    f" {args.seeds} seeds x {args.episodes} episodes"
  )


BENCHMARK_HELP = (
  "the CMDP: a registered name ({names}), or your own as MODULE:FUNCTION or"
  " path/to/file.py:FUNCTION (a module in the current directory or on sys.path, or a"
  " file): FUNCTION() is called with no arguments and returns "
  + problems.BENCHMARK_FORMS
  + "; its arrays are converted to float32 (float64 with --x64) and checked, and its"
  " baseline must be strictly feasible (oj.check_safe_policy). The spec and a digest of"
  " the problem's arrays are part of the run's settings: --resume refuses another"
  " function, or a changed one"
)


def build_parser(description: str, prog: str | None = None) -> argparse.ArgumentParser:
  """The flags of the experiment (shared with `headline.py`, which changes defaults);
  `prog`: the script's name in usage and errors (default: how it was started)."""
  p = cli.ArgumentParser(prog=prog, description=description, formatter_class=cli.HelpFormatter)
  _run_flags(p)
  _setting_flags(p)
  _agent_option_flags(p)
  benchmark_flags.add_flags(p)
  return p


def _run_flags(p: argparse.ArgumentParser) -> None:
  """What runs and where its files go: the benchmark, the agents, seeds, episodes, chunks."""
  p.add_argument(
    "--benchmark",
    default="media_streaming",
    type=cli.benchmark_name,
    metavar="NAME|MODULE:FUNCTION",
    help=BENCHMARK_HELP.format(names=", ".join(sorted(oj.benchmarks.BENCHMARKS))),
  )
  p.add_argument(
    "--agents",
    default="optaug,optdual,optprimaldual",
    type=cli.agent_list,
    metavar="NAME|FILE.py:FACTORY|MODULE:FACTORY,...",
    help="comma-separated agents: registered names ("
    + ", ".join(sorted(n for n in oj.agents.AGENTS if problems.user_agent_spec(n) is None))
    + "; optcmdp is slow: one HiGHS LP per seed and episode, sequential), or your own"
    " factories as path/to/file.py:FACTORY or MODULE:FACTORY (loaded as --benchmark's"
    " function; registered under the factory's `label` attribute or its __name__, which"
    " tables, figures and files show; FACTORY(num_episodes=K, **options) returns an"
    " oj.agents.Agent). " + AGENT_RULE,
  )
  p.add_argument(
    "--seeds", type=cli.positive_int, default=32, help="independent runs per agent (vmapped)"
  )
  p.add_argument("--episodes", type=cli.positive_int, default=3000, help="episodes per run (K)")
  p.add_argument(
    "--chunk",
    type=cli.positive_int,
    default=250,
    help="episodes per jitted chunk (a checkpoint after each; more than --episodes: one chunk)",
  )
  p.add_argument(
    "--out",
    default="results/cancellation",
    help="the run's directory (DIR): one run's files and manifest.json; a fresh"
    " run of other settings removes the previous run's outputs first; a"
    " directory of another script is refused",
  )
  p.add_argument(
    "--resume",
    action="store_true",
    help="continue from DIR's checkpoints (same settings only; a refused resume"
    " leaves DIR as it was). Ctrl-C stops a run after its last checkpoint"
    " and prints the command that continues it",
  )
  p.add_argument(
    "--max-chunks",
    type=cli.positive_int,
    default=None,
    help="stop each agent after this many chunks (simulates an interruption);"
    " default: run to the end",
  )
  p.add_argument("--seed", type=cli.seed, default=0, help="seed of the episode keys")


def _setting_flags(p: argparse.ArgumentParser) -> None:
  """What the agents know: the setting, delta, the bonus, the pre-training."""
  p.add_argument(
    "--setting",
    default="paper",
    choices=oj.SETTINGS,
    help="what the agents know and their confidence convention: 'paper' (learned"
    " costs, counts per step, all next states possible, log(6SAHK/delta),"
    " delta 0.1) or 'bura2022' (Bura et al. 2022's experiments: known costs"
    " and next-state support, counts pooled over steps, log(6S^2HK/delta),"
    " delta 0.01)",
  )
  p.add_argument(
    "--delta",
    type=cli.open_unit_float,
    default=None,
    help="confidence parameter, 0 < delta < 1; default: the setting's (0.1 paper, 0.01 bura2022)",
  )
  p.add_argument(
    "--bonus-scale",
    type=cli.non_negative_float,
    default=None,
    help="multiplier of every confidence radius (0: no optimism, the empirical"
    " model where visited); default: 0.1 in the paper setting (the tuned"
    " bonus of this script's recorded media_streaming and random-family"
    " runs, docs/results/ms64 and rand64), 1.0 (the published radii) in"
    " bura2022. headline.py's default differs: 1.0 in both settings",
  )
  p.add_argument(
    "--pretrain",
    type=cli.non_negative_int,
    default=300,
    help="OptAug's pre-training episodes K' (its safe baseline), at most --episodes",
  )


def _agent_option_flags(p: argparse.ArgumentParser) -> None:
  """The agents' options (OptAug's eta and inner solver, OptDual's step, the rest by
  kind), float64 and processes."""
  p.add_argument(
    "--eta",
    default=100.0,
    type=cli.parse_eta,
    help="OptAug's eta: a positive float or 'paper' (the paper's schedule, which needs --x64)",
  )
  p.add_argument(
    "--nu", type=cli.open_unit_float, default=0.5, help="nu of the paper's eta schedule, 0 < nu < 1"
  )
  p.add_argument(
    "--fw-iters",
    type=cli.positive_int,
    default=50,
    help="Frank-Wolfe steps (with --inner frank_wolfe)",
  )
  p.add_argument(
    "--step-rule",
    default="linesearch",
    choices=oj.inner.STEP_RULES,
    help="Frank-Wolfe's step (with --inner frank_wolfe)",
  )
  p.add_argument(
    "--inner",
    default="exact",
    choices=("exact", "frank_wolfe"),
    help="OptAug's inner solver: oj.inner.exact() or the paper's Frank-Wolfe"
    " (oj.inner.frank_wolfe, --fw-iters steps of --step-rule)",
  )
  p.add_argument(
    "--unreached",
    default="greedy",
    choices=oj.inner.UNREACHED,
    help="OptAug's policy where its inner solution's occupancy is 0: the"
    " extended DP's action on the gradient there ('greedy'), or uniform"
    " (what the runs in docs/results before the greedy default used: CHANGELOG)",
  )
  p.add_argument(
    "--dual-eta",
    default=None,
    type=cli.parse_eta,
    help="the step of OptDual and its variants ("
    + ", ".join(agent_flags.DUAL_AGENTS[1:])
    + "): a positive float or 'paper'; default: 'paper'",
  )
  agent_flags.add_flags(p)
  p.add_argument("--x64", action="store_true", help="float64 (needed for --eta paper)")
  processes.add_flags(p)


_UNSET = object()


def given_flags(parser, argv=None) -> frozenset:
  """The destinations of the options given on the command line (not left at a default):
  `argv` parsed again into a namespace that already holds a marker for each option
  (argparse fills only the attributes a namespace lacks)."""
  probe = argparse.Namespace(
    **{a.dest: _UNSET for a in parser._actions if a.dest != argparse.SUPPRESS}
  )
  parser.parse_known_args(argv, probe)
  return frozenset(k for k, v in vars(probe).items() if v is not _UNSET)


def parse(parser, argv=None):
  """`(args, given)`: the parsed flags, checked together (`check_args`), and the options
  given on the command line (`given_flags`)."""
  args = parser.parse_args(argv)
  given = given_flags(parser, argv)
  return check_args(parser, args, given), given


def check_args(parser, args, given=frozenset()):
  """Refuses, before any work, flags that cannot work together or that this run would
  ignore (argparse's error: usage and one line naming the flags, exit status 2). `given`:
  the options given on the command line (`given_flags`); a flag left at its default is
  never refused for being irrelevant."""
  processes.check_args(parser, args)
  check_agents(parser, args, given)
  linear = [a for a in args.agents if a in agent_flags.LINEAR_AGENTS]
  for dest, value, kind in (("eta", args.eta, "optaug"), ("dual_eta", args.dual_eta, "dual")):
    if value is None and (takers := [a for a in linear if agent_kind(a) == kind]):
      flag = "--" + dest.replace("_", "-")
      parser.error(
        f"{flag} paper{'' if dest in given else ' (its default)'}: {','.join(takers)}"
        f" take{'s' * (len(takers) == 1)} a constant step; give {flag} 1 (Kitamura et al.'s)"
      )
  if args.eta is None and not args.x64:
    parser.error(
      "--eta paper: the paper's schedule reaches eta = 1e7 and more, which"
      " float32 does not resolve; add --x64, or give a constant eta (e.g."
      " --eta 100)"
    )
  if args.episodes > MAX_EPISODES:
    parser.error(f"--episodes {args.episodes}: at most {MAX_EPISODES} (episode counters are int32)")
  tiny = float(np.finfo(np.float32).tiny)
  if args.delta is not None and args.delta < tiny:
    parser.error(
      f"--delta {args.delta:g}: below float32's smallest normal number"
      f" ({tiny:.3g}), where the confidence radii are computed; give a larger"
      " --delta"
    )
  if set(args.agents) & set(agent_flags.OPTAUG_AGENTS) and args.pretrain > args.episodes:
    default = "" if "pretrain" in given else " (its default)"
    parser.error(
      f"--pretrain {args.pretrain}{default} must be at most --episodes"
      f" {args.episodes}: OptAug plays its safe baseline for the first --pretrain"
      f" episodes of its run; give --pretrain {args.episodes // 10} (a tenth of"
      " the run) or fewer, or more --episodes"
    )
  benchmark_flags.check(parser, args, given)
  return args


def check_agents(parser, args, given=frozenset()):
  """Loads and registers your own agents of `--agents` (`problems.load_agent`), replacing
  each spec in `args.agents` by its label (`args.agent_specs`: label -> spec), and refuses
  a flag given on the command line that no listed agent takes (`AGENT_RULE`). The
  failures are argparse's error naming the flag."""
  specs, labels = {}, []
  for name in args.agents:
    try:
      label = problems.agent_label(name)
    except cli.UsageError as e:
      parser.error(str(e))
    if label != name:
      specs[label] = name
    labels.append(label)
  twice = sorted({n for n in labels if labels.count(n) > 1})
  if twice:
    parser.error(f"--agents {','.join(args.agents)}: {', '.join(twice)} listed more than once")
  args.agents, args.agent_specs = labels, specs
  for dest, (option, kind) in agent_flags.AGENT_FLAGS.items():
    if dest not in given or dest == "setting" or agent_flags.flag_takers(args, dest):
      continue  # --setting also describes the run (the declared support it checks)
    flag = "--" + dest.replace("_", "-")
    value = getattr(args, dest)
    value = cli.eta_flag(value) if dest in ("eta", "dual_eta") else value
    who = {
      None: "",
      "optaug": " (it reaches the agents of OptAug's kind)",
      "dual": " (it reaches the agents of OptDual's kind: agent_kind = 'dual')",
    }
    parser.error(
      f"{flag} {value}: none of --agents {','.join(args.agents)} takes it{who[kind]};"
      f" drop {flag}, or list an agent that accepts {option}"
    )


MAX_EPISODES = 2**31 - 1  # the library's episode counters (oj numerics.MAX_EPISODES)


def resolve_defaults(args):
  """Fills the setting-dependent defaults (`--delta`, `--bonus-scale`) in place."""
  if args.bonus_scale is None:
    args.bonus_scale = DEFAULT_BONUS_SCALE[args.setting]
  if args.delta is None:
    args.delta = oj.Setting(log_factor=args.setting).resolved_delta
  return args
