"""Finite-horizon constrained MDPs: the container, host-side validation, random instances.

Why one file: `validate_cmdp` is most of it (one named check per fault
of every field, in both layouts), and it belongs next to the container whose contract it
states; the conversions between layouts and the safest policy use both.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from . import validation
from .transition_set import TransitionSet


class CMDP(NamedTuple):
  """A tabular finite-horizon CMDP (paper, Section 2). Costs are minimised.

  Constraint `i` is `V^pi(d_i, p) <= alpha_i`. A batch of CMDPs is a `CMDP` whose fields
  share leading axes; sizes are always read from the trailing axes.

  Two layouts of the transitions:

  - dense (`next_states=None`, the default): `transitions[h, s, a, s'] = p_h(s'|s,a)`,
    `[H, S, A, S]`;
  - sparse: at most `N` possible next states per `(h, s, a)`: `next_states[h, s, a, n]` is
    the next state of slot `n` (-1: an empty slot) and `transitions[h, s, a, n]` its
    probability (0 in empty slots), both `[H, S, A, N]`. A row names each next state
    at most once (`merge_repeated_next_states` merges repeats). Every kernel then works
    in `S A N` per step instead of `S A S` (`to_sparse`, `to_dense` convert; the
    `Setting.support` of an agent takes the same `next_states`).
  """

  transitions: jax.Array  # [H, S, A, S'] p_h(s'|s,a) (or [H, S, A, N] slots, sparse)
  cost: jax.Array  # [H, S, A] expected objective cost c_h(s,a) in [0, 1]
  constraint_costs: jax.Array  # [I, H, S, A] expected constraint costs d_{i,h}(s,a) in [0, 1]
  thresholds: jax.Array  # [I] alpha_i in [0, H]
  initial_state: jax.Array  # [] int, s_1
  next_states: jax.Array | None = None  # [H, S, A, N] int32 (sparse layout), -1 empty; None
  #                                       in the dense layout

  @property
  def is_sparse(self) -> bool:
    return self.next_states is not None

  @property
  def max_next_states(self) -> int:
    """`N`: slots per row (sparse), or `S` (dense)."""
    return self.transitions.shape[-1]

  @property
  def horizon(self) -> int:
    return self.transitions.shape[-4]

  @property
  def num_states(self) -> int:
    return self.transitions.shape[-3]

  @property
  def num_actions(self) -> int:
    return self.transitions.shape[-2]

  @property
  def num_constraints(self) -> int:
    return self.thresholds.shape[-1]

  def transition_set(self) -> TransitionSet:
    """The known kernel in its layout, a point `TransitionSet` (`lower = upper =
    transitions`)."""
    return TransitionSet.point(self.transitions, self.next_states)


# Float dtypes the runner computes in (counts, radii and sampling need >= float32).
SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _as_numpy(name: str, value) -> np.ndarray:
  try:
    return np.asarray(value)
  except Exception as e:  # pragma: no cover - exotic inputs
    raise ValueError(f"{name}: cannot be converted to an array ({e})") from e


def _check_empty_slots(ns: np.ndarray, p: np.ndarray) -> None:
  """Refuses probability in an empty slot (next state -1), naming the first."""
  if np.any((ns < 0) & (p != 0)):
    where = np.unravel_index(np.argmax((ns < 0) & (p != 0)), ns.shape)
    raise ValueError(
      f"transitions: empty slot {_at(where)} (next_states -1) has probability"
      f" {float(p[where]):.6g}; empty slots must hold 0"
    )


def _at(where) -> tuple[int, ...]:
  return tuple(int(i) for i in where)


def _check_finite(name: str, array: np.ndarray) -> None:
  if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
    raise ValueError(f"{name}: expected a real numeric array, got dtype {array.dtype}")
  if not np.all(np.isfinite(array)):
    bad = np.argwhere(~np.isfinite(array))[0]
    raise ValueError(f"{name}: contains NaN or inf (first at index {_at(bad)})")


def _check_unit_interval(name: str, array: np.ndarray) -> None:
  lo, hi = array.min(initial=0.0), array.max(initial=0.0)
  if lo < 0.0 or hi > 1.0:
    where = np.unravel_index(np.argmax((array < 0.0) | (array > 1.0)), array.shape)
    raise ValueError(
      f"{name}: costs must lie in [0, 1]; found {float(array[where]):.6g} at index {_at(where)}"
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
    raise ValueError(f"cmdp: expected an optaug_jax.CMDP, got {type(cmdp).__name__}")
  p = _as_numpy("transitions", cmdp.transitions)
  c = _as_numpy("cost", cmdp.cost)
  d = _as_numpy("constraint_costs", cmdp.constraint_costs)
  alpha = _as_numpy("thresholds", cmdp.thresholds)
  s1 = _as_numpy("initial_state", cmdp.initial_state)

  if p.ndim < 4:
    raise ValueError(f"transitions: expected rank 4 [H, S, A, S'], got shape {p.shape}")
  batch = p.shape[:-4]
  horizon, num_states, num_actions, num_next = p.shape[-4:]
  if cmdp.next_states is not None:
    _check_next_states(_as_numpy("next_states", cmdp.next_states), p, num_states)
  elif num_next != num_states:
    raise ValueError(
      f"transitions: shape {p.shape} has {num_next} next states but {num_states} states"
      " (a sparse CMDP gives next_states)"
    )
  if min(horizon, num_states, num_actions) < 1:
    raise ValueError(f"transitions: empty axis in shape {p.shape}")
  if c.shape != batch + (horizon, num_states, num_actions):
    raise ValueError(
      f"cost: expected shape {batch + (horizon, num_states, num_actions)} [H, S, A] "
      f"to match transitions {p.shape}, got {c.shape}"
    )
  if (
    d.ndim != len(batch) + 4
    or d.shape[: len(batch)] != batch
    or d.shape[-3:] != (horizon, num_states, num_actions)
  ):
    raise ValueError(
      f"constraint_costs: expected shape {batch + ('I', horizon, num_states, num_actions)}"
      f" [I, H, S, A], got {d.shape}"
    )
  num_constraints = d.shape[len(batch)]
  if num_constraints < 1:
    raise ValueError(f"constraint_costs: needs at least one constraint (I >= 1), got {d.shape}")
  if alpha.shape != batch + (num_constraints,):
    raise ValueError(
      f"thresholds: expected shape {batch + (num_constraints,)} (one per constraint),"
      f" got {alpha.shape}"
    )
  if s1.shape != batch:
    raise ValueError(f"initial_state: expected shape {batch}, got {s1.shape}")

  for name, array in [
    ("transitions", p),
    ("cost", c),
    ("constraint_costs", d),
    ("thresholds", alpha),
  ]:
    if array.dtype not in SUPPORTED_DTYPES:
      raise ValueError(
        f"{name}: dtype {array.dtype} is not supported; use float32 or float64 (integer"
        " costs cannot be sampled, and 16-bit floats round transition rows and counts)"
      )
    _check_finite(name, array)
  dtypes = {str(x.dtype) for x in (p, c, d, alpha)}
  if len(dtypes) > 1:
    raise ValueError(
      f"cmdp: transitions, cost, constraint_costs and thresholds must share"
      f" one dtype, got {sorted(dtypes)}"
    )
  if not np.issubdtype(s1.dtype, np.integer):
    if (
      not np.issubdtype(s1.dtype, np.number)
      or not np.all(np.isfinite(s1))
      or np.any(s1 != np.round(s1))
    ):
      raise ValueError(f"initial_state: expected an integer state index, got {s1.tolist()}")
  if np.any(s1 < 0) or np.any(s1 >= num_states):
    raise ValueError(
      f"initial_state: {s1.tolist()} is out of range for {num_states} states [0, {num_states})"
    )

  if p.min() < 0:  # no tolerance: a negative probability breaks sampling
    where = np.unravel_index(np.argmin(p), p.shape)
    raise ValueError(
      f"transitions: probabilities must be non-negative; found {float(p[where]):.6g}"
      f" at {_at(where)}"
    )
  row_sums = p.sum(axis=-1)
  err = np.abs(row_sums - 1.0)
  if err.max() > atol:
    where = np.unravel_index(np.argmax(err), err.shape)
    raise ValueError(
      f"transitions: rows must sum to 1 (tolerance {atol:g}); row {_at(where)}"
      f" [.., h, s, a] sums to {float(row_sums[where]):.10g}"
    )
  _check_unit_interval("cost", c)
  _check_unit_interval("constraint_costs", d)
  if alpha.min() < 0.0 or alpha.max() > horizon:
    where = np.unravel_index(np.argmax((alpha < 0.0) | (alpha > horizon)), alpha.shape)
    raise ValueError(
      f"thresholds: must lie in [0, H] = [0, {horizon}]; found {float(alpha[where]):.6g}"
      f" at {_at(where)}"
    )
  return cmdp


def _check_next_states(ns: np.ndarray, p: np.ndarray, num_states: int) -> None:
  """The sparse layout's index array: shape, integer, range, empty slots, duplicates."""
  if ns.shape != p.shape:
    raise ValueError(
      f"next_states: expected shape {p.shape} (that of transitions, [H, S, A, N]), got {ns.shape}"
    )
  if not np.issubdtype(ns.dtype, np.integer):
    raise ValueError(f"next_states: expected integer state indices, got dtype {ns.dtype}")
  if ns.size and (ns.min() < -1 or ns.max() >= num_states):
    where = np.unravel_index(np.argmax((ns < -1) | (ns >= num_states)), ns.shape)
    raise ValueError(
      f"next_states: {int(ns[where])} at {_at(where)} is not a state in"
      f" [0, {num_states}) nor -1 (an empty slot)"
    )
  _check_empty_slots(ns, p)
  dup = validation.repeated_next_state_row(ns)
  if dup is not None:
    raise ValueError(
      f"next_states: row {dup} [.., h, s, a] names a next state twice; merge the repeats"
      " (adding their probabilities) with oj.merge_repeated_next_states(next_states,"
      " transitions)"
    )


