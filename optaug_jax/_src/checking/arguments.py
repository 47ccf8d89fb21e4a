"""Host-side checks of user arguments, shared by every factory and entry point.

Each check raises `ValueError` naming the argument and the fault. Traced values (an agent
built inside a vmapped or jitted function) and callables are skipped: they are checked
where they become concrete, or not at all.
"""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ArgumentError

# The narrowest float the runner computes in (counts and radii need >= float32).
_TINY = float(np.finfo(np.float32).tiny)


def traced(*trees) -> bool:
  """Whether any leaf of `trees` is traced (its numbers cannot be read now): the package's
  one test of it."""
  return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(trees))


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
  """An integer (a Python or NumPy integer, or an integral float) in `[low, high]`."""
  if isinstance(value, bool) or not isinstance(value, (numbers.Integral, float, np.floating)):
    raise ArgumentError(name, f"must be an integer, got {value!r}")
  if not isinstance(value, numbers.Integral) and (not math.isfinite(value) or int(value) != value):
    raise ArgumentError(name, f"must be an integer, got {value!r}")
  value = int(value)
  if low is not None and value < low:
    raise ArgumentError(name, f"must be >= {low}, got {value}")
  if high is not None and value > high:
    raise ArgumentError(name, f"must be <= {high}, got {value}")
  return value


def check_real(
  name: str,
  value,
  *,
  low: float | None = None,
  high: float | None = None,
  low_open: bool = False,
  high_open: bool = False,
  allow_none: bool = False,
):
  """A finite real (scalar or array) in the interval given by `low`, `high`.

  Skipped for traced values. `None` passes only with `allow_none`.
  """
  if value is None:
    if allow_none:
      return None
    raise ArgumentError(name, "required, got None")
  if traced(value):
    return value
  arr = np.asarray(value)
  if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
    raise ArgumentError(name, f"must be a real number, got {value!r}")
  if not np.all(np.isfinite(arr)):
    raise ArgumentError(name, f"must be finite, got {value!r}")
  if low is not None and (np.any(arr <= low) if low_open else np.any(arr < low)):
    raise ArgumentError(name, f"must be {'>' if low_open else '>='} {low}, got {value!r}")
  if high is not None and (np.any(arr >= high) if high_open else np.any(arr > high)):
    raise ArgumentError(name, f"must be {'<' if high_open else '<='} {high}, got {value!r}")
  return value


def check_positive(name: str, value, *, allow_none: bool = True):
  """A positive finite number (skipped for traced values and callables)."""
  if callable(value) or (value is None and allow_none) or traced(value):
    return value
  arr = np.asarray(value) if value is not None else np.asarray(np.nan)
  if (
    arr.dtype == bool
    or not np.issubdtype(arr.dtype, np.number)
    or np.iscomplexobj(arr)
    or not np.all(np.isfinite(arr))
    or np.any(arr <= 0)
  ):
    raise ArgumentError(name, f"must be positive and finite, got {value!r}")
  return value


def check_confidence(delta, bonus_scale) -> None:
  """`delta` in `(0, 1)` (and representable in float32), `bonus_scale >= 0`."""
  check_real("delta", delta, low=_TINY, high=1.0, high_open=True)
  check_real("bonus_scale", bonus_scale, low=0.0)


def check_choice(name: str, value, choices) -> str:
  """`value` is one of `choices`."""
  if value not in choices:
    raise ArgumentError(name, f"expected one of {tuple(choices)}, got {value!r}")
  return value


def check_inner_solver(name: str, solver):
  """An inner solver: `oj.inner.exact(...)`, `oj.inner.frank_wolfe(...)`, or a callable
  with their signature (`oj.inner.InnerSolver`)."""
  if isinstance(solver, str) or not callable(solver):
    raise ArgumentError(
      name,
      f"expected an inner solver (oj.inner.exact(),"
      f" oj.inner.frank_wolfe(num_iters=...), or an oj.inner.InnerSolver"
      f" callable), got {solver!r}",
    )
  return solver


