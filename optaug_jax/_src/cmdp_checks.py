"""Host checks of a CMDP: `validate_cmdp` (one named check per fault of every field, in both
layouts), the entry points' `check_cmdp`, the safe baseline's `baseline_fault`, and the
trace-time `assert_cmdp_shapes`."""

from __future__ import annotations

import warnings

import chex
import jax
import numpy as np

from .checking import arguments
from .cmdp import CMDP, SUPPORTED_DTYPES
from .errors import ArgumentError


def _as_numpy(name: str, value) -> np.ndarray:
  try:
    return np.asarray(value)
  except Exception as e:  # pragma: no cover - exotic inputs
    raise ArgumentError(name, f"cannot be converted to an array ({e})") from e


def _check_finite(name: str, array: np.ndarray) -> None:
  if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
    raise ArgumentError(name, f"expected a real numeric array, got dtype {array.dtype}")
  if not np.all(np.isfinite(array)):
    bad = np.argwhere(~np.isfinite(array))[0]
    raise ArgumentError(name, f"contains NaN or inf (first at index {arguments.position(bad)})")


def _check_unit_interval(name: str, array: np.ndarray) -> None:
  lo, hi = array.min(initial=0.0), array.max(initial=0.0)
  if lo < 0.0 or hi > 1.0:
    where = np.unravel_index(np.argmax((array < 0.0) | (array > 1.0)), array.shape)
    raise ArgumentError(
      name,
      f"costs must lie in [0, 1]; found {float(array[where]):.6g} at index"
      f" {arguments.position(where)}",
    )


def validate_cmdp(cmdp: CMDP, *, atol: float = 1e-6) -> CMDP:
  """Checks a CMDP on the host; raises `ValueError` naming the field and the fault.

  Checked: ranks and matching sizes (leading batch axes allowed, shared by all fields),
  float dtypes (`SUPPORTED_DTYPES`: float32 or float64, one for all fields), NaN/inf,
  negative transitions, transition rows not summing to 1 (within `atol`), costs
  outside `[0, 1]`, thresholds outside `[0, H]`, initial state not an integer in `[0, S)`,
  no constraint; in the sparse layout, next states outside `[-1, S)`, probability in an
  empty slot, a row naming a next state twice (`merge_repeated_next_states` merges such
  rows). Ranges are checked exactly; only the row sums have a tolerance.

  Args:
    cmdp: a `CMDP` (possibly batched).
    atol: tolerance of the sum-to-one check.

  Returns:
    `cmdp`, unchanged, so that `validate_cmdp(CMDP(...))` can be used inline.
  """
  if not isinstance(cmdp, CMDP):
    raise ArgumentError("cmdp", f"expected an optaug_jax.CMDP, got {type(cmdp).__name__}")
  p = _as_numpy("transitions", cmdp.transitions)
  c = _as_numpy("cost", cmdp.cost)
  d = _as_numpy("constraint_costs", cmdp.constraint_costs)
  alpha = _as_numpy("thresholds", cmdp.thresholds)
  s1 = _as_numpy("initial_state", cmdp.initial_state)

  horizon, num_states = _check_shapes(cmdp, p, c, d, alpha, s1)
  _check_dtypes(p, c, d, alpha)
  _check_initial_state(s1, num_states)
  _check_values(p, c, d, alpha, horizon, atol)
  return cmdp


def _check_shapes(cmdp, p, c, d, alpha, s1):
  """Ranks and matching sizes (leading batch axes shared by all fields), the sparse
  layout's next states; `(H, S)`."""
  if p.ndim < 4:
    raise ArgumentError("transitions", f"expected rank 4 [H, S, A, S'], got shape {p.shape}")
  batch = p.shape[:-4]
  horizon, num_states, num_actions, num_next = p.shape[-4:]
  if cmdp.next_states is not None:
    _check_next_states(_as_numpy("next_states", cmdp.next_states), p, num_states)
  elif num_next != num_states:
    raise ArgumentError(
      "transitions",
      f"shape {p.shape} has {num_next} next states but {num_states} states"
      " (a sparse CMDP gives next_states)",
    )
  if min(horizon, num_states, num_actions) < 1:
    raise ArgumentError("transitions", f"empty axis in shape {p.shape}")
  if c.shape != batch + (horizon, num_states, num_actions):
    raise ArgumentError(
      "cost",
      f"expected shape {batch + (horizon, num_states, num_actions)} [H, S, A] "
      f"to match transitions {p.shape}, got {c.shape}",
    )
  if (
    d.ndim != len(batch) + 4
    or d.shape[: len(batch)] != batch
    or d.shape[-3:] != (horizon, num_states, num_actions)
  ):
    raise ArgumentError(
      "constraint_costs",
      f"expected shape {batch + ('I', horizon, num_states, num_actions)}"
      f" [I, H, S, A], got {d.shape}",
    )
  num_constraints = d.shape[len(batch)]
  if num_constraints < 1:
    raise ArgumentError(
      "constraint_costs", f"needs at least one constraint (I >= 1), got {d.shape}"
    )
  if alpha.shape != batch + (num_constraints,):
    raise ArgumentError(
      "thresholds",
      f"expected shape {batch + (num_constraints,)} (one per constraint), got {alpha.shape}",
    )
  if s1.shape != batch:
    raise ArgumentError("initial_state", f"expected shape {batch}, got {s1.shape}")
  return horizon, num_states