def to_sparse(cmdp: CMDP, *, max_next_states: int | None = None) -> CMDP:
  """The sparse layout of a dense CMDP (host side): the slots of row `(h, s, a)` hold its
  next states of positive probability, in increasing order, then empty slots (-1).

  Args:
    cmdp: a dense, unbatched `CMDP` (a sparse one is returned as it is).
    max_next_states: `N`; default: the largest support of a row. Smaller raises.
  """
  if cmdp.next_states is not None:
    return cmdp
  p = np.asarray(cmdp.transitions)
  if p.ndim != 4:
    raise ValueError(f"transitions: to_sparse takes one CMDP, got shape {p.shape}")
  support = p > 0
  widest = int(support.sum(-1).max())
  n = widest if max_next_states is None else int(max_next_states)
  if n < widest:
    raise ValueError(f"max_next_states: {n} slots, but a row has {widest} possible next states")
  # Stable order: positive entries first (by index), then the rest; keep the first n.
  order = np.argsort(~support, axis=-1, kind="stable")[..., :n]
  taken = np.take_along_axis(support, order, axis=-1)
  next_states = np.where(taken, order, -1).astype(np.int32)
  probs = np.where(taken, np.take_along_axis(p, order, axis=-1), 0.0).astype(p.dtype)
  return cmdp._replace(transitions=jnp.asarray(probs), next_states=jnp.asarray(next_states))


