"""The headline result: OptAug against Lagrangian agents in long runs over many seeds.

The command line of `optaug_jax.experiment.headline` (its docstring, printed by `--help`, says
what the run does and writes; README.md, "Experiments", how to use it):

  python experiments/headline.py --help
"""

from optaug_jax.experiment import cli, headline

if __name__ == "__main__":
  cli.main_guard("headline", headline.main)
