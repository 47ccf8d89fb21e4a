"""Visit counts, empirical means, confidence radii and the optimistic model (eq. (opt-c)).

Confidence radii are those of the paper's appendix "Preliminary Confidence Bounds":
empirical Bernstein for transitions, Hoeffding for costs, with

  L^p_delta = log(6 S A H K / delta),   L_delta = log(6 S A H (I + 1) K / delta).

A `Setting` (see `setting.py`) changes what is learned: known costs, counts pooled over h,
a known next-state support, and the log factors of Bura et al. (2022).

Why one file: the counts, the compensated sums that keep them exact at
any length, the empirical model and the optimistic model are one data flow (counts ->
means and radii -> the box of eq. (opt-c)) whose layouts (dense, sparse slots, pooled
over h) must agree at every stage; splitting it would put each layout rule in several
files.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np

from . import box, layouts
from . import setting as setting_lib
from .checking.arguments import known_array
from .env import Trajectory
from .numerics import MAX_EPISODES, compensated_add
from .transition_set import TransitionSet


class Counts(NamedTuple):
  """Sufficient statistics of all episodes played so far.

  Visits and transitions are integers (int32: exact up to `MAX_EPISODES`; an update at that
  value saturates instead of wrapping). Cost sums are compensated float sums: `cost_sums` is
  the running total rounded to the float dtype and `cost_compensation` what that rounding
  left out (`cost_sums + cost_compensation` is the sum to about twice the float precision),
  so the empirical mean `cost_sums / n` keeps full precision however many visits there are.
  Counts built without the compensation fields (`None`) accumulate plainly.
  """

  visits: jax.Array  # [H, S, A] int32 n_h(s, a)
  transitions: jax.Array  # [H, S, A, S'] int32 n_h(s, a, s'): [H, S, A, N] slots in the
  #   sparse layout; a step axis of length 1 when pooled over h (stationary settings)
  cost_sums: jax.Array  # [H, S, A] float, sum of observed objective costs
  constraint_cost_sums: jax.Array  # [I, H, S, A] float, sum of observed constraint costs
  cost_compensation: jax.Array | None = None  # [H, S, A] low-order part of cost_sums
  constraint_cost_compensation: jax.Array | None = None  # [I, H, S, A] same, constraints
  off_support: jax.Array | None = None  # [] int32, observed transitions whose next state
  #   has no slot in the sparse layout (saturating); None in the dense layout


class OptimisticModel(NamedTuple):
  """The optimistic CMDP of episode k (paper's eq. (opt-c))."""

  cost: jax.Array  # [H, S, A] c~_k, clipped at 0
  constraint_costs: jax.Array  # [I, H, S, A] d~_{i,k}, clipped at 0
  lower: jax.Array  # [H, S, A, S'] lower end of B^p_k, in [0, 1]
  upper: jax.Array  # [H, S, A, S'] upper end of B^p_k, in [0, 1]
  transitions: jax.Array  # [H, S, A, S'] point estimate p-bar (a fixed in-box point where
  #                         unvisited)
  off_support_transitions: jax.typing.ArrayLike = np.int32(0)  # [] int32, observed
  #   (h, s, a, s') outside the setting's support (see `EmpiricalModel`)
  next_states: jax.Array | None = None  # [H or 1, S, A, N] int32: the sparse layout of
  #   lower, upper and transitions (None: dense). Their step axis is 1 when pooled.

  def transition_set(self, fill: str = box.DEFAULT_FILL) -> TransitionSet:
    """The confidence box `B^p_k` as a `TransitionSet` (with the dense layout's `fill`)."""
    return TransitionSet(self.lower, self.upper, self.next_states, fill)


def init_counts(
  *,
  num_states: int,
  num_actions: int,
  horizon: int,
  num_constraints: int,
  dtype,
  num_next_states: int | None = None,
  pooled: bool = False,
) -> Counts:
  """All-zero statistics: int32 visits and transitions, cost sums (and their compensation)
  in `dtype` promoted to at least float32 (a 16-bit float would round the sums coarsely).

  `num_next_states`: `N` slots per row (the sparse layout; `None`: `S`, dense). `pooled`:
  transition counts summed over h as they arrive (`[1, S, A, .]`, stationary settings).
  """
  dtype = jnp.promote_types(dtype, jnp.float32)
  shape = (horizon, num_states, num_actions)
  width = num_states if num_next_states is None else num_next_states
  return Counts(
    visits=jnp.zeros(shape, jnp.int32),
    transitions=jnp.zeros((1 if pooled else horizon, num_states, num_actions, width), jnp.int32),
    cost_sums=jnp.zeros(shape, dtype),
    constraint_cost_sums=jnp.zeros((num_constraints,) + shape, dtype),
    cost_compensation=jnp.zeros(shape, dtype),
    constraint_cost_compensation=jnp.zeros((num_constraints,) + shape, dtype),
    off_support=None if num_next_states is None else jnp.zeros((), jnp.int32),
  )


def _saturating_increment(counts: jax.Array, index, valid=True) -> jax.Array:
  """`counts.at[index].add(1)` (where `valid`; distinct indices), but an int32 entry at
  `MAX_EPISODES` stays there (no wrap)."""
  if not jnp.issubdtype(counts.dtype, jnp.integer):
    return counts.at[index].add(jnp.asarray(valid, counts.dtype))
  current = counts[index]
  return counts.at[index].set(current + ((current < MAX_EPISODES) & valid).astype(counts.dtype))


def _saturating_add_at(counts: jax.Array, index, valid) -> jax.Array:
  """Adds 1 at every `index` (repeats add up) where `valid`, saturating at `MAX_EPISODES`.

  For pooled counts, where the steps of one episode may hit the same entry: the sum is
  taken whole and compared with the old counts (an int32 wrap makes it smaller).
  """
  added = counts.at[index].add(valid.astype(counts.dtype))
  return jnp.where(added < counts, jnp.asarray(MAX_EPISODES, counts.dtype), added)


def update_counts(
  counts: Counts, trajectory: Trajectory, next_states: jax.Array | None = None
) -> Counts:
  """Adds one episode's visits, transitions and observed costs.

  Integer counts are exact up to `MAX_EPISODES` (and saturate there); cost sums are
  compensated (`compensated_add`) when `counts` has compensation fields.

  `next_states`: the sparse layout's `[H or 1, S, A, N]` next states of the slots (`None`:
  dense): an observed `s'` is counted in its slot; one without a slot adds to
  `counts.off_support`. Transition counts with a step axis of length 1 are pooled over h.
  """
  h = jnp.arange(counts.visits.shape[0])
  s, a, s_next = trajectory.states[:-1], trajectory.actions, trajectory.states[1:]
  pooled = counts.transitions.shape[0] == 1 and h.shape[0] > 1
  t_h = jnp.zeros_like(h) if pooled else h
  layout = layouts.of(next_states)
  found, column = layout.count_slot(h, s, a, s_next)
  off_support = layout.count_off_support(counts.off_support, found)
  if pooled:
    transitions = _saturating_add_at(counts.transitions, (t_h, s, a, column), found)
  else:
    transitions = _saturating_increment(counts.transitions, (h, s, a, column), found)
  dtype = counts.cost_sums.dtype
  costs = trajectory.costs.astype(dtype)
  constraint_costs = trajectory.constraint_costs.astype(dtype)
  if counts.cost_compensation is None or counts.constraint_cost_compensation is None:
    cost_sums = counts.cost_sums.at[h, s, a].add(costs)
    constraint_cost_sums = counts.constraint_cost_sums.at[:, h, s, a].add(constraint_costs)
    cost_compensation = counts.cost_compensation
    constraint_cost_compensation = counts.constraint_cost_compensation
  else:
    # One entry per step h: the H indices are distinct, so gather, add and scatter back.
    total, comp = compensated_add(
      counts.cost_sums[h, s, a], counts.cost_compensation[h, s, a], costs
    )
    cost_sums = counts.cost_sums.at[h, s, a].set(total)
    cost_compensation = counts.cost_compensation.at[h, s, a].set(comp)
    total, comp = compensated_add(
      counts.constraint_cost_sums[:, h, s, a],
      counts.constraint_cost_compensation[:, h, s, a],
      constraint_costs,
    )
    constraint_cost_sums = counts.constraint_cost_sums.at[:, h, s, a].set(total)
    constraint_cost_compensation = counts.constraint_cost_compensation.at[:, h, s, a].set(comp)
  return Counts(
    visits=_saturating_increment(counts.visits, (h, s, a)),
    transitions=transitions,
    cost_sums=cost_sums,
    constraint_cost_sums=constraint_cost_sums,
    cost_compensation=cost_compensation,
    constraint_cost_compensation=constraint_cost_compensation,
    off_support=off_support,
  )


def pool_counts(counts: Counts) -> Counts:
  """Counts of a stationary model: every statistic summed over h, repeated at each h.

  The pooled visits and transitions are in the float dtype of the cost sums: a sum over h
  can exceed int32 (up to `H * MAX_EPISODES`), and the float sum cannot overflow (it is exact
  below 2^24 in float32, 2^53 in float64, and within rounding above). The pooled cost sums
  include their compensation; the returned compensation is zero.
  """
  dtype = counts.cost_sums.dtype

  def pool(x, axis):
    return jnp.broadcast_to(jnp.sum(x.astype(dtype), axis=axis, keepdims=True), x.shape)

  cost_sums, constraint_cost_sums = pool(counts.cost_sums, 0), pool(counts.constraint_cost_sums, 1)
  # Transition counts kept pooled (`init_counts(pooled=True)`) stay `[1, S, A, .]`.
  transitions = (
    counts.transitions.astype(dtype)
    if counts.transitions.shape[0] == 1
    else pool(counts.transitions, 0)
  )
  cost_compensation = counts.cost_compensation
  constraint_cost_compensation = counts.constraint_cost_compensation
  if cost_compensation is not None:
    cost_sums = cost_sums + pool(cost_compensation, 0)
    cost_compensation = jnp.zeros_like(cost_compensation)
  if constraint_cost_compensation is not None:
    constraint_cost_sums = constraint_cost_sums + pool(constraint_cost_compensation, 1)
    constraint_cost_compensation = jnp.zeros_like(constraint_cost_compensation)
  return Counts(
    visits=pool(counts.visits, 0),
    transitions=transitions,
    cost_sums=cost_sums,
    constraint_cost_sums=constraint_cost_sums,
    cost_compensation=cost_compensation,
    constraint_cost_compensation=constraint_cost_compensation,
    off_support=counts.off_support,
  )


def empirical_means(counts: Counts):
  """`(c-bar, d-bar, p-bar)` with the paper's `n v 1` denominators, in the sums' float dtype.

  Integer counts are converted to that dtype before dividing (exact below 2^24 in float32,
  so the means are those of float counts bit for bit there).
  """
  dtype = counts.cost_sums.dtype
  n = jnp.maximum(counts.visits, 1).astype(dtype)
  n_p = n[: counts.transitions.shape[0]]  # pooled transition counts: every step's n is equal
  return (
    counts.cost_sums / n,
    counts.constraint_cost_sums / n,
    counts.transitions.astype(dtype) / n_p[..., None],
  )


class EmpiricalModel(NamedTuple):
  """Point estimates and confidence radii of episode k (what the optimistic and the
  pessimistic models of every agent are built from)."""

  cost: jax.Array  # [H, S, A] c-bar (the known cost when the setting gives it)
  constraint_costs: jax.Array  # [I, H, S, A] d-bar (or known)
  transitions: jax.Array  # [H, S, A, S'] p-bar; a fixed point of the support where unvisited
  cost_radius: jax.Array  # [H, S, A] beta^c of the objective cost (0 when known)
  constraint_radius: jax.Array  # [H, S, A] beta^d of the constraint costs (0 when known)
  transition_radius: jax.Array  # [H, S, A, S'] beta^p, at most 1; 1 where unvisited; 0 off
  #                               the known support (and in empty sparse slots)
  visits: jax.Array  # [H, S, A] the counts n the radii use (pooled over h if stationary), in
  #                   the float dtype
  off_support_transitions: jax.typing.ArrayLike = np.int32(0)  # [] int32, the number of distinct
  #   (h, s, a, s') observed (counted per step h, before pooling) whose s' is outside the
  #   setting's support: the data contradict the declared support there (0 without one).
  #   In the sparse layout: the number of such observations (`Counts.off_support`).
  next_states: jax.Array | None = None  # [H or 1, S, A, N] int32, the sparse layout of
  #   transitions and transition_radius (None: dense)


def empirical_model(
  counts: Counts,
  *,
  num_episodes: int,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  setting: setting_lib.Setting | None = None,
) -> EmpiricalModel:
  """Empirical means and the paper's confidence radii (arguments as `optimistic_model`).

  `beta^p = min(2 sqrt(p(1-p) L^p / n) + 14 L^p / (3 n), 1)` (Bernstein),
  `beta^c = beta^d = sqrt(L / n)` (Hoeffding), both with `n v 1` and multiplied by
  `bonus_scale`; `beta^p = 1` for a never-visited `(h, s, a)` whatever `bonus_scale` is.
  """
  setting = setting_lib.resolve(setting)
  if delta is None:
    delta = setting.resolved_delta
  num_constraints, horizon, num_states, num_actions = counts.constraint_cost_sums.shape
  log_p, log_c = setting_lib.log_factors(
    setting,
    num_states=num_states,
    num_actions=num_actions,
    horizon=horizon,
    num_constraints=num_constraints,
    num_episodes=num_episodes,
    delta=delta,
  )
  steps = counts.transitions.shape[0]  # 1: transition counts pooled as they arrived
  next_states, support, off_support = _support(setting, counts)
  if setting.stationary:
    counts = pool_counts(counts)
  n = jnp.maximum(counts.visits, 1).astype(counts.cost_sums.dtype)
  c_bar, d_bar, p_bar = empirical_means(counts)
  beta_c = bonus_scale * jnp.sqrt(log_c / n)
  n4 = n[:steps, ..., None]  # the transition counts' n ([1, S, A, 1] when pooled)
  # p(1 - p) at 0 from below: a device whose division rounds n/n above 1 (XLA:GPU in
  # float32) would otherwise take the square root of a negative number (a NaN box).
  variance = jnp.maximum(p_bar * (1.0 - p_bar), 0.0)
  beta_p = bonus_scale * (2.0 * jnp.sqrt(variance * log_p / n4) + 14.0 * log_p / (3.0 * n4))
  visited = (counts.visits[:steps] > 0)[..., None]
  beta_p = jnp.where(visited, jnp.minimum(beta_p, 1.0), 1.0)
  dtype = p_bar.dtype
  if setting.support is None:
    # A point of the box for unvisited (h, s, a): all mass on next state 0.
    default = jax.nn.one_hot(0, num_states, dtype=dtype)
  else:
    beta_p = jnp.where(support, beta_p, 0.0)
    xp = np if isinstance(support, np.ndarray) else jnp  # a known support: on the host
    default = support / xp.sum(support, axis=-1, keepdims=True).astype(dtype)
  cost_radius = constraint_radius = cast(jax.Array, beta_c)  # a JAX array (bonus_scale * ...)
  if setting.cost is not None:
    c_bar = known_array(setting.cost, "cost", c_bar.shape, dtype)
    cost_radius = jnp.zeros_like(beta_c)
  if setting.constraint_costs is not None:
    d_bar = known_array(setting.constraint_costs, "constraint_costs", d_bar.shape, dtype)
    constraint_radius = jnp.zeros_like(beta_c)
  return EmpiricalModel(
    cost=c_bar,
    constraint_costs=d_bar,
    transitions=jnp.where(visited, p_bar, default),
    cost_radius=cost_radius,
    constraint_radius=constraint_radius,
    transition_radius=beta_p,
    visits=counts.visits.astype(dtype),
    off_support_transitions=jnp.asarray(off_support, jnp.int32),
    next_states=next_states,
  )


def _support(setting: setting_lib.Setting, counts: Counts):
  """The setting's sparse slots (`None`: dense), the declared support in the counts' layout
  (`None`: every next state) and the count of observed transitions outside it."""
  layout = setting.layout
  support, off_support = layout.declared_support(setting.support, counts)
  return layout.next_states, support, off_support


def transition_box(est: EmpiricalModel) -> tuple[jax.Array, jax.Array]:
  """`(lower, upper)`: `[p-bar - beta^p, p-bar + beta^p]` clipped to `[0, 1]`.

  A radius of 1 (capped, or unvisited) gives the lower end exactly 0: `p-bar - 1` could
  round above 0 when XLA fuses p-bar's division into an FMA under `jit`.
  """
  radius = est.transition_radius
  lower = jnp.where(radius >= 1.0, 0.0, jnp.clip(est.transitions - radius, 0.0, 1.0))
  return lower, jnp.clip(est.transitions + radius, 0.0, 1.0)


@jax.named_scope("optimistic_model")
def optimistic_model(
  counts: Counts,
  *,
  num_episodes: int,
  delta: jax.typing.ArrayLike | None = None,
  bonus_scale: jax.typing.ArrayLike = 1.0,
  setting: setting_lib.Setting | None = None,
) -> OptimisticModel:
  """Optimistic costs and the transition box of episode k (paper's eq. (opt-c)).

  `beta^p = 2 sqrt(p(1-p) L^p / n) + 14 L^p / (3 n)` (Bernstein),
  `beta^c = beta^d = sqrt(L / n)` (Hoeffding), both with `n v 1` and multiplied by
  `bonus_scale` (1.0 = the paper); see `empirical_model`. Costs are clipped at 0 (c >= 0,
  so optimism is kept); the box is clipped to `[0, 1]`, and for never-visited `(h, s, a)`
  it is the whole simplex (whatever `bonus_scale` is), so it is never empty.

  `setting` (default: the paper's) may pool the counts over h (`stationary`), replace the
  optimistic costs by known ones (no bonus), and restrict every box to a known support
  (next states outside it get upper end 0; an unvisited pair's point estimate is uniform
  over its support).

  Args:
    counts: `Counts` of the episodes so far.
    num_episodes: `K`, the total number of episodes (enters the log factors).
    delta: confidence parameter in `(0, 1)`; `None`: the setting's (`Setting.resolved_delta`,
      0.1 for the paper's).
    bonus_scale: multiplier of every radius.
    setting: a `Setting`; `None` is the paper's.

  Returns:
    `OptimisticModel`.
  """
  est = empirical_model(
    counts, num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale, setting=setting
  )
  lower, upper = transition_box(est)
  return OptimisticModel(
    cost=jnp.maximum(est.cost - est.cost_radius, 0.0),
    constraint_costs=jnp.maximum(est.constraint_costs - est.constraint_radius, 0.0),
    lower=lower,
    upper=upper,
    transitions=est.transitions,
    off_support_transitions=est.off_support_transitions,
    next_states=est.next_states,
  )