def to_dense(cmdp: CMDP) -> CMDP:
  """The dense layout of a (possibly sparse, unbatched) CMDP (host side)."""
  if cmdp.next_states is None:
    return cmdp
  # Slots with the same next state add up; empty slots (-1) go to a column that is dropped.
  values, num_states = np.asarray(cmdp.transitions), cmdp.num_states
  ns = np.broadcast_to(np.asarray(cmdp.next_states), values.shape)
  out = np.zeros(values.shape[:-1] + (num_states + 1,), values.dtype)
  flat = out.reshape(-1, num_states + 1)
  rows = np.repeat(np.arange(flat.shape[0]), values.shape[-1])
  np.add.at(flat, (rows, np.where(ns < 0, num_states, ns).reshape(-1)), values.reshape(-1))
  dense = flat.reshape(out.shape)[..., :num_states]
  return cmdp._replace(transitions=jnp.asarray(dense), next_states=None)


def merge_repeated_next_states(next_states, transitions) -> tuple[np.ndarray, np.ndarray]:
  """Host side: sparse-layout rows with each next state named once, repeats merged.

  A row of the sparse layout may not name a next state twice (`validate_cmdp` refuses it).
  Rows built from a model's outcomes often do: an inventory clipped at an empty stock, a
  move into a wall that stays in place. This adds the probabilities of the slots that
  share a next state. Each row of the result holds its distinct next states in increasing
  order (the order `to_sparse` builds, whose ties the sparse kernels break as the dense
  ones do), then empty slots (-1, probability 0), in the same `N` slots: shapes stay
  static. A next state named with probability 0 keeps its slot (it stays possible for
  an agent's support); empty input slots are dropped. A row without repeats keeps its
  (next state, probability) pairs. Vectorised over all rows; no tolerance is involved.

  Args:
    next_states: `[..., N]` int, a state or -1 (an empty slot) per slot.
    transitions: `[..., N]` probabilities of the slots (0 in empty slots), float.

  Returns:
    `(next_states [..., N] int32, transitions [..., N])` as NumPy arrays, the
    probabilities in the input's float dtype, ready for `CMDP(transitions=...,
    next_states=...)`.

  Raises:
    ValueError: shapes that differ, non-integer next states, a next state below -1, or an
      empty slot with a non-zero probability.
  """
  ns, p = np.asarray(next_states), np.asarray(transitions)
  if ns.shape != p.shape or ns.ndim < 1:
    raise ValueError(
      f"next_states: expected the shape of transitions {p.shape} ([..., N]), got {ns.shape}"
    )
  if not np.issubdtype(ns.dtype, np.integer):
    raise ValueError(f"next_states: expected integer state indices, got dtype {ns.dtype}")
  if not np.issubdtype(p.dtype, np.floating):
    p = p.astype(np.float64)
  if ns.size and ns.min() < -1:
    where = np.unravel_index(np.argmin(ns), ns.shape)
    raise ValueError(
      f"next_states: {int(ns[where])} at {_at(where)} is neither a state nor -1 (an empty slot)"
    )
  _check_empty_slots(ns, p)
  width = ns.shape[-1]
  rows = ns.reshape(-1, width).astype(np.int64)
  probs = p.reshape(rows.shape)
  # Sort each row by next state (stable: repeats stay in slot order), empty slots last.
  big = np.iinfo(np.int64).max
  order = np.argsort(np.where(rows < 0, big, rows), axis=-1, kind="stable")
  rows = np.take_along_axis(rows, order, axis=-1)
  probs = np.take_along_axis(probs, order, axis=-1)
  valid = rows >= 0
  first = valid.copy()
  first[:, 1:] &= rows[:, 1:] != rows[:, :-1]
  slot = np.cumsum(first, axis=-1) - 1  # output slot of each valid input slot
  flat = np.arange(rows.shape[0])[:, None] * width + slot
  # bincount adds in input order: a repeat's probabilities sum in slot order.
  merged = np.bincount(flat[valid], weights=probs[valid], minlength=rows.size)
  out_ns = np.full(rows.size, -1, np.int32)
  out_ns[flat[first]] = rows[first]
  return out_ns.reshape(ns.shape), merged.astype(p.dtype).reshape(ns.shape)


def check_cmdp(cmdp: CMDP, where: str) -> None:
  """The host check of an entry point (`run`, `run_sharded`, `episode_step`, `safe_policy`,
  `make_agent`): `validate_cmdp`, its message prefixed by `where`, when every field is
  concrete (under an outer `jit` or `vmap` nothing can be read: use `check=True` there);
  and a warning when float64 arrays meet a JAX without x64 (JAX would truncate them to
  float32 with only its generic warning)."""
  if not isinstance(cmdp, CMDP):
    raise ValueError(f"{where}: cmdp: expected an optaug_jax.CMDP, got {type(cmdp).__name__}")
  leaves = jax.tree.leaves(cmdp)
  if validation.traced(leaves):
    return
  try:
    validate_cmdp(cmdp)
  except ValueError as e:
    raise ValueError(f"{where}: {e}") from None
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
