"""Argument checks of the kernels: on the host when the arguments are concrete, through
`jax.experimental.checkify` when they are traced (opt-in, `check=True`).

A kernel called eagerly with concrete arrays always checks them (a `ValueError` naming the
argument). Inside `jit`/`vmap` the arguments are traced and nothing is checked unless the
kernel is called with `check=True` and the outer function is wrapped in `checked`, which
turns a failed check into a `ValueError`. Unchecked traced calls cost nothing.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from ..errors import ArgumentError
from . import arguments


def _tolerance(dtype) -> float:
  """Loose on purpose: the checks catch malformed inputs (a row summing to 1.8), not the
  rounding of a computed box or a finite-difference probe around a valid one."""
  return max(float(np.sqrt(np.finfo(dtype).eps)), 1e-5)


def _require(pred, message: str, traced_check: bool) -> None:
  """`pred` (a bool array); raise now when concrete, else a checkify check if asked."""
  if not arguments.traced(pred):
    if not bool(np.all(np.asarray(pred))):
      raise ValueError(message)
  elif traced_check:
    checkify.check(jnp.all(pred), message)


def initial_state(value, num_states: int, where: str, *, check: bool) -> None:
  """`initial_state` is an index in `[0, S)`."""
  if not arguments.traced(value) or check:
    v = jnp.asarray(value)
    _require(
      (v >= 0) & (v < num_states),
      f"{where}: initial_state must lie in [0, {num_states}) (S = {num_states})",
      check,
    )


def _repeated(xp, next_states):
  """`[..., S, A]` rows of a sparse layout's next states that name a state twice (empty
  slots, -1, get distinct negative keys and never collide)."""
  slots = xp.arange(next_states.shape[-1])
  keys = xp.sort(xp.where(next_states < 0, -1 - slots, next_states), axis=-1)
  return xp.any(keys[..., 1:] == keys[..., :-1], axis=-1)


def _box_faults(xp, lower, upper, next_states, num_states: int, tol: float):
  """`(field, bad rows [.., S, A], what is wrong)` for each fault of a box, in the order
  they are reported (`xp`: NumPy on the host, `jax.numpy` in a program)."""
  finite_rows = lambda x: xp.all(xp.isfinite(x), axis=-1)
  faults = [
    ("lower", ~finite_rows(lower), "holds NaN or inf"),
    ("upper", ~finite_rows(upper), "holds NaN or inf"),
    ("lower", xp.any(lower < -tol, axis=-1), "has a negative entry"),
    ("upper", xp.any(upper > 1 + tol, axis=-1), "has an entry above 1"),
    ("lower", xp.any(lower > upper + tol, axis=-1), "exceeds upper in an entry"),
    ("lower", xp.sum(lower, axis=-1) > 1 + tol, "sums to more than 1: the box holds no kernel"),
    ("upper", xp.sum(upper, axis=-1) < 1 - tol, "sums to less than 1: the box holds no kernel"),
  ]
  if next_states is not None:
    faults += [
      (
        "next_states",
        xp.any((next_states < -1) | (next_states >= num_states), axis=-1),
        f"names a state outside [0, S) = [0, {num_states}) (-1 marks an empty slot)",
      ),
      ("next_states", _repeated(xp, next_states), "names a next state twice"),
      (
        "upper",
        xp.any((next_states < 0) & (upper > tol), axis=-1),
        "gives mass to an empty slot (next state -1)",
      ),
    ]
  return faults


def _row_detail(field: str, what: str, row, lower, upper, next_states) -> str:
  """The numbers behind a fault of one row, for the host's message."""
  pick = lambda x: x[(min(row[0], x.shape[0] - 1),) + tuple(row[1:])]
  lo, up = pick(lower), pick(upper)
  if "sums" in what:
    return f" (sum(lower) = {lo.sum():.6g}, sum(upper) = {up.sum():.6g})"
  if field == "next_states":
    return f" (next states {pick(next_states).tolist()})"
  if "exceeds" in what:
    n = int(np.argmax(lo > up))
    return f" (slot {n}: lower {lo[n]:.6g} > upper {up[n]:.6g})"
  entries = lo if field == "lower" else up
  if entries.size <= 8:
    return f" ({field} [{', '.join(f'{v:.6g}' for v in entries.tolist())}])"
  return ""


