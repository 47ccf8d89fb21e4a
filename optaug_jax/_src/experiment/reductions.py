"""What a chunked run keeps of its episodes: every episode's log (`FullLogs`), or running
totals, values at log-spaced episodes and the last episodes in full (`LongRun`: memory
independent of the run's length).

A reduction is fed each chunk's logs (`consume(log, done)`: `log` of shape `[seeds, n,
...]`, `done` the episodes before the chunk), gives the arrays a checkpoint holds
(`arrays()`), checks and takes back a checkpoint's arrays (`check(arrays, done)`: `None`
or why they do not fit this run; `restore(arrays)`), and gives the run's result
(`result()`). `runs.run_agent` drives one for each agent.
"""

from __future__ import annotations

import numpy as np

EPSILONS = (0.01, 0.05, 0.1)  # thresholds of the "unsafe episode" counts (worst violation > eps)


class FullLogs:
  """Every episode's `fields` of the episode log, concatenated over chunks: `[seeds, K, ...]`.

  Checkpoint arrays are named `log_<field>`."""

  def __init__(self, fields, num_seeds: int):
    self.fields = tuple(fields)
    self.num_seeds = num_seeds
    self.logs: dict[str, list] = {f: [] for f in self.fields}

  def consume(self, log, done: int) -> None:
    del done  # the logs are kept whole, in order
    for f in self.fields:
      self.logs[f] = [np.concatenate(self.logs[f] + [np.asarray(getattr(log, f))], axis=1)]

  def arrays(self) -> dict:
    return {f"log_{f}": v[0] for f, v in self.logs.items()}

  def check(self, arrays: dict, done: int) -> str | None:
    for f in self.fields:
      v = arrays.get(f"log_{f}")
      if v is None or v.shape[:2] != (self.num_seeds, done):
        shape = None if v is None else v.shape
        return f"log {f} has shape {shape}, expected ({self.num_seeds}, {done}, ...)"
    return None

  def restore(self, arrays: dict) -> None:
    self.logs = {f: [arrays[f"log_{f}"]] for f in self.fields}

  def result(self) -> dict:
    return {f: v[0] for f, v in self.logs.items()}


def log_grid(num_episodes: int, points: int) -> np.ndarray:
  """The log-spaced 1-based episodes of `trace_episodes` (K among them): the ends of windows
  that grow along the run, which the separation is measured on."""
  return np.unique(np.round(np.logspace(0, np.log10(num_episodes), points)).astype(np.int64))


