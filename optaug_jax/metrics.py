"""Episode logs and the strong and weak regrets of the paper's Section 2."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class EpisodeLog(NamedTuple):
  """Per-episode record; `run` stacks every field over episodes (leading axis K)."""

  cost_value: jax.Array  # [] exact V^{pi_k}(c, p)
  constraint_values: jax.Array  # [I] exact V^{pi_k}(d_i, p)
  optimistic_cost_value: jax.Array  # [] V^{pi_k}(c~_k, p~_k)
  optimistic_constraint_values: jax.Array  # [I] V^{pi_k}(d~_k, p~_k)
  multipliers: jax.Array  # [I] lambda_{k+1}
  fw_gap: jax.Array  # [] Frank-Wolfe gap of the inner solve
  pretraining: jax.Array  # [] bool
  sampled_cost: jax.Array  # [] realised objective cost of the episode
  sampled_constraint_costs: jax.Array  # [I] realised constraint costs of the episode


class Regrets(NamedTuple):
  """Cumulative regrets `[..., K]` (the value at index k sums episodes 1..k+1)."""

  strong_cost: jax.Array  # sum_k [V^{pi_k}(c) - V*]_+
  weak_cost: jax.Array  # sum_k (V^{pi_k}(c) - V*)
  strong_constraint: jax.Array  # max_i sum_k [V^{pi_k}(d_i) - alpha_i]_+
  weak_constraint: jax.Array  # max_i sum_k (V^{pi_k}(d_i) - alpha_i)


def regrets(log: EpisodeLog, optimal_value: jax.typing.ArrayLike,
            thresholds: jax.typing.ArrayLike) -> Regrets:
  """Strong (positive-part) and weak (signed) cumulative regrets (paper's Section 2).

  Extra leading axes of `optimal_value` and `thresholds` line up with the log's leading
  axes FROM THE LEFT: for a log `[M CMDPs, N seeds, K]`, `optimal_value` may be `[]`, `[M]`
  or `[M, N]`, and `thresholds` `[I]`, `[M, I]` or `[M, N, I]`.

  Args:
    log: `EpisodeLog` with `cost_value [..., K]`, `constraint_values [..., K, I]`; leading
      axes (seeds, CMDPs) pass through.
    optimal_value: `V^{pi*}(c, p)`, shape a prefix of the log's leading axes.
    thresholds: `alpha`, shape (a prefix of the leading axes) + `[I]`.

  Returns:
    `Regrets`, each `[..., K]`.
  """
  lead = log.cost_value.shape[:-1]
  optimal_value = jnp.asarray(optimal_value)
  thresholds = jnp.asarray(thresholds)
  if (optimal_value.shape != lead[:optimal_value.ndim]
      or thresholds.shape[:-1] != lead[:thresholds.ndim - 1]):
    raise ValueError(
        f"optimal_value {optimal_value.shape} / thresholds {thresholds.shape}: leading axes"
        f" must be a prefix of the log's leading axes {lead}")
  pad = lambda x, n: x.reshape(x.shape + (1,) * n)
  optimal_value = pad(optimal_value, len(lead) - optimal_value.ndim + 1)
  thresholds = jnp.moveaxis(pad(thresholds, len(lead) - thresholds.ndim + 2), thresholds.ndim - 1, -1)
  cost_gap = log.cost_value - optimal_value
  violation = log.constraint_values - thresholds
  return Regrets(
      strong_cost=jnp.cumsum(jnp.maximum(cost_gap, 0.0), axis=-1),
      weak_cost=jnp.cumsum(cost_gap, axis=-1),
      strong_constraint=jnp.max(jnp.cumsum(jnp.maximum(violation, 0.0), axis=-2), axis=-1),
      weak_constraint=jnp.max(jnp.cumsum(violation, axis=-2), axis=-1),
  )
