"""The run machinery of the experiment scripts, for your own scripts.

Modules (each documented in its own docstring):

- `runs`: agents from the registry (`make_agents`), chunked vmapped runs with progress
  and checkpoints (`run_chunks`, `run_agent`), the set-up the learning-run scripts share
  (`setup`, `started_agents`).
- `reductions`: what a run keeps of its episodes: every log (`FullLogs`), or running
  totals, log-spaced traces and the tail (`LongRun`: memory independent of the length).
- `arguments`: their shared command line (`build_parser`, `parse`, `check_args`).
- `problems`: a registered benchmark with the size flags, or your own CMDP as
  `--benchmark MODULE:FUNCTION` (`load_benchmark`, `problem_digest`).
- `figures`: the standard figure panels (mean curves with confidence bands, fits).
- `fits`: the fits of a cumulative regret `a + b sqrt(t) + c t` and their verdicts in words
  (after pre-training; "too short to tell" when the run is).
- `result_files`: atomic writes, result directories with their manifest (`ResultDir`,
  `load_results`), and the record of what determined a run's numbers (`run_config`).
- `checkpoints`: checkpoints that carry the run's identity and are verified when read
  (`save_checkpoint`, `load_checkpoint`).
- `processes`: runs over several processes and hosts (`jax.distributed`): the flags, the
  sharded chunk runner, writes from process 0.
- `cli`: the command-line conventions (step-size and agent flags, progress lines, exit
  statuses and one-line errors: `main_guard`).
- `numpy_reference`: one OptAug-CMDP episode step in NumPy, written apart from the JAX
  kernels (the benchmark's baseline and a cross-check in the tests).
- `headline`, `cancellation`: the two learning-run experiments themselves (`main(argv)`,
  `parse_args`, `summarise`, `plot`), whose command lines are `experiments/headline.py`
  and `experiments/cancellation.py`; `headline.main([])` is the README's main experiment.
- `outlook`: the outlook before a long run (`experiments/outlook.py`, over
  `oj.analysis.outlook`).
- `timing`, `phases`, `cost_table`: the benchmarks' measurement tools (medians after
  compilation, buffer sizes, the hardware record), op time by phase of the episode, and the
  episode-cost table's problems and agents (`experiments/episode_cost.py`, `perf/`).

    from optaug_jax.experiment import result_files, runs
"""

from optaug_jax._src.experiment import (
  arguments,
  cancellation,
  checkpoints,
  cli,
  cost_table,
  figures,
  fits,
  headline,
  numpy_reference,
  outlook,
  phases,
  problems,
  processes,
  reductions,
  result_files,
  runs,
  timing,
)

__all__ = (
  "arguments",
  "cancellation",
  "checkpoints",
  "cli",
  "cost_table",
  "figures",
  "fits",
  "headline",
  "numpy_reference",
  "outlook",
  "phases",
  "problems",
  "processes",
  "reductions",
  "result_files",
  "runs",
  "timing",
)
