"""Visit counts, empirical means, confidence radii and the optimistic model (eq. (opt-c)).

Confidence radii are those of the paper's appendix "Preliminary Confidence Bounds":
empirical Bernstein for transitions, Hoeffding for costs, with

  L^p_delta = log(6 S A H K / delta),   L_delta = log(6 S A H (I + 1) K / delta).

A `Setting` (see `setting.py`) changes what is learned: known costs, counts pooled over h,
a known next-state support, and the log factors of Bura et al. (2022).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import setting as setting_lib
from .env import Trajectory


class Counts(NamedTuple):
  """Sufficient statistics of all episodes played so far."""

  visits: jax.Array  # [H, S, A] n_h(s, a)
  transitions: jax.Array  # [H, S, A, S'] n_h(s, a, s')
  cost_sums: jax.Array  # [H, S, A] sum of observed objective costs
  constraint_cost_sums: jax.Array  # [I, H, S, A] sum of observed constraint costs


class OptimisticModel(NamedTuple):
  """The optimistic CMDP of episode k (paper's eq. (opt-c))."""

  cost: jax.Array  # [H, S, A] c~_k, clipped at 0
  constraint_costs: jax.Array  # [I, H, S, A] d~_{i,k}, clipped at 0
  lower: jax.Array  # [H, S, A, S'] lower end of B^p_k, in [0, 1]
  upper: jax.Array  # [H, S, A, S'] upper end of B^p_k, in [0, 1]
  transitions: jax.Array  # [H, S, A, S'] point estimate p-bar (a fixed in-box point where unvisited)


def init_counts(
    *, num_states: int, num_actions: int, horizon: int, num_constraints: int, dtype
) -> Counts:
  """All-zero statistics, in `dtype` promoted to at least float32.

  Counts stay exact up to 2^24 visits in float32 (2^53 in float64); a 16-bit float would
  stop counting at 256 (bfloat16) or 2048 (float16), so it is never used for counts.
  """
  dtype = jnp.promote_types(dtype, jnp.float32)
  shape = (horizon, num_states, num_actions)
  return Counts(
      visits=jnp.zeros(shape, dtype),
      transitions=jnp.zeros(shape + (num_states,), dtype),
      cost_sums=jnp.zeros(shape, dtype),
      constraint_cost_sums=jnp.zeros((num_constraints,) + shape, dtype),
  )


def update_counts(counts: Counts, trajectory: Trajectory) -> Counts:
  """Adds one episode's visits, transitions and observed costs."""
  h = jnp.arange(counts.visits.shape[0])
  s, a, s_next = trajectory.states[:-1], trajectory.actions, trajectory.states[1:]
  dtype = counts.visits.dtype
  return Counts(
      visits=counts.visits.at[h, s, a].add(1.0),
      transitions=counts.transitions.at[h, s, a, s_next].add(1.0),
      cost_sums=counts.cost_sums.at[h, s, a].add(trajectory.costs.astype(dtype)),
      constraint_cost_sums=counts.constraint_cost_sums.at[:, h, s, a].add(
          trajectory.constraint_costs.astype(dtype)),
  )


def log_factors(
    *, num_states: int, num_actions: int, horizon: int, num_constraints: int,
    num_episodes: int, delta: jax.typing.ArrayLike,
) -> tuple[jax.Array, jax.Array]:
  """`(L^p_delta, L_delta)` of the paper's confidence bounds."""
  return setting_lib.log_factors(
      setting_lib.PAPER, num_states=num_states, num_actions=num_actions, horizon=horizon,
      num_constraints=num_constraints, num_episodes=num_episodes, delta=delta)


def pool_counts(counts: Counts) -> Counts:
  """Counts of a stationary model: every statistic summed over h, repeated at each h."""

  def pool(x, axis):
    return jnp.broadcast_to(jnp.sum(x, axis=axis, keepdims=True), x.shape)

  return Counts(visits=pool(counts.visits, 0), transitions=pool(counts.transitions, 0),
                cost_sums=pool(counts.cost_sums, 0),
                constraint_cost_sums=pool(counts.constraint_cost_sums, 1))


def empirical_means(counts: Counts):
  """`(c-bar, d-bar, p-bar)` with the paper's `n v 1` denominators."""
  n = jnp.maximum(counts.visits, 1.0)
  return (counts.cost_sums / n, counts.constraint_cost_sums / n,
          counts.transitions / n[..., None])


class EmpiricalModel(NamedTuple):
  """Point estimates and confidence radii of episode k (what the optimistic and the
  pessimistic models of every agent are built from)."""

  cost: jax.Array  # [H, S, A] c-bar (the known cost when the setting gives it)
  constraint_costs: jax.Array  # [I, H, S, A] d-bar (or known)
  transitions: jax.Array  # [H, S, A, S'] p-bar; a fixed point of the support where unvisited
  cost_radius: jax.Array  # [H, S, A] beta^c of the objective cost (0 when known)
  constraint_radius: jax.Array  # [H, S, A] beta^d of the constraint costs (0 when known)
  transition_radius: jax.Array  # [H, S, A, S'] beta^p, at most 1; 1 where unvisited; 0 off
  #                               the known support
  visits: jax.Array  # [H, S, A] the counts n the radii use (pooled over h if stationary)


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
      setting, num_states=num_states, num_actions=num_actions, horizon=horizon,
      num_constraints=num_constraints, num_episodes=num_episodes, delta=delta)
  if setting.stationary:
    counts = pool_counts(counts)
  n = jnp.maximum(counts.visits, 1.0)
  c_bar, d_bar, p_bar = empirical_means(counts)
  beta_c = bonus_scale * jnp.sqrt(log_c / n)
  n4 = n[..., None]
  beta_p = bonus_scale * (2.0 * jnp.sqrt(p_bar * (1.0 - p_bar) * log_p / n4)
                          + 14.0 * log_p / (3.0 * n4))
  visited = (counts.visits > 0)[..., None]
  beta_p = jnp.where(visited, jnp.minimum(beta_p, 1.0), 1.0)
  dtype = p_bar.dtype
  if setting.support is None:
    # A point of the box for unvisited (h, s, a): all mass on next state 0.
    default = jax.nn.one_hot(0, num_states, dtype=dtype)
  else:
    support = _known(setting.support, "support", (horizon, num_states, num_actions,
                                                  num_states), bool)
    beta_p = jnp.where(support, beta_p, 0.0)
    default = support / jnp.sum(support, axis=-1, keepdims=True).astype(dtype)
  cost_radius = constraint_radius = beta_c
  if setting.cost is not None:
    c_bar = _known(setting.cost, "cost", c_bar.shape, dtype)
    cost_radius = jnp.zeros_like(beta_c)
  if setting.constraint_costs is not None:
    d_bar = _known(setting.constraint_costs, "constraint_costs", d_bar.shape, dtype)
    constraint_radius = jnp.zeros_like(beta_c)
  return EmpiricalModel(cost=c_bar, constraint_costs=d_bar,
                        transitions=jnp.where(visited, p_bar, default), cost_radius=cost_radius,
                        constraint_radius=constraint_radius, transition_radius=beta_p,
                        visits=counts.visits)


