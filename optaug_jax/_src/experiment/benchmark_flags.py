"""The flags that describe a benchmark's size or instance (`--states`, ..., `--grid-size`):
declared (`add_flags`) and refused where this run's benchmark does not take them
(`check`). `arguments` builds and checks the rest."""

from __future__ import annotations

import argparse

import optaug_jax as oj
from optaug_jax._src.experiment import cli, problems

RANDOM_FAMILY_FLAGS = {
  "states": "--states",
  "actions": "--actions",
  "horizon": "--horizon",
  "constraints": "--constraints",
  "problem_seed": "--problem-seed",
}
LP_AGENTS = ("optcmdp", "dope", "optpess_lp")  # dense LPs: no sparse support (bura2022)


def add_flags(p: argparse.ArgumentParser) -> None:
  """The sizes and instances of the benchmarks that take them."""
  # random benchmark
  for flag, default, symbol in (
    ("--states", 10, "S"),
    ("--actions", 4, "A"),
    ("--horizon", 10, "H"),
    ("--constraints", 1, "I"),
  ):
    p.add_argument(
      flag,
      type=cli.positive_int,
      default=default,
      help=f"{symbol} of --benchmark random_family (only)"
      + (", at least 2" if symbol == "A" else ""),
    )
  p.add_argument(
    "--problem-seed",
    type=cli.seed,
    default=0,
    help="the instance of --benchmark random_family or kitamura_* (only)",
  )
  p.add_argument(
    "--grid-size",
    type=cli.positive_int,
    default=None,
    help="side of --benchmark gridworld (only), at least 3 (default 5; sparse"
    " layout above 10: with --setting bura2022 the agents count in its 5"
    " slots per row)",
  )


def check(parser, args, given) -> None:
  """Refuses (argparse's error) the flags of another benchmark than this run's, and sizes
  that benchmark cannot take (`arguments.check_args`' part on the benchmark)."""
  benchmark = args.benchmark
  if benchmark != "random_family":
    seeded = benchmark in oj.linear.PUBLISHED_CONSTANTS  # Kitamura et al.'s: --problem-seed
    extra = [
      flag
      for dest, flag in RANDOM_FAMILY_FLAGS.items()
      if dest in given and not (seeded and dest == "problem_seed")
    ]
    if extra:
      them = " ".join(extra)
      parser.error(
        f"{them}: {'these flags describe' if len(extra) > 1 else 'it describes'}"
        f" --benchmark random_family only, and this run's is --benchmark"
        f" {benchmark}; drop {them}, or choose --benchmark random_family"
      )
  elif args.actions < 2:
    parser.error(
      f"--actions {args.actions}: --benchmark random_family needs at least 2"
      " actions (with one, the thresholds equal the only policy's values: no"
      " strictly feasible baseline)"
    )
  if benchmark != "gridworld" and "grid_size" in given:
    parser.error(
      f"--grid-size {args.grid_size}: it describes --benchmark gridworld only, and"
      f" this run's is --benchmark {benchmark}; drop --grid-size, or choose"
      " --benchmark gridworld"
    )
  lp_agents = [a for a in args.agents if a in LP_AGENTS]
  if (
    benchmark == "gridworld"
    and (args.grid_size or 5) > 10
    and args.setting == "bura2022"
    and lp_agents
  ):
    parser.error(
      f"--agents {','.join(lp_agents)} with --setting bura2022 and --grid-size"
      f" {args.grid_size}: the gridworld above size 10 has the sparse layout, whose"
      " support these agents' LPs (H*S*A*S' variables) cannot take; choose"
      " --grid-size 10 or less, --setting paper, or other --agents"
    )
  if benchmark == "gridworld" and args.grid_size is not None and args.grid_size < 3:
    parser.error(
      f"--grid-size {args.grid_size}: the gridworld needs a side of at least 3"
      " (its hazards leave the start and the goal free only from size 3)"
    )
  if problems.is_benchmark_spec(benchmark):
    try:
      problems.benchmark_function(benchmark)
    except cli.UsageError as e:
      parser.error(str(e))
