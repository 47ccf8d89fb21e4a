"""Probe: every I >= 2 extended DP traced rolled (horizon.UNROLL_HORIZON = 1), OptDual's as it is."""
import runpy
import sys

from optaug_jax._src import horizon
from optaug_jax._src.inner import dual_search as cp

orig = cp._shifted_lmo


def rolled(problem, mu):
  saved = horizon.UNROLL_HORIZON
  horizon.UNROLL_HORIZON = 1
  try:
    return orig(problem, mu)
  finally:
    horizon.UNROLL_HORIZON = saved


cp._shifted_lmo = rolled
sys.argv = ["episode_cost.py", *sys.argv[1:]]
runpy.run_path("experiments/episode_cost.py", run_name="__main__")
