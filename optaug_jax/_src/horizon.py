"""Scans over the horizon: unrolled when short, a stationary array closed over.

The recursions of `planning.py` and the layouts' per-step passes (`layouts/`) scan the
horizon through these two functions, which share the unrolling limits below.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import jax
from jax import lax

# Scans over the horizon are unrolled (straight-line code) up to this H: XLA:CPU pays a
# fixed cost per loop iteration and cannot fuse across iterations; longer horizons keep a
# rolled loop (compile time would grow with H). Read while tracing; `oj.kernels.tuning` sets
# it for a block. Measurements: docs/design.md, "Tuned constants".
UNROLL_HORIZON = 32
# ... and only while H times the largest per-step slice (elements of one problem) stays
# below this: an unrolled step copies its slice into a buffer of its own before a dot, so
# an unrolled scan holds H copies per call and per vmapped seed. A constant, like
# `UNROLL_HORIZON`. Measurements: docs/design.md, "Tuned constants".
UNROLL_MAX_ELEMENTS = 2**21


# `rolled_scans(size)` rolls the scans of a DP of at least this many elements (H times one
# step's box, of one problem): on 256 vmapped I >= 2 solves of S, A, H = 10, 4, 10 (4,000)
# the rolled solve was 1-10% slower, on the reservoir (180,000) 8% faster. A power of two
# between the two: no size between them was measured.
ROLLED_BLOCK_MIN_ELEMENTS = 2**15
_ROLLED_BLOCKS = 0  # the rolling blocks open (nested ones count)


@contextlib.contextmanager
def rolled_scans(size: int) -> Iterator[None]:
  """A block whose horizon scans are traced rolled, for a DP of `size` elements (H times
  one step's box, of one problem) from `ROLLED_BLOCK_MIN_ELEMENTS` on; a smaller one's
  scans keep `scan_horizon`'s rule.

  For a DP that one program calls from many sites, each an unrolled copy compiled on its
  own: the I >= 2 exact solve calls it from seven (the first query, the loop's five
  buckets of `batching.for_active`, the ending). Rolled, OptAug on a 200-state CMDP with
  two constraints compiled in 24 s instead of 59, and its episode was no slower
  (docs/results/episode_cost, "the I >= 2 solve's DPs rolled"). Read while tracing.
  """
  global _ROLLED_BLOCKS
  rolling = int(size >= ROLLED_BLOCK_MIN_ELEMENTS)
  _ROLLED_BLOCKS += rolling
  try:
    yield
  finally:
    _ROLLED_BLOCKS -= rolling


def scan_horizon(f, init, xs, *, reverse=False, rolled=False):
  """`lax.scan` over the leading (horizon) axis of `xs`, unrolled when it is short.

  Unrolled when the horizon is at most `UNROLL_HORIZON` and the horizon times the largest
  per-step slice of `xs` is at most `UNROLL_MAX_ELEMENTS` (sizes of one problem: under
  `vmap` the batch axis does not count), unless `rolled` or inside a rolling
  `rolled_scans` block.
  """
  leaves = jax.tree.leaves(xs)
  length = leaves[0].shape[0]
  step_size = max(math.prod(x.shape[1:]) for x in leaves)
  unroll = length <= UNROLL_HORIZON and length * step_size <= UNROLL_MAX_ELEMENTS
  unroll = unroll and not rolled and not _ROLLED_BLOCKS
  return lax.scan(f, init, xs, reverse=reverse, unroll=bool(unroll))


def horizon_scan(f, init, arrays, horizon: int, *, reverse=False, roll_stationary=False):
  """`scan_horizon` of `f(carry, per_step)` over the `horizon` steps of `arrays`.

  An array whose leading (step) axis has length 1 while `horizon > 1` is stationary: every
  step receives its one slice, closed over instead of scanned (no `[H, ...]` copy is made,
  and the slice stays in cache). `None` entries pass through as `None`. With
  `roll_stationary`, a scan that closes over a stationary array stays rolled (the sparse
  layout asks for it: `layouts.sparse.STATIONARY_ROLL_MIN_SLOTS`).
  """
  fixed = tuple(x is not None and x.shape[0] == 1 and horizon > 1 for x in arrays)
  xs = tuple(None if is_fixed else x for x, is_fixed in zip(arrays, fixed))

  def body(carry, sliced):
    merged = tuple(x[0] if is_fixed else y for x, y, is_fixed in zip(arrays, sliced, fixed))
    return f(carry, merged)

  rolled = roll_stationary and any(fixed)
  return scan_horizon(body, init, xs, reverse=reverse, rolled=rolled)
