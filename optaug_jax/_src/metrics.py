"""Episode logs and the strong and weak regrets of the paper's Section 2."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .checking import arguments
from .errors import ArgumentError
from .numerics import MAX_EPISODES, compensated_add


class EpisodeLog(NamedTuple):
  """Per-episode record; `run` stacks every field over episodes (leading axis K)."""

  cost_value: jax.Array  # [] exact V^{pi_k}(c, p)
  constraint_values: jax.Array  # [I] exact V^{pi_k}(d_i, p)
  optimistic_cost_value: jax.Array  # [] V^{pi_k}(c~_k, p~_k)
  optimistic_constraint_values: jax.Array  # [I] V^{pi_k}(d~_k, p~_k)
  multipliers: jax.Array  # [I] lambda_{k+1}
  inner_gap: jax.Array  # [] certificate of the inner solve (`InnerSolution.gap`; 0 if none)
  pretraining: jax.Array  # [] bool
  sampled_cost: jax.Array  # [] realised objective cost of the episode
  sampled_constraint_costs: jax.Array  # [I] realised constraint costs of the episode
  extras: dict = {}  # the agent's PlanInfo.extras (e.g. OptAug's "dp_calls")
  certified: jax.Array | None = None  # [] bool, the inner solve proved its accuracy
  #   (`InnerSolution.certified`; True without an inner solve); None: not recorded
  off_support_transitions: jax.Array | None = None  # [] int32, distinct (h, s, a, s')
  #   observed before this episode whose s' is outside the agent's declared support
  #   (`Setting.support`), -1 if the agent does not report it; `support_violations` names
  #   them on the host; None: not recorded


class RunSummary(NamedTuple):
  """Running totals of a run (`run(..., logs="summary")`): memory independent of K.

  Per-constraint totals are kept; the paper's constraint regrets are their max over `i`
  (`Regrets.strong_constraint[..., -1] == max_i strong_constraint[..., i]`).

  The five sums are compensated (`numerics.compensated_add`): each field is the total
  rounded to its dtype, and `compensation` holds what that rounding left out, so 10^7
  episodes in float32 keep the totals to within a few float32 roundings (a plain float32
  sum of 10^7 values 0.1 is 8.8% off). Counters are int32: `run` refuses runs beyond
  `MAX_EPISODES`, so the summaries of the chunks of one run merge without wrapping.
  """

  episodes: jax.Array  # [] int32, episodes summarised
  strong_cost: jax.Array  # [] sum_k [V^{pi_k}(c) - V*]_+
  weak_cost: jax.Array  # [] sum_k (V^{pi_k}(c) - V*)
  absolute_cost: jax.Array  # [] sum_k |V^{pi_k}(c) - V*| (Bura et al. 2022's objective regret)
  strong_constraint: jax.Array  # [I] sum_k [V^{pi_k}(d_i) - alpha_i]_+
  weak_constraint: jax.Array  # [I] sum_k (V^{pi_k}(d_i) - alpha_i)
  max_violation: jax.Array  # [I] max_k (V^{pi_k}(d_i) - alpha_i) (-inf before any episode)
  violating_episodes: jax.Array  # [I] int32, episodes with V^{pi_k}(d_i) > alpha_i
  max_inner_gap: jax.Array  # [] largest inner-solve certificate
  multipliers: jax.Array  # [I] lambda after the last episode
  uncertified_episodes: jax.Array  # [] int32, episodes whose inner solve was not certified
  off_support_transitions: jax.Array  # [] int32, the largest
  #   `EpisodeLog.off_support_transitions` (-1: not reported; `support_violations` names them)
  compensation: jax.Array  # [3 + 2 I] low-order parts of (strong_cost, weak_cost,
  #   absolute_cost, strong_constraint[I], weak_constraint[I])

  @classmethod
  def zeros(cls, num_constraints: int, dtype) -> RunSummary:
    """The summary of no episode."""
    zero, vec = jnp.zeros((), dtype), jnp.zeros((num_constraints,), dtype)
    return cls(
      episodes=jnp.zeros((), jnp.int32),
      strong_cost=zero,
      weak_cost=zero,
      absolute_cost=zero,
      strong_constraint=vec,
      weak_constraint=vec,
      max_violation=jnp.full((num_constraints,), -jnp.inf, dtype),
      violating_episodes=jnp.zeros((num_constraints,), jnp.int32),
      max_inner_gap=zero,
      multipliers=vec,
      uncertified_episodes=jnp.zeros((), jnp.int32),
      off_support_transitions=jnp.full((), -1, jnp.int32),
      compensation=jnp.zeros((3 + 2 * num_constraints,), dtype),
    )

  def _sums(self) -> jax.Array:
    return jnp.concatenate(
      [
        jnp.stack([self.strong_cost, self.weak_cost, self.absolute_cost], axis=-1),
        self.strong_constraint,
        self.weak_constraint,
      ],
      axis=-1,
    )

  def merge(self, later: RunSummary) -> RunSummary:
    """The summary of this run followed by `later` (its continuation).

    The sums are added with their compensations. When both episode counts are concrete
    (outside `jit`), a total beyond `MAX_EPISODES` raises `ValueError`: the summaries of one
    run's chunks never get there (`run` refuses), others should not be merged.
    """
    if not arguments.traced(self.episodes, later.episodes):
      total = np.asarray(self.episodes, np.int64) + np.asarray(later.episodes, np.int64)
      if np.any(total > MAX_EPISODES):
        raise ArgumentError(
          "RunSummary.merge",
          f"{int(np.max(total))} episodes exceed"
          f" MAX_EPISODES = {MAX_EPISODES} (2^31 - 1), what the int32 counters"
          " hold; merge the chunks of one run only",
        )
    sums, compensation = compensated_add(
      self._sums(), self.compensation, later._sums(), later.compensation
    )
    num_constraints = self.strong_constraint.shape[-1]
    strong_constraint = sums[..., 3 : 3 + num_constraints]
    weak_constraint = sums[..., 3 + num_constraints :]
    return RunSummary(
      episodes=self.episodes + later.episodes,
      strong_cost=sums[..., 0],
      weak_cost=sums[..., 1],
      absolute_cost=sums[..., 2],
      strong_constraint=strong_constraint,
      weak_constraint=weak_constraint,
      max_violation=jnp.maximum(self.max_violation, later.max_violation),
      violating_episodes=self.violating_episodes + later.violating_episodes,
      max_inner_gap=jnp.maximum(self.max_inner_gap, later.max_inner_gap),
      multipliers=later.multipliers,
      uncertified_episodes=self.uncertified_episodes + later.uncertified_episodes,
      off_support_transitions=jnp.maximum(
        self.off_support_transitions, later.off_support_transitions
      ),
      compensation=compensation,
    )


def summarize_episode(log: EpisodeLog, optimal_value, thresholds) -> RunSummary:
  """The `RunSummary` of one (unbatched) episode log."""
  dtype = log.cost_value.dtype
  cost_gap = log.cost_value - jnp.asarray(optimal_value, dtype)
  violation = log.constraint_values - jnp.asarray(thresholds, dtype)
  certified = True if log.certified is None else log.certified
  off_support = -1 if log.off_support_transitions is None else log.off_support_transitions
  return RunSummary(
    episodes=jnp.ones((), jnp.int32),
    strong_cost=jnp.maximum(cost_gap, 0.0),
    weak_cost=cost_gap,
    absolute_cost=jnp.abs(cost_gap),
    strong_constraint=jnp.maximum(violation, 0.0),
    weak_constraint=violation,
    max_violation=violation,
    violating_episodes=(violation > 0).astype(jnp.int32),
    max_inner_gap=log.inner_gap,
    multipliers=log.multipliers,
    uncertified_episodes=(~jnp.asarray(certified, bool)).astype(jnp.int32),
    off_support_transitions=jnp.asarray(off_support, jnp.int32),
    compensation=jnp.zeros((3 + 2 * violation.shape[-1],), dtype),
  )


class Regrets(NamedTuple):
  """Cumulative regrets `[..., K]` (the value at index k sums episodes 1..k+1)."""

  strong_cost: jax.Array  # sum_k [V^{pi_k}(c) - V*]_+
  weak_cost: jax.Array  # sum_k (V^{pi_k}(c) - V*)
  strong_constraint: jax.Array  # max_i sum_k [V^{pi_k}(d_i) - alpha_i]_+
  weak_constraint: jax.Array  # max_i sum_k (V^{pi_k}(d_i) - alpha_i)
  absolute_cost: jax.Array  # sum_k |V^{pi_k}(c) - V*| (the objective regret of Bura et al.
  #   2022, DOPE: it counts cost below V* too, which a constraint violation can buy)


def regrets(
  log: EpisodeLog, optimal_value: jax.typing.ArrayLike, thresholds: jax.typing.ArrayLike
) -> Regrets:
  """Strong (positive-part) and weak (signed) cumulative regrets (paper's Section 2), and
  the absolute objective regret `sum_k |V^{pi_k}(c) - V*|` of Bura et al. (2022).

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
  num_constraints = log.constraint_values.shape[-1]
  if thresholds.ndim == 0 or thresholds.shape[-1] != num_constraints:
    raise ArgumentError(
      "thresholds",
      f"expected {num_constraints} threshold(s) on the last axis, one per"
      f" constraint of the log (constraint_values {log.constraint_values.shape}), got shape"
      f" {thresholds.shape}",
    )
  if (
    optimal_value.shape != lead[: optimal_value.ndim]
    or thresholds.shape[:-1] != lead[: thresholds.ndim - 1]
  ):
    raise ValueError(
      f"optimal_value {optimal_value.shape} / thresholds {thresholds.shape}: leading axes"
      f" must be a prefix of the log's leading axes {lead}"
    )
  pad = lambda x, n: x.reshape(x.shape + (1,) * n)
  optimal_value = pad(optimal_value, len(lead) - optimal_value.ndim + 1)
  thresholds = jnp.moveaxis(
    pad(thresholds, len(lead) - thresholds.ndim + 2), thresholds.ndim - 1, -1
  )
  cost_gap = log.cost_value - optimal_value
  violation = log.constraint_values - thresholds
  return Regrets(
    strong_cost=jnp.cumsum(jnp.maximum(cost_gap, 0.0), axis=-1),
    weak_cost=jnp.cumsum(cost_gap, axis=-1),
    strong_constraint=jnp.max(jnp.cumsum(jnp.maximum(violation, 0.0), axis=-2), axis=-1),
    weak_constraint=jnp.max(jnp.cumsum(violation, axis=-2), axis=-1),
    absolute_cost=jnp.cumsum(jnp.abs(cost_gap), axis=-1),
  )
