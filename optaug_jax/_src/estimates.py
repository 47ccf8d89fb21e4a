"""Visit counts, empirical means, confidence radii and the optimistic model (eq. (opt-c)).

Confidence radii are those of the paper's appendix "Preliminary Confidence Bounds":
empirical Bernstein for transitions, Hoeffding for costs, with

  L^p_delta = log(6 S A H K / delta),   L_delta = log(6 S A H (I + 1) K / delta).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

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
  sah_k = float(num_states * num_actions * horizon * num_episodes)
  log_p = jnp.log(6.0 * sah_k / delta)
  log_c = jnp.log(6.0 * sah_k * (num_constraints + 1) / delta)
  return log_p, log_c


def empirical_means(counts: Counts):
  """`(c-bar, d-bar, p-bar)` with the paper's `n v 1` denominators."""
  n = jnp.maximum(counts.visits, 1.0)
  return (counts.cost_sums / n, counts.constraint_cost_sums / n,
          counts.transitions / n[..., None])


def optimistic_model(
    counts: Counts,
    *,
    num_episodes: int,
    delta: jax.typing.ArrayLike,
    bonus_scale: jax.typing.ArrayLike = 1.0,
) -> OptimisticModel:
  """Optimistic costs and the transition box of episode k (paper's eq. (opt-c)).

  `beta^p = 2 sqrt(p(1-p) L^p / n) + 14 L^p / (3 n)` (Bernstein),
  `beta^c = beta^d = sqrt(L / n)` (Hoeffding), both with `n v 1` and multiplied by
  `bonus_scale` (1.0 = the paper). Costs are clipped at 0 (c >= 0, so optimism is kept);
  the box is clipped to `[0, 1]`, and for never-visited `(h, s, a)` it is the whole simplex
  (whatever `bonus_scale` is), so it is never empty.

  Args:
    counts: `Counts` of the episodes so far.
    num_episodes: `K`, the total number of episodes (enters the log factors).
    delta: confidence parameter in `(0, 1)`.
    bonus_scale: multiplier of every radius.

  Returns:
    `OptimisticModel`.
  """
  num_constraints, horizon, num_states, num_actions = counts.constraint_cost_sums.shape
  log_p, log_c = log_factors(
      num_states=num_states, num_actions=num_actions, horizon=horizon,
      num_constraints=num_constraints, num_episodes=num_episodes, delta=delta)
  n = jnp.maximum(counts.visits, 1.0)
  c_bar, d_bar, p_bar = empirical_means(counts)
  beta_c = bonus_scale * jnp.sqrt(log_c / n)
  n4 = n[..., None]
  beta_p = bonus_scale * (2.0 * jnp.sqrt(p_bar * (1.0 - p_bar) * log_p / n4)
                          + 14.0 * log_p / (3.0 * n4))
  visited = (counts.visits > 0)[..., None]
  lower = jnp.where(visited, jnp.clip(p_bar - beta_p, 0.0, 1.0), 0.0)
  upper = jnp.where(visited, jnp.clip(p_bar + beta_p, 0.0, 1.0), 1.0)
  # A point of the box for unvisited (h, s, a): all mass on next state 0.
  default = jax.nn.one_hot(0, num_states, dtype=p_bar.dtype)
  transitions = jnp.where(visited, p_bar, default)
  return OptimisticModel(
      cost=jnp.maximum(c_bar - beta_c, 0.0),
      constraint_costs=jnp.maximum(d_bar - beta_c, 0.0),
      lower=lower,
      upper=upper,
      transitions=transitions,
  )