def _check_dtypes(p, c, d, alpha) -> None:
  """float32 or float64, one for all fields, and finite."""
  for name, array in [
    ("transitions", p),
    ("cost", c),
    ("constraint_costs", d),
    ("thresholds", alpha),
  ]:
    if array.dtype not in SUPPORTED_DTYPES:
      raise ArgumentError(
        name,
        f"dtype {array.dtype} is not supported; use float32 or float64 (integer"
        " costs cannot be sampled, and 16-bit floats round transition rows and counts)",
      )
    _check_finite(name, array)
  dtypes = {str(x.dtype) for x in (p, c, d, alpha)}
  if len(dtypes) > 1:
    raise ArgumentError(
      "cmdp",
      f"transitions, cost, constraint_costs and thresholds must share"
      f" one dtype, got {sorted(dtypes)}",
    )


def _check_initial_state(s1, num_states: int) -> None:
  """An integer state index in `[0, S)`."""
  if not np.issubdtype(s1.dtype, np.integer):
    if (
      not np.issubdtype(s1.dtype, np.number)
      or not np.all(np.isfinite(s1))
      or np.any(s1 != np.round(s1))
    ):
      raise ArgumentError("initial_state", f"expected an integer state index, got {s1.tolist()}")
  if np.any(s1 < 0) or np.any(s1 >= num_states):
    raise ArgumentError(
      "initial_state", f"{s1.tolist()} is out of range for {num_states} states [0, {num_states})"
    )


def _check_values(p, c, d, alpha, horizon: int, atol: float) -> None:
  """Non-negative transition rows summing to 1 (within `atol`), costs in `[0, 1]`,
  thresholds in `[0, H]`."""
  if p.min() < 0:  # no tolerance: a negative probability breaks sampling
    where = np.unravel_index(np.argmin(p), p.shape)
    raise ArgumentError(
      "transitions",
      f"probabilities must be non-negative; found {float(p[where]):.6g}"
      f" at {arguments.position(where)}",
    )
  row_sums = p.sum(axis=-1)
  err = np.abs(row_sums - 1.0)
  if err.max() > atol:
    where = np.unravel_index(np.argmax(err), err.shape)
    raise ArgumentError(
      "transitions",
      f"rows must sum to 1 (tolerance {atol:g}); row {arguments.position(where)}"
      f" [.., h, s, a] sums to {float(row_sums[where]):.10g}",
    )
  _check_unit_interval("cost", c)
  _check_unit_interval("constraint_costs", d)
  if alpha.min() < 0.0 or alpha.max() > horizon:
    where = np.unravel_index(np.argmax((alpha < 0.0) | (alpha > horizon)), alpha.shape)
    raise ArgumentError(
      "thresholds",
      f"must lie in [0, H] = [0, {horizon}]; found {float(alpha[where]):.6g}"
      f" at {arguments.position(where)}",
    )


def _check_next_states(ns: np.ndarray, p: np.ndarray, num_states: int) -> None:
  """The sparse layout's index array: shape, integer, range, empty slots, duplicates."""
  if ns.shape != p.shape:
    raise ArgumentError(
      "next_states", f"expected shape {p.shape} (that of transitions, [H, S, A, N]), got {ns.shape}"
    )
  if not np.issubdtype(ns.dtype, np.integer):
    raise ArgumentError("next_states", f"expected integer state indices, got dtype {ns.dtype}")
  if ns.size and (ns.min() < -1 or ns.max() >= num_states):
    where = np.unravel_index(np.argmax((ns < -1) | (ns >= num_states)), ns.shape)
    raise ArgumentError(
      "next_states",
      f"{int(ns[where])} at {arguments.position(where)} is not a state in"
      f" [0, {num_states}) nor -1 (an empty slot)",
    )
  arguments.check_empty_slots(ns, p)
  dup = arguments.repeated_next_state_row(ns)
  if dup is not None:
    raise ArgumentError(
      "next_states",
      f"row {dup} [.., h, s, a] names a next state twice; merge the repeats"
      " (adding their probabilities) with oj.merge_repeated_next_states(next_states,"
      " transitions)",
    )