def _static_box(lower, upper, next_states, where: str) -> int:
  """Shapes and dtypes of a box (checked at trace time too); returns `S`."""
  for name, x in (("lower", lower), ("upper", upper)):
    shape, dtype = np.shape(x), jnp.result_type(x)
    if len(shape) != 4:
      raise ArgumentError(
        name, f"expected a [H or 1, S, A, S' or N] array, got shape {shape}", where=where
      )
    if not jnp.issubdtype(dtype, jnp.floating):
      raise ArgumentError(name, f"expected a float array, got dtype {dtype}", where=where)
  if np.shape(lower) != np.shape(upper):
    raise ArgumentError(
      "upper", f"shape {np.shape(upper)} differs from lower's {np.shape(lower)}", where=where
    )
  steps, num_states, num_actions, width = np.shape(lower)
  if next_states is None:
    if width != num_states:
      raise ArgumentError(
        "lower",
        f"a dense box is [H or 1, S, A, S] (next states on the last axis),"
        f" got shape {np.shape(lower)}; the sparse layout needs next_states",
        where=where,
      )
    return num_states
  shape, dtype = np.shape(next_states), jnp.result_type(next_states)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ArgumentError("next_states", f"expected an integer array, got dtype {dtype}", where=where)
  if (
    len(shape) != 4
    or shape[1:] != (num_states, num_actions, width)
    or (shape[0] != steps and 1 not in (shape[0], steps))
  ):
    raise ArgumentError(
      "next_states",
      f"expected shape [H or 1, {num_states}, {num_actions}, {width}]"
      f" (the slots of lower and upper, {np.shape(lower)}), got {shape}",
      where=where,
    )
  return num_states


def box(lower, upper, where: str, *, check: bool, rows: str = "(h, s, a)") -> None:
  """`transition_set`'s checks of dense bounds (`rows=""`: bounds of any rank `[..., S']`,
  whose shapes are not checked)."""
  _box(lower, upper, None, where, check=check, rows=rows)


def _box(lower, upper, next_states, where: str, *, check: bool, rows: str = "(h, s, a)") -> None:
  """A box that holds a transition kernel in every row: float bounds, finite, `0 <= lower
  <= upper <= 1`, `sum(lower) <= 1 <= sum(upper)`; in the sparse layout (`next_states`
  given) next states in `[0, S)` or -1 (empty), none twice in a row, no mass on an empty
  slot. Shapes and dtypes are checked always; the numbers when concrete (a `ValueError`
  naming the field and the first bad row `(h, s, a)`), or through `checkify` with `check`.
  """
  num_states = _static_box(lower, upper, next_states, where) if rows else np.shape(lower)[-1]
  is_concrete = not arguments.traced(lower, upper, next_states)
  if not (is_concrete or check):
    return
  tol = _tolerance(jnp.result_type(lower))
  if is_concrete:
    lower, upper = np.asarray(lower), np.asarray(upper)
    ns = None if next_states is None else np.asarray(next_states)
    for field, bad, what in _box_faults(np, lower, upper, ns, num_states, tol):
      bad_rows = np.argwhere(bad)
      if bad_rows.size:
        row = tuple(int(i) for i in bad_rows[0])
        more = f"; {len(bad_rows) - 1} more rows" if len(bad_rows) > 1 else ""
        detail = _row_detail(field, what, row, lower, upper, ns)
        label = f"row {rows} = {row}" if rows else f"row {row}"
        raise ArgumentError(field, f"{label} {what}{detail}{more}", where=where)
    return
  for field, bad, what in _box_faults(jnp, lower, upper, next_states, num_states, tol):
    first = jnp.unravel_index(jnp.argmax(bad.reshape(-1)), bad.shape)
    checkify.check(
      ~jnp.any(bad),
      f"{where}: {field}: row {rows} = {{row}} {what}" if rows else f"{where}: {field}: {what}",
      row=jnp.stack(first) if first else jnp.zeros((0,), jnp.int32),
    )


def transition_set(transitions, where: str, *, check: bool = False) -> None:
  """`box` of a `TransitionSet` (its bounds and, sparse, its next states); a concrete set
  that its constructor checked is not checked again."""
  if getattr(transitions, "checked", False) and not check:
    return
  _box(transitions.lower, transitions.upper, transitions.next_states, where, check=check)


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
  if arguments.traced(x) and not check:
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
  if arguments.traced(rows) and not check:
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
