"""Learning runs of every agent, each episode's values kept: the regrets and their cancellation.

The command line of `optaug_jax.experiment.cancellation` (its docstring, printed by `--help`, says
what the run does and writes; README.md, "Experiments", how to use it):

  python experiments/cancellation.py --help
"""

from optaug_jax.experiment import cancellation, cli

if __name__ == "__main__":
  cli.main_guard("cancellation", cancellation.main)