def trace_episodes(num_episodes: int, points: int) -> np.ndarray:
  """`log_grid`'s episodes, with K/2 and 9K/10 (the late tail's start) always among them."""
  extra = [max(1, num_episodes // 2), max(1, (9 * num_episodes) // 10), num_episodes]
  return np.unique(np.concatenate([log_grid(num_episodes, points), extra]))


class LongRun:
  """Per seed, in float64: running totals of the regrets (`total_<f>`), their values at the
  `trace` episodes (`trace_<f>`), the episode values at the trace episodes
  (`trace_cost_value`, `trace_constraint_values`, `trace_multipliers`) and the last `tail`
  episodes in full (`tail_...`). NaN marks a trace or tail episode not reached yet.

  The regrets (`TOTALS`), with `gap = V(c) - V*` and `viol_i = V(d_i) - alpha_i`:
  strong and weak cost (`[gap]_+`, `gap`), absolute cost `|gap|`, strong and weak
  constraint (per constraint), the worst violation `max_i viol_i` and its positive part,
  the unsafe episodes (worst violation above each of `EPSILONS`), and the episodes played
  in pre-training (the baseline)."""

  TOTALS = (
    "strong_cost",
    "weak_cost",
    "absolute_cost",
    "strong_constraint",
    "weak_constraint",
    "worst_violation",
    "worst_positive_violation",
    "unsafe",
    "pretraining",
  )
  SCALARS = (
    "strong_cost",
    "weak_cost",
    "absolute_cost",
    "worst_violation",
    "worst_positive_violation",
    "pretraining",
  )  # one column per seed

  def __init__(self, num_seeds, num_episodes, trace, tail, lp_value, thresholds):
    self.trace = np.asarray(trace)
    self.num_episodes = num_episodes
    self.lp_value = lp_value
    self.thresholds = np.asarray(thresholds, np.float64)
    num_constraints, num_points = self.thresholds.shape[0], len(self.trace)
    nan = lambda *shape: np.full(shape, np.nan)
    rec = {f"total_{f}": np.zeros((num_seeds, num_constraints)) for f in self.TOTALS}
    rec.update({f"trace_{f}": nan(num_seeds, num_points, num_constraints) for f in self.TOTALS})
    rec["total_unsafe"] = np.zeros((num_seeds, len(EPSILONS)))
    rec["trace_unsafe"] = nan(num_seeds, num_points, len(EPSILONS))
    for f in self.SCALARS:
      rec[f"total_{f}"] = np.zeros((num_seeds, 1))
      rec[f"trace_{f}"] = nan(num_seeds, num_points, 1)
    rec["trace_cost_value"] = nan(num_seeds, num_points)
    rec["trace_constraint_values"] = nan(num_seeds, num_points, num_constraints)
    rec["trace_multipliers"] = nan(num_seeds, num_points, num_constraints)
    rec["tail_cost_value"] = nan(num_seeds, tail)
    rec["tail_constraint_values"] = nan(num_seeds, tail, num_constraints)
    rec["tail_multipliers"] = nan(num_seeds, tail, num_constraints)
    self.record = rec

  def consume(self, log, done: int) -> None:
    """Adds one chunk's per-episode values to the record, in place."""
    rec, trace = self.record, self.trace
    cost = np.asarray(log.cost_value, np.float64)  # [S, n]
    cons = np.asarray(log.constraint_values, np.float64)  # [S, n, I]
    gap = (cost - self.lp_value)[..., None]  # [S, n, 1]
    viol = cons - self.thresholds  # [S, n, I]
    worst = viol.max(-1)
    per_episode = {
      "strong_cost": np.maximum(gap, 0.0),
      "weak_cost": gap,
      "absolute_cost": np.abs(gap),
      "strong_constraint": np.maximum(viol, 0.0),
      "weak_constraint": viol,
      "worst_violation": worst[..., None],
      "worst_positive_violation": np.maximum(worst, 0.0)[..., None],
      "unsafe": np.stack([worst > e for e in EPSILONS], -1).astype(np.float64),
      "pretraining": np.asarray(log.pretraining, np.float64)[..., None],
    }
    n = cost.shape[1]
    in_chunk = (trace > done) & (trace <= done + n)
    idx = trace[in_chunk] - done - 1
    for f, v in per_episode.items():
      running = rec[f"total_{f}"][:, None] + np.cumsum(v, axis=1)
      rec[f"trace_{f}"][:, in_chunk] = running[:, idx]
      rec[f"total_{f}"] = running[:, -1]
    multipliers = np.asarray(log.multipliers, np.float64)
    rec["trace_cost_value"][:, in_chunk] = cost[:, idx]
    rec["trace_constraint_values"][:, in_chunk] = cons[:, idx]
    rec["trace_multipliers"][:, in_chunk] = multipliers[:, idx]
    tail = rec["tail_cost_value"].shape[1]
    first = self.num_episodes - tail  # 0-based index of the first tail episode
    lo, hi = max(first, done), done + n
    if lo < hi:
      rec["tail_cost_value"][:, lo - first : hi - first] = cost[:, lo - done : hi - done]
      rec["tail_constraint_values"][:, lo - first : hi - first] = cons[:, lo - done : hi - done]
      rec["tail_multipliers"][:, lo - first : hi - first] = multipliers[:, lo - done : hi - done]

  def arrays(self) -> dict:
    return self.record

  def check(self, arrays: dict, done: int) -> str | None:
    for key, ref in self.record.items():
      if key not in arrays or arrays[key].shape != ref.shape:
        return f"array {key} missing or of another shape"
    reached = self.trace <= done
    if (
      np.isnan(arrays["trace_cost_value"][:, reached]).any()
      or not np.isnan(arrays["trace_cost_value"][:, ~reached]).all()
    ):
      return f"its trace does not stop at episode {done}"
    return None

  def restore(self, arrays: dict) -> None:
    self.record = {k: arrays[k] for k in self.record}

  def result(self) -> dict:
    return self.record
