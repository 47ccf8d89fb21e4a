"""Runs of the experiment scripts over several processes and hosts (`jax.distributed`).

Launched once per process with the same flags, plus `--coordinator HOST:PORT
--num-processes N --process-id I` (the names of `jax.distributed.initialize`'s arguments;
under SLURM or an MPI launcher give `--distributed` alone and JAX finds them itself), a
script joins the processes before any JAX work, runs its seeds with `oj.run_sharded` over
every device of every process (`--batch-size` seeds at a time on each device), gathers
each chunk's logs and states on every process (`process_allgather`) and writes its files
and checkpoints from process 0 only. Every process reads the checkpoints of a `--resume`
(a shared file system, as on any cluster).

Same numbers, whatever the processes: with one `--batch-size`, every device runs the same
program on `--batch-size` seeds at a time, so a run over N processes writes the files of
the same command on one process, bit for bit (timings aside); `tests/test_processes.py`
checks two processes on 127.0.0.1 against one. One process with `--batch-size auto` (the
default) runs all its seeds in one `vmap` on the device where the compiled program fits
`--memory-budget`, else the largest power of two of them at a time that does, and on CPU
at most 16 at a time (`oj.run_sharded(batch_size="auto")`, `memory.CPU_BATCH`).
"""

from __future__ import annotations

import argparse

import jax
import numpy as np
from jax.experimental import multihost_utils

import optaug_jax as oj
from optaug_jax._src.experiment import cli

FLAGS = ("coordinator", "num_processes", "process_id", "distributed", "memory_budget")


def add_flags(parser: argparse.ArgumentParser) -> None:
  """`--coordinator`, `--num-processes`, `--process-id`, `--distributed`, `--batch-size`."""
  g = parser.add_argument_group(
    "several processes and hosts (jax.distributed; launch once per process, same flags)"
  )
  g.add_argument(
    "--coordinator",
    metavar="HOST:PORT",
    type=address,
    default=None,
    help="address of process 0's coordinator service (every process gives the same)",
  )
  g.add_argument(
    "--num-processes", type=cli.positive_int, default=None, help="number of processes of the run"
  )
  g.add_argument(
    "--process-id",
    type=cli.non_negative_int,
    default=None,
    help="this process's index, 0 to --num-processes - 1 (0 writes the files)",
  )
  g.add_argument(
    "--distributed",
    action="store_true",
    help="join a run of several processes whose launcher (SLURM, Open MPI)"
    " jax.distributed.initialize() reads itself; implied by the three"
    " flags above",
  )
  g.add_argument(
    "--batch-size",
    type=batch_size,
    default="auto",
    help="seeds run at a time on each device (oj.run_sharded's batch_size);"
    " the same value gives the same numbers on any number of processes"
    " and devices (default: auto, every seed of a device at once where the"
    " compiled program fits --memory-budget, else the largest power of two"
    " that does; on CPU at most 16 at a time)",
  )
  g.add_argument(
    "--memory-budget",
    metavar="GIB",
    type=cli.positive_float,
    default=None,
    help="GiB per device that --batch-size auto may plan for (default: 80%% of"
    " an accelerator's free memory; on CPU half the available memory)",
  )


def batch_size(text: str) -> int | str:
  """A `--batch-size`: a positive integer, or `auto`."""
  return "auto" if text == "auto" else cli.positive_int(text)


def address(text: str) -> str:
  """A `HOST:PORT` flag."""
  host, sep, port = str(text).rpartition(":")
  if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise argparse.ArgumentTypeError(f"expected HOST:PORT (e.g. 10.0.0.1:1234), got {text!r}")
  return text


def check_args(parser: argparse.ArgumentParser, args) -> None:
  """Flag cross-checks (argparse's error, exit status 2). Sets `args.distributed` when any
  of the three explicit flags is given."""
  explicit = {
    "--coordinator": args.coordinator,
    "--num-processes": args.num_processes,
    "--process-id": args.process_id,
  }
  given = [f for f, v in explicit.items() if v is not None]
  if given and len(given) < 3:
    missing = [f for f in explicit if f not in given]
    parser.error(
      f"{', '.join(given)} given without {', '.join(missing)}: give all three"
      " (jax.distributed.initialize's arguments), or --distributed alone under a"
      " launcher that sets them (SLURM, Open MPI)"
    )
  if given and args.process_id >= args.num_processes:
    parser.error(
      f"--process-id {args.process_id} must be below --num-processes"
      f" {args.num_processes} (processes count from 0)"
    )
  args.distributed = bool(args.distributed or given)


def sharded(args) -> bool:
  """Whether the run goes through `oj.run_sharded` (several processes, or --batch-size)."""
  return bool(args.distributed or args.batch_size is not None)


def initialize(args) -> None:
  """Joins the run's processes (before any JAX computation); nothing for one process."""
  if not args.distributed:
    return
  # Collectives between CPU processes (the gathers) go over gloo; GPUs use their own.
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(
    coordinator_address=args.coordinator,
    num_processes=args.num_processes,
    process_id=args.process_id,
  )
  print(
    f"process {jax.process_index()} of {jax.process_count()}:"
    f" {jax.local_device_count()} of {jax.device_count()} devices"
  )


def writes() -> bool:
  """Whether this process writes the run's files (process 0)."""
  return jax.process_index() == 0


def gather(tree):
  """`tree` as host NumPy arrays, whole on every process (a collective when the run spans
  several processes: every process calls it)."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  return jax.tree.map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))


def chunk_runner(agent, cmdp, args, num_episodes: int):
  """`(keys, state) -> (state, log)` for one chunk of `num_episodes` episodes: a jitted
  `vmap` of `oj.run` on the default device, or `oj.run_sharded` over every device of every
  process (`sharded(args)`)."""
  if not sharded(args):
    return jax.jit(
      jax.vmap(lambda key, st: oj.run(agent, key, cmdp, num_episodes=num_episodes, state=st)),
      donate_argnums=1,
    )

  def run(keys, state):
    return oj.run_sharded(
      agent,
      keys,
      cmdp,
      num_episodes=num_episodes,
      state=state,
      batch_size=args.batch_size,
      memory_budget=None if args.memory_budget is None else int(args.memory_budget * 2**30),
      donate_state=True,
    )

  return run
