"""Argument checks of the kernels: on the host when the arguments are concrete, through
`jax.experimental.checkify` when they are traced (opt-in, `check=True`).

A kernel called eagerly with concrete arrays always checks them (a `ValueError` naming the
argument). Inside `jit`/`vmap` the arguments are traced and nothing is checked unless the
kernel is called with `check=True` and the outer function is wrapped in `checked`, which
turns a failed check into a `ValueError`. Unchecked traced calls cost nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

# Whether the program being traced asked for its in-program checks (`run(check=True)`,
# `episode_step(check=True)`): the agents' `plan` functions read it for the arguments only
# they see (a step size computed from a schedule, the multipliers of a dual step).
_REQUESTED = contextvars.ContextVar("optaug_jax_in_program_checks", default=False)


@contextlib.contextmanager
def requesting(enabled: bool):
  """Within the block, traced code is asked for its `checkify` checks (`requested()`)."""
  token = _REQUESTED.set(bool(enabled) or _REQUESTED.get())
  try:
    yield
  finally:
    _REQUESTED.reset(token)


def requested() -> bool:
  """Whether the enclosing run asked for in-program checks (see `requesting`)."""
  return _REQUESTED.get()


def _concrete(*xs) -> bool:
  return not any(isinstance(x, jax.core.Tracer) for x in xs)


def _tolerance(dtype) -> float:
  """Loose on purpose: the checks catch malformed inputs (a row summing to 1.8), not the
  rounding of a computed box or a finite-difference probe around a valid one."""
  return max(float(np.sqrt(np.finfo(dtype).eps)), 1e-5)


def _require(pred, message: str, traced_check: bool) -> None:
  """`pred` (a bool array); raise now when concrete, else a checkify check if asked."""
  if _concrete(pred):
    if not bool(np.all(np.asarray(pred))):
      raise ValueError(message)
  elif traced_check:
    checkify.check(jnp.all(pred), message)


def initial_state(value, num_states: int, where: str, *, check: bool) -> None:
  """`initial_state` is an index in `[0, S)`."""
  if _concrete(value) or check:
    v = jnp.asarray(value)
    _require(
      (v >= 0) & (v < num_states),
      f"{where}: initial_state must lie in [0, {num_states}) (S = {num_states})",
      check,
    )


def box(lower, upper, where: str, *, check: bool) -> None:
  """`0 <= lower <= upper <= 1` and `sum(lower) <= 1 <= sum(upper)` in every row."""
  if not (_concrete(lower, upper) or check):
    return
  tol = _tolerance(jnp.result_type(lower))
  _require(
    (lower >= -tol) & (lower <= upper + tol) & (upper <= 1 + tol),
    f"{where}: lower and upper must satisfy 0 <= lower <= upper <= 1",
    check,
  )
  _require(
    jnp.sum(lower, axis=-1) <= 1 + tol,
    f"{where}: lower rows must sum to at most 1 (the box is empty)",
    check,
  )
  _require(
    jnp.sum(upper, axis=-1) >= 1 - tol,
    f"{where}: upper rows must sum to at least 1 (the box is empty)",
    check,
  )


def finite(
  name: str,
  x,
  where: str,
  *,
  check: bool,
  low: float | None = None,
  low_open: bool = False,
  high=None,
) -> None:
  """Every entry of `x` is finite (and `>= low`, or `> low` when `low_open`; `<= high`)."""
  if not (_concrete(x) or check):
    return
  x = jnp.asarray(x)
  ok = jnp.isfinite(x)
  bound = ""
  if low is not None:
    ok = ok & ((x > low) if low_open else (x >= low))
    bound = f" and {'>' if low_open else '>='} {low:g}"
  if high is not None:
    ok = ok & (x <= high)
    bound = f" and in {'(' if low_open else '['}{low:g}, {high:g}]" if low is not None else ""
    bound = bound or f" and <= {high:g}"
  _require(ok, f"{where}: {name} must be finite{bound}", check)


def distribution(name: str, rows, where: str, *, check: bool) -> None:
  """Rows of `rows` are probability vectors."""
  if not (_concrete(rows) or check):
    return
  tol = _tolerance(jnp.result_type(rows))
  _require(
    (rows >= -tol) & (jnp.abs(jnp.sum(rows, axis=-1, keepdims=True) - 1) <= tol),
    f"{where}: {name} rows must be probability vectors (>= 0, summing to 1)",
    check,
  )


def checked(fn):
  """Wraps `fn` (jitted or not) so that the `check=True` kernels inside it raise.

  `checked(jax.jit(f))(*args)` runs `f` under `checkify` and raises a `ValueError` with the
  failed check's message (naming the argument); otherwise it returns `f`'s result.
  """
  functionalized = checkify.checkify(fn, errors=checkify.user_checks)

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    error, out = functionalized(*args, **kwargs)
    message = error.get()
    if message is not None:
      raise ValueError(message.split(" (check failed at")[0].removesuffix(" (`check` failed)"))
    return out

  return wrapped
