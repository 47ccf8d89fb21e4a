"""The outlook before a long run: whether, and when, OptAug separates from a Lagrangian agent.

The command line of `optaug_jax.experiment.outlook` (its docstring, printed by `--help`, says
what it measures and writes; README.md, "Your own CMDP", how to use it):

  python experiments/outlook.py --help
"""

from optaug_jax.experiment import cli, outlook

if __name__ == "__main__":
  cli.main_guard("outlook", outlook.main)
