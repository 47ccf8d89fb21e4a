"""The fits of a cumulative regret `R(t) = a + b sqrt(t) + c t`, and what they say in words.

A fit starts after pre-training (the baseline's episodes, where the regret of a safe agent
is flat and its kink reads as growth) and at K/100 at the earliest; its verdict says
"linear", "sublinear", "bending" or "undetermined" (a run too short to tell the linear
term from the bending one: the fit spans less than `MIN_FIT_SPAN` in episodes). Used by
`headline.py`'s summaries, table and figures.
"""

from __future__ import annotations

import numpy as np

# A fit must span this factor in episodes (K over its first episode) to tell c t from b sqrt(t).
MIN_FIT_SPAN = 20
# A linear part `c (K - t0)` below this share of the fitted growth is the least squares'
# rounding, not a term: on a curve with no linear term (`10 sqrt(t)`) `c` comes out at
# +-1e-16, its sign set by the BLAS kernel the CPU selects, and read as a sign it made the
# verdict "bending" on one machine and "sublinear" on another. Float64 rounding times the
# basis' condition number (columns 1, sqrt(t), t over five orders) is far below it, and a
# real linear term far above it.
ROUNDING_SHARE = 1e-8


def fit_regret(curves, trace, num_episodes, rng, pretraining: int = 0):
  """Least squares R(t) = a + b sqrt(t) + c t on the seed mean from the first trace episode
  after `max(K/100, pretraining)`; bootstrap interval of c; a verdict (`fit_verdict`)."""
  use = trace >= max(1, num_episodes // 100, pretraining + 1)
  if use.sum() < 3:  # too few trace points after pre-training: the last three
    use = np.arange(len(trace)) >= len(trace) - 3
  t = trace[use].astype(np.float64)
  basis = np.stack([np.ones_like(t), np.sqrt(t), t], 1)

  def fit(y):
    return np.linalg.lstsq(basis, y, rcond=None)[0]

  coef = fit(curves[:, use].mean(0))
  boot = np.array(
    [fit(curves[rng.integers(0, len(curves), len(curves))][:, use].mean(0))[2] for _ in range(1000)]
  )
  out = {
    "a": float(coef[0]),
    "b": float(coef[1]),
    "c": float(coef[2]),
    "c95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
    "fit_from_episode": int(t[0]),
    "pretraining_episodes": int(pretraining),
  }
  out["verdict"], out["reading"] = fit_verdict(out, num_episodes)
  return out


def fit_verdict(fit: dict, num_episodes: int) -> tuple[str, str]:
  """What a fit `a + b sqrt(t) + c t` says, in a word and a sentence (see COLUMNS["fit"])."""
  first, (lo, hi), c = fit["fit_from_episode"], fit["c95"], fit["c"]
  span = num_episodes / max(first, 1)
  if span < MIN_FIT_SPAN:
    return "undetermined", (
      f"too short to tell: the fit spans episodes {first}..{num_episodes} ({span:.0f}x, less"
      f" than {MIN_FIT_SPAN}x), where c t and b sqrt(t) cannot be told apart (c = {c:.3g})"
    )
  sqrt_part = fit["b"] * (np.sqrt(num_episodes) - np.sqrt(first))
  linear_part = c * (num_episodes - first)
  share = linear_part / max(abs(linear_part) + abs(sqrt_part), 1e-12)
  if abs(share) < ROUNDING_SHARE:
    return "sublinear", f"sublinear: c = {c:.3g} is zero to rounding ({share:.1g} of the growth)"
  if lo > 0 and share >= 0.25:
    return "linear", f"grows linearly: c = {c:.3g} [{lo:.3g}, {hi:.3g}], {share:.0%} of the growth"
  if hi < 0:
    return "bending", (
      f"still bending over (c = {c:.3g} < 0 is a transient of the fit, not a regret that shrinks)"
    )
  if lo > 0:
    return "sublinear", f"mostly sublinear: a small linear part (c t is {share:.0%} of the growth)"
  return "sublinear", f"sublinear: c = {c:.3g} [{lo:.3g}, {hi:.3g}] holds 0"