def transition_box(est: EmpiricalModel) -> tuple[jax.Array, jax.Array]:
  """`(lower, upper)`: `[p-bar - beta^p, p-bar + beta^p]` clipped to `[0, 1]`.

  A radius of 1 (capped, or unvisited) gives the lower end exactly 0: `p-bar - 1` could
  round above 0 when XLA fuses p-bar's division into an FMA under `jit`.
  """
  radius = est.transition_radius
  lower = jnp.where(radius >= 1.0, 0.0, jnp.clip(est.transitions - radius, 0.0, 1.0))
  return lower, jnp.clip(est.transitions + radius, 0.0, 1.0)


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
  est = empirical_model(counts, num_episodes=num_episodes, delta=delta,
                        bonus_scale=bonus_scale, setting=setting)
  lower, upper = transition_box(est)
  return OptimisticModel(
      cost=jnp.maximum(est.cost - est.cost_radius, 0.0),
      constraint_costs=jnp.maximum(est.constraint_costs - est.constraint_radius, 0.0),
      lower=lower,
      upper=upper,
      transitions=est.transitions,
  )


def _known(value, name: str, shape: tuple[int, ...], dtype) -> jax.Array:
  """A known array of `shape`, or of `shape` without its step axis (repeated over h)."""
  value = jnp.asarray(value)
  step_axis = len(shape) - 3 if name != "support" else len(shape) - 4
  stationary_shape = shape[:step_axis] + shape[step_axis + 1:]
  if value.shape == stationary_shape:
    value = jnp.expand_dims(value, step_axis)
  elif value.shape != shape:
    raise ValueError(f"setting.{name}: expected shape {shape} or {stationary_shape} for this"
                     f" CMDP, got {value.shape}")
  return jnp.broadcast_to(value, shape).astype(dtype)
