"""What every benchmark constructor shares: the `Benchmark` value, the float64 NumPy model
for the LP reference, the conversion that checks the baseline's slack, the LP and
min-cost baselines and the sparse rows of candidate moves. Host side, never jitted."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..cmdp import CMDP, merge_repeated_next_states
from ..cmdp_checks import validate_cmdp
from ..errors import ArgumentError
from ..lp import solve_lp
from ..policies import (
  check_safe_policy,
)
from ..transition_set import TransitionSet


class Benchmark(NamedTuple):
  """A benchmark CMDP with a strictly feasible baseline policy."""

  cmdp: CMDP  # validated, in the requested dtype
  safe_policy: jax.Array  # [H, S, A] strictly feasible baseline
  slack: float  # its true slack min_i (alpha_i - V^pi(d_i, p)) > 0
  # The features `phi [S, A, d]` (or `[H, S, A, d]`) of a linear CMDP (`oj.linear`); None:
  # a tabular benchmark (the linear agents then learn through one-hot features).
  features: Any = None


def _numpy_cmdp(
  kernel: TransitionSet,
  cost: np.ndarray,
  constraint_cost: np.ndarray,
  threshold: float,
  initial_state: int,
) -> CMDP:
  """A float64 CMDP with NumPy fields (for the LP reference) and one constraint; `kernel`:
  the transitions in their layout, a point `TransitionSet` of host arrays."""
  next_states = kernel.next_states
  # NumPy fields (the kernels receive JAX arrays; the host code reads these as NumPy).
  fields: dict[str, Any] = dict(
    transitions=np.asarray(kernel.kernel, np.float64),
    cost=np.asarray(cost, np.float64),
    constraint_costs=np.asarray(constraint_cost, np.float64)[None],
    thresholds=np.array([threshold], np.float64),
    initial_state=np.asarray(initial_state, np.int32),
    next_states=None if next_states is None else np.asarray(next_states, np.int32),
  )
  return validate_cmdp(CMDP(**fields))


def _finish(model: CMDP, baseline: np.ndarray, dtype) -> Benchmark:
  """Converts a float64 NumPy CMDP and baseline to JAX arrays of `dtype`; checks the slack."""
  dtype = dtype or jnp.zeros(()).dtype
  cmdp = validate_cmdp(
    CMDP(
      transitions=jnp.asarray(model.transitions, dtype=dtype),
      cost=jnp.asarray(model.cost, dtype=dtype),
      constraint_costs=jnp.asarray(model.constraint_costs, dtype=dtype),
      thresholds=jnp.asarray(model.thresholds, dtype=dtype),
      initial_state=jnp.asarray(model.initial_state, dtype=jnp.int32),
      next_states=(
        None if model.next_states is None else jnp.asarray(model.next_states, dtype=jnp.int32)
      ),
    )
  )
  policy = jnp.asarray(baseline, dtype=dtype)
  return Benchmark(cmdp=cmdp, safe_policy=policy, slack=check_safe_policy(cmdp, policy))


def _lp_baseline(model: CMDP) -> np.ndarray:
  """LP-optimal policy `[H, S, A]` of `model` with a fifth of its thresholds."""
  return solve_lp(model._replace(thresholds=model.thresholds / 5.0)).policy


def _min_cost_policy(cost: np.ndarray, kernel: TransitionSet) -> np.ndarray:
  """Deterministic policy `[H, S, A]` minimising `V^pi(cost, p)` (float64 backward induction
  on host arrays; `kernel`: `p` in its layout, a point `TransitionSet`).

  Ties go to the lowest action index, as in `planning.optimal_policy`.
  """
  transitions, next_states = kernel.kernel, kernel.next_states
  horizon, num_states, num_actions = cost.shape
  policy = np.zeros((horizon, num_states, num_actions))
  value = np.zeros(num_states)
  for h in reversed(range(horizon)):
    if next_states is None:
      q_values = cost[h] + transitions[h] @ value
    else:
      q_values = cost[h] + np.sum(transitions[h] * value[np.maximum(next_states[h], 0)], -1)
    actions = np.argmin(q_values, axis=-1)
    policy[h, np.arange(num_states), actions] = 1.0
    value = q_values[np.arange(num_states), actions]
  return policy


def sparse_rows(
  targets: np.ndarray, probs: np.ndarray, width: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
  """The sparse layout of rows given as candidate moves: `(next_states, probabilities)`.

  `targets [..., M]` (int) and `probs [..., M]` list each row's possible moves (repeats
  and zero probabilities allowed); the result merges repeats (`merge_repeated_next_states`),
  drops zeros and sorts each row's next states, in `width` slots (default: the largest
  row), -1 in empty slots.
  """
  targets, probs = np.asarray(targets), np.asarray(probs, np.float64)
  moves = probs > 0
  next_states, merged = merge_repeated_next_states(
    np.where(moves, targets, -1), np.where(moves, probs, 0.0)
  )
  widest = int((next_states >= 0).sum(-1).max(initial=0))
  width = widest if width is None else width
  if width < widest:
    raise ArgumentError("width", f"{width} slots, but a row has {widest} next states")
  pad = [(0, 0)] * (targets.ndim - 1) + [(0, max(width - targets.shape[-1], 0))]
  next_states = np.pad(next_states, pad, constant_values=-1)[..., :width]
  return next_states, np.pad(merged, pad)[..., :width]


def stationary_benchmark(p, cost, constraint, horizon: int, dtype) -> Benchmark:
  """A benchmark whose rows `p [S, A, S']`, costs and constraint costs `[S, A]` are the same
  at every one of the `horizon` steps, starting in state 0, with the budget `H / 2` and the
  LP baseline (`media_streaming`, `factored`)."""
  model = _numpy_cmdp(
    TransitionSet.point(np.broadcast_to(p, (horizon,) + p.shape)),
    np.broadcast_to(cost, (horizon,) + cost.shape),
    np.broadcast_to(constraint, (horizon,) + constraint.shape),
    horizon / 2.0,
    0,
  )
  return _finish(model, _lp_baseline(model), dtype)