def check_cmdp(cmdp: CMDP, where: str) -> None:
  """The host check of an entry point (`run`, `run_sharded`, `episode_step`, `safe_policy`,
  `make_agent`): `validate_cmdp`, its message prefixed by `where`, when every field is
  concrete (under an outer `jit` or `vmap` nothing can be read: use `check=True` there);
  and a warning when float64 arrays meet a JAX without x64 (JAX would truncate them to
  float32 with only its generic warning)."""
  if not isinstance(cmdp, CMDP):
    raise ArgumentError(
      "cmdp", f"expected an optaug_jax.CMDP, got {type(cmdp).__name__}", where=where
    )
  leaves = jax.tree.leaves(cmdp)
  if arguments.traced(leaves):
    return
  try:
    validate_cmdp(cmdp)
  except ValueError as e:
    raise ArgumentError(where, f"{e}") from None
  if not jax.config.read("jax_enable_x64") and any(
    getattr(x, "dtype", None) == np.float64 for x in leaves
  ):
    warnings.warn(
      f"{where}: the CMDP has float64 arrays but JAX's x64 mode is off, so they are"
      " computed in float32. For float64, call jax.config.update('jax_enable_x64', True)"
      " before building any array; otherwise build the CMDP in float32.",
      UserWarning,
      stacklevel=3,
    )


def baseline_fault(values: np.ndarray, thresholds: np.ndarray, slack=None, *, atol: float = 1e-6):
  """Why a baseline with constraint values `values` `[..., I]` is not a safe baseline for
  `thresholds` `[..., I]` with the stated `slack` (checked when not `None`), or `None`.

  The baseline must be strictly feasible (true slack `min_i (alpha_i - V_i) > 0`), and a
  stated slack must be positive, finite and at most the true slack (+ `atol`). Leading
  axes (a batch of CMDPs) are checked together; the message names the first failing one.
  """
  true_slack = np.min(thresholds - values, axis=-1)
  fmt = lambda x: "[" + ", ".join(f"{float(v):.6g}" for v in np.ravel(x)) + "]"
  which = lambda bad: (
    "" if np.ndim(true_slack) == 0 else f" (CMDP {tuple(int(i) for i in np.argwhere(bad)[0])})"
  )
  pick = lambda x, bad: x if np.ndim(true_slack) == 0 else x[tuple(np.argwhere(bad)[0])]
  infeasible = true_slack <= 0
  if np.any(infeasible):
    return (
      f"safe_policy: not strictly feasible{which(infeasible)}: its true slack is"
      f" {float(pick(true_slack, infeasible)):.4g} <= 0 (constraint values"
      f" {fmt(pick(values, infeasible))} against thresholds"
      f" {fmt(pick(thresholds, infeasible))}); pass a policy that meets"
      " every constraint with room to spare (oj.safest_policy(cmdp) gives the safest one)"
    )
  if slack is None:
    return None
  slack_arr = np.asarray(slack, dtype=float)
  if not np.all(np.isfinite(slack_arr)) or np.any(slack_arr <= 0):
    return f"slack: must be positive and finite, got {slack}"
  too_large = np.broadcast_to(slack_arr, np.shape(true_slack)) > true_slack + atol
  if np.any(too_large):
    return (
      f"slack: {float(pick(np.broadcast_to(slack_arr, np.shape(true_slack)), too_large)):.4g}"
      f" exceeds the safe policy's true slack {float(pick(true_slack, too_large)):.4g}"
      f"{which(too_large)} (constraint values"
      f" {fmt(pick(values, too_large))} against thresholds"
      f" {fmt(pick(thresholds, too_large))}); pass at most the true slack"
      " (oj.check_safe_policy(cmdp, policy) returns it)"
    )
  return None


def assert_cmdp_shapes(cmdp: CMDP) -> None:
  """Trace-time shape check of an unbatched CMDP (for use inside jitted code)."""
  chex.assert_rank(
    [cmdp.transitions, cmdp.cost, cmdp.constraint_costs, cmdp.thresholds, cmdp.initial_state],
    [4, 3, 4, 1, 0],
  )
  h, s, a, n = cmdp.transitions.shape
  if cmdp.next_states is None:
    chex.assert_shape(cmdp.transitions, (h, s, a, s))
  else:
    chex.assert_shape(cmdp.next_states, (h, s, a, n))
  chex.assert_shape(cmdp.cost, (h, s, a))
  chex.assert_shape(cmdp.constraint_costs, (cmdp.thresholds.shape[0], h, s, a))
