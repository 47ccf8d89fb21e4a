"""A single-server queue with service-rate control against an energy budget (sparse)."""

from __future__ import annotations

import numpy as np

from ..checking import arguments
from ..errors import ArgumentError
from ..transition_set import TransitionSet
from ._common import (
  Benchmark,
  _finish,
  _numpy_cmdp,
  sparse_rows,
)

# Service rates of `queue`'s actions (slow, medium, fast) and their energy costs.
QUEUE_RATES = (0.2, 0.5, 0.8)
QUEUE_ENERGY = (0.0, 0.5, 1.0)


def queue(
  *,
  capacity: int = 199,
  arrival: float = 0.5,
  horizon: int = 50,
  initial_length: int | None = None,
  budget_fraction: float = 0.3,
  sparse: bool | None = None,
  dtype=None,
) -> Benchmark:
  """A single-server queue with service-rate control: short queues on an energy budget.

  States are the queue lengths `0..capacity` (`S = capacity + 1`). Each step one job
  arrives with probability `arrival` (dropped at capacity) and, if the queue is not empty,
  one job leaves with the probability of the chosen service rate (actions 0, 1, 2: rates
  `QUEUE_RATES` = 0.2, 0.5, 0.8). The length goes up by one (an arrival, no departure),
  down by one (a departure, no arrival) or stays: at most 3 next states per row, the
  sparse shape of a birth-death chain (where `gridworld` has 5 in two dimensions).
  Objective cost: the holding cost `length / capacity` in `[0, 1]`. Constraint cost: the
  energy of the rate, `QUEUE_ENERGY` = 0, 0.5, 1 per step. Threshold: `budget_fraction *
  H`; the unconstrained optimum serves fast whenever the queue is not empty (energy about
  `H`), so the constraint binds. The start is `initial_length` (default: half full).
  Baseline: always the slow rate (energy 0, slack = the threshold).

  Args:
    capacity: the largest queue length (`>= 1`).
    arrival: arrival probability in `[0, 1]`.
    horizon: `H`.
    initial_length: the queue length at the start; default `capacity // 2`.
    budget_fraction: the threshold as a fraction of `H`, in `(0, 1]`.
    sparse: the layout (`True`: 3 slots per row; `False` dense; `None`: sparse when
      `capacity >= 100`).
    dtype: float dtype of the arrays (default: JAX's default float).

  Returns:
    `Benchmark(cmdp, safe_policy [H, S, 3], slack)`.
  """
  arguments.check_int("capacity", capacity, low=1)
  if not 0.0 <= arrival <= 1.0:
    raise ArgumentError("arrival", f"must lie in [0, 1], got {arrival}")
  arguments.check_int("horizon", horizon, low=1)
  if not 0.0 < budget_fraction <= 1.0:
    raise ArgumentError("budget_fraction", f"must lie in (0, 1], got {budget_fraction}")
  capacity, horizon = int(capacity), int(horizon)
  start = capacity // 2 if initial_length is None else int(initial_length)
  if not 0 <= start <= capacity:
    raise ArgumentError("initial_length", f"must lie in [0, {capacity}], got {initial_length}")
  sparse = capacity >= 100 if sparse is None else bool(sparse)
  num_states = capacity + 1
  length = np.arange(num_states)[:, None]  # [S, 1]
  shape = (num_states, len(QUEUE_RATES))
  p, ns = _queue_rows(capacity, arrival, sparse)
  cost = np.broadcast_to(length / capacity, shape)
  energy = np.broadcast_to(np.asarray(QUEUE_ENERGY)[None, :], shape)
  tile = lambda x: np.broadcast_to(x, (horizon,) + x.shape)
  model = _numpy_cmdp(
    TransitionSet.point(tile(p), None if ns is None else tile(ns)),
    tile(cost),
    tile(energy),
    budget_fraction * horizon,
    start,
  )
  baseline = np.zeros((horizon, num_states, len(QUEUE_RATES)))
  baseline[..., 0] = 1.0
  return _finish(model, baseline, dtype)


def _queue_rows(capacity: int, arrival: float, sparse: bool):
  """The birth-death rows `[S, 3]` of the queue (up, down, stay): `(p, next_states)` in the
  sparse layout (3 slots), or `(p [S, 3, S], None)` dense."""
  num_states = capacity + 1
  length = np.arange(num_states)[:, None]  # [S, 1]
  rate = np.asarray(QUEUE_RATES)[None, :]  # [1, 3]
  arrive = np.where(length < capacity, arrival, 0.0)
  leave = np.where(length > 0, rate, 0.0)
  up, down = arrive * (1.0 - leave), leave * (1.0 - arrive)
  shape = (num_states, len(QUEUE_RATES))
  targets = np.stack(
    [
      np.broadcast_to(np.minimum(length + 1, capacity), shape),
      np.broadcast_to(np.maximum(length - 1, 0), shape),
      np.broadcast_to(length, shape),
    ],
    axis=-1,
  )
  weights = np.stack([up, down, 1.0 - up - down], axis=-1)
  if sparse:
    ns, p = sparse_rows(targets, weights, width=3)
  else:
    ns, p = None, np.zeros(shape + (num_states,))
    s_idx, a_idx = np.meshgrid(np.arange(num_states), np.arange(shape[1]), indexing="ij")
    for m in range(3):
      np.add.at(p, (s_idx, a_idx, targets[..., m]), weights[..., m])
  return p, ns
