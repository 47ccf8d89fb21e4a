"""Probe: the one-constraint search's extended DPs traced rolled (`horizon.rolled_scans`),
OptDual's as they are; then `experiments/episode_cost.py` with this script's arguments.

  python docs/results/episode_cost/table/probe_rolled_i1.py --problems media_streaming \\
      --bonus 0.01 --seeds 16 --agents optaug,optdual --late-after 0 --early 200
"""

import runpy
import sys

from optaug_jax._src import horizon
from optaug_jax._src.inner import dual_search

unrolled = dual_search._shifted_lmo


def rolled(problem, mu):
  with horizon.rolled_scans():
    return unrolled(problem, mu)


dual_search._shifted_lmo = rolled
sys.argv = ["episode_cost.py", *sys.argv[1:]]
runpy.run_path("experiments/episode_cost.py", run_name="__main__")