def _rows(indices: np.ndarray, limit: int = 3) -> str:
  shown = ", ".join(str(tuple(int(i) for i in row)) for row in indices[:limit])
  more = f" and {len(indices) - limit} more" if len(indices) > limit else ""
  return shown + more


def policy_fault(name: str, policy, shape: tuple[int, ...] | None = None, *, atol: float = 1e-5):
  """Why `policy` is not an `[H, S, A]` array of probability rows (of `shape`, if given),
  naming the first offending rows `(h, s)`; `None` if it is one."""
  pi = np.asarray(policy)
  if shape is not None and pi.shape != tuple(shape):
    return f"{name}: expected shape {tuple(shape)} [H, S, A], got {pi.shape}"
  if pi.ndim != 3 or not np.issubdtype(pi.dtype, np.number) or np.iscomplexobj(pi):
    return (
      f"{name}: expected an [H, S, A] array of probability rows, got shape {pi.shape} and"
      f" dtype {pi.dtype}"
    )
  if not np.all(np.isfinite(pi)):
    bad = np.argwhere(~np.all(np.isfinite(pi), axis=-1))
    return f"{name}: rows (h, s) {_rows(bad)} contain NaN or inf"
  sums = pi.sum(-1)
  bad = np.argwhere((pi.min(-1) < 0) | (np.abs(sums - 1) > atol))
  if bad.size:
    first = tuple(bad[0])
    return (
      f"{name}: rows (h, s) {_rows(bad)} are not probability vectors (>= 0, summing to 1);"
      f" row {tuple(int(i) for i in first)} sums to {float(sums[first]):.6g} with smallest"
      f" entry {float(pi[first].min()):.6g}"
    )
  return None


def check_policy(name: str, policy) -> None:
  """An `[H, S, A]` array of probability rows (skipped when traced)."""
  if traced(policy):
    return
  fault = policy_fault(name, policy)
  if fault is not None:
    raise ValueError(fault)


def repeated_next_state_row(next_states) -> tuple[int, ...] | None:
  """The first row `[..., N]` of a sparse layout's next states that names a state twice
  (empty slots, -1, never count as repeats), or `None`."""
  ns = np.asarray(next_states)
  # Empty slots get distinct negative keys, so only real next states can collide.
  ordered = np.sort(np.where(ns < 0, -1 - np.arange(ns.shape[-1]), ns), axis=-1)
  rows = np.argwhere(np.any(ordered[..., 1:] == ordered[..., :-1], axis=-1))
  return tuple(int(i) for i in rows[0]) if rows.size else None


def check_empty_slots(ns: np.ndarray, p: np.ndarray) -> None:
  """Refuses probability in an empty slot (next state -1), naming the first."""
  if np.any((ns < 0) & (p != 0)):
    where = np.unravel_index(np.argmax((ns < 0) & (p != 0)), ns.shape)
    raise ArgumentError(
      "transitions",
      f"empty slot {position(where)} (next_states -1) has probability"
      f" {float(p[where]):.6g}; empty slots must hold 0",
    )


def position(where) -> tuple[int, ...]:
  """An index as a tuple of Python ints (how every message names an entry)."""
  return tuple(int(i) for i in where)


def known_array(value, name: str, shape: tuple[int, ...], dtype) -> jax.Array | np.ndarray:
  """A setting's known array (`cost`, `constraint_costs`, `support`) of `shape`, or of
  `shape` without its step axis (repeated over h). A concrete one stays a NumPy array: a
  constant of the program as it is, which XLA does not fold again at every compilation (a
  dense 200-state support took it 3 s per program); a traced one (a setting vmapped over
  CMDPs) is a JAX array."""
  xp = jnp if isinstance(value, jax.core.Tracer) else np
  value = xp.asarray(value)
  step_axis = len(shape) - 3 if name != "support" else len(shape) - 4
  stationary_shape = shape[:step_axis] + shape[step_axis + 1 :]
  if value.shape == stationary_shape:
    value = xp.expand_dims(value, step_axis)
  elif value.shape != shape:
    raise ValueError(
      f"setting.{name}: expected shape {shape} or {stationary_shape} for this"
      f" CMDP, got {value.shape}"
    )
  return xp.broadcast_to(value, shape).astype(dtype)
