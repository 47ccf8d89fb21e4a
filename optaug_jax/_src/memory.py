"""A batch size from a memory budget (`run_sharded(batch_size="auto")`).

The rule: compile the device's program for every seed at once, and read the peak that XLA
plans for it (`Compiled.memory_analysis()`: arguments + outputs + temporaries, less the
donated buffers). If it fits the budget, that program runs (no second compilation: `jit`
reuses the executable). If not, the temporaries are taken to grow with the seeds run at a
time (they are the vmapped intermediates; the arguments and outputs are every seed's
states and logs, whatever the batch): the batch is the largest power of two whose share
fits beside them, and its program is compiled and checked the same way (halved while it
does not fit). Where the states and logs alone exceed the budget, no batch size helps:
a `ValueError` says so.

On CPU the batch is also at most `CPU_BATCH` seeds (the cost per seed grows with larger
vmapped batches there; on an accelerator it falls).

The default budget: on an accelerator, 80% of the memory it has left (`memory_stats`); on
CPU, half of the memory the system has available (`MemAvailable`), shared by its local
CPU devices.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from .errors import ArgumentError

GIB = 2**30
# On CPU, `auto` runs at most this many seeds at a time: beyond it a vmapped batch's
# intermediates leave the caches (the 20x20 grid, OptAug, one core: 256 seeds at once
# cost 1.19x the 16-seed cost per seed-episode, 256 in batches of 16 0.88x:
# experiments/perf/seeds.py). Accelerators take every seed that fits.
CPU_BATCH = 16


def default_budget(device) -> int:
  """Bytes a run may plan for on `device` (see the module docstring)."""
  stats = device.memory_stats() if device.platform != "cpu" else None
  if stats and "bytes_limit" in stats:
    return int(0.8 * (stats["bytes_limit"] - stats.get("bytes_in_use", 0)))
  import jax

  return int(0.5 * available_memory() / max(len(jax.local_devices(backend="cpu")), 1))


def available_memory() -> int:
  """The system's available memory in bytes (`MemAvailable` of /proc/meminfo; the physical
  memory where that file is absent)."""
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def planned_bytes(compiled) -> tuple[int, int] | None:
  """`(fixed, temporaries)` of a compiled program: its arguments and outputs (less the
  donated buffers that outputs reuse), and its temporaries; None where the backend does
  not say."""
  m = compiled.memory_analysis()
  if m is None:
    return None
  fixed = m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
  return int(fixed), int(m.temp_size_in_bytes)


# The batch chosen per (program, input shapes, budget): a run's chunks after its first
# neither trace nor compile again to choose (each `lower` traces the whole program).
_CHOSEN: dict = {}


def fitting(
  device_fn: Callable[[int | None], Any],
  inputs: tuple,
  num_seeds: int,
  budget: int | None,
  cap: int | None = None,
) -> tuple[Any, int | None]:
  """`(fn, batch_size)`: `device_fn(batch_size)` (a jitted function of `inputs`) for the
  largest batch whose compiled program fits `budget` bytes: `None` (every seed at once)
  where that fits, else a power of two, at least 2 (see the module docstring); at most
  `cap` seeds at a time where given (`CPU_BATCH` on CPU). `budget=None`: the default of
  the inputs' device (`default_budget`), read when the choice is made. Chosen once per
  program, input shapes, budget (as given: the default moves with the system's free
  memory) and cap."""
  import jax

  leaves, tree = jax.tree.flatten(inputs)
  shapes = tuple((x.shape, x.dtype) for x in leaves)
  key = (device_fn(None), tree, shapes, num_seeds, budget, cap)
  if key not in _CHOSEN:
    _CHOSEN[key] = _choose(device_fn, inputs, num_seeds, budget, cap)
  size = _CHOSEN[key]
  return device_fn(size), size


def _choose(device_fn, inputs, num_seeds: int, budget: int | None, cap: int | None) -> int | None:
  import jax

  if budget is None:
    budget = default_budget(next(iter(jax.tree.leaves(inputs)[0].devices())))
  if cap is not None and num_seeds > cap:
    size = max(2, 2 ** int(math.log2(cap)))  # the cap, then halved while it does not fit
  else:
    fn = device_fn(None)
    planned = planned_bytes(fn.lower(*inputs).compile())
    if planned is None or sum(planned) <= budget or num_seeds <= 2:
      return None
    fixed, temp = planned
    room = budget - fixed
    per_seed = temp / num_seeds
    size = 2 ** int(math.floor(math.log2(max(room / per_seed, 2.0)))) if room > 0 else 2
    size = max(2, min(size, 2 ** int(math.log2(num_seeds - 1))))
  while True:
    fn = device_fn(size)
    planned = planned_bytes(fn.lower(*inputs).compile())
    if planned is None or sum(planned) <= budget:
      return size
    if size == 2:
      raise ArgumentError(
        "memory_budget",
        f"{size_text(budget)} is too small for {num_seeds} seeds on one"
        f" device even two at a time ({size_text(sum(planned))} planned, of which"
        f" {size_text(planned[0])} are the seeds' states and logs): run fewer seeds per"
        " device (more devices or processes), logs='summary', or a larger budget",
      )
    size //= 2


def size_text(num_bytes: float) -> str:
  """`num_bytes` in GiB, or in MiB below one GiB."""
  if num_bytes >= GIB:
    return f"{num_bytes / GIB:.2f} GiB"
  return f"{num_bytes / 2**20:.1f} MiB"
