"""Linear CMDPs as values: a tabular CMDP (the true model, for simulation and exact
evaluation) with the features `phi(s, a)` an agent learns through.

A linear CMDP (Jin et al. 2020; Ghosh et al. 2022) has `p_h(s' | s, a) = phi(s, a) .
mu_h(s')` and costs linear in `phi`. The agents of `optaug_jax.linear` only need the
features and the costs: they estimate `P_h V` by ridge regression on `phi` and never read
the kernel. The kernel stays in the value for what an agent may not see: sampling episodes
(`oj.run` runs the `cmdp`) and the exact values and regrets of the policies played.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..cmdp import CMDP
from ..cmdp_checks import validate_cmdp
from ..errors import ArgumentError


class LinearCMDP(NamedTuple):
  """A tabular `CMDP` and its features (`[S, A, d]`, or `[H, S, A, d]` per step).

  The features need not span the kernel exactly (a misspecified linear CMDP is a CMDP with
  features); `linear_residual` says how far the kernel is from their span. Costs are the
  `cmdp`'s (known to the agents: the setting of Kitamura et al. 2025 and Ghosh et al.
  2024)."""

  cmdp: CMDP
  features: jax.Array  # [S, A, d] or [H, S, A, d]

  @property
  def num_features(self) -> int:
    return int(self.features.shape[-1])

  def step_features(self) -> jax.Array:
    """The features per step, `[H, S, A, d]` (stationary ones broadcast)."""
    horizon = self.cmdp.cost.shape[-3]
    phi = jnp.asarray(self.features)
    if phi.ndim == 3:
      phi = jnp.broadcast_to(phi, (horizon,) + phi.shape)
    return phi


def from_tabular(cmdp: CMDP, dtype=None) -> LinearCMDP:
  """`cmdp` as a linear CMDP with one-hot features `phi(s, a) = e_{(s, a)}` (`d = S A`):
  every tabular CMDP is linear in them, and ridge regression on them is the empirical
  kernel shrunk towards 0 (the tabular case of the linear agents)."""
  num_states, num_actions = cmdp.cost.shape[-2:]
  dtype = dtype or jnp.asarray(cmdp.cost).dtype
  eye = jnp.eye(num_states * num_actions, dtype=dtype)
  return LinearCMDP(cmdp, eye.reshape(num_states, num_actions, num_states * num_actions))


def validate_linear_cmdp(model: LinearCMDP) -> None:
  """Host checks with named errors: the `cmdp`'s (`oj.validate_cmdp`: rows summing to 1,
  costs in `[0, 1]`, thresholds in `[0, H]`, ...) and the features' (shape `[S, A, d]` or
  `[H, S, A, d]` matching the CMDP, finite, `d >= 1`). Raises `ValueError`."""
  if not isinstance(model, LinearCMDP):
    raise ArgumentError("model", f"expected a LinearCMDP, got {type(model).__name__}")
  validate_cmdp(model.cmdp)
  phi = np.asarray(model.features)
  horizon, num_states, num_actions = np.shape(model.cmdp.cost)[-3:]
  if phi.ndim not in (3, 4):
    raise ArgumentError("features", f"expected [S, A, d] or [H, S, A, d], got shape {phi.shape}")
  want = (num_states, num_actions) if phi.ndim == 3 else (horizon, num_states, num_actions)
  if phi.shape[:-1] != want or phi.shape[-1] < 1:
    raise ArgumentError(
      "features",
      f"shape {phi.shape} does not match the CMDP"
      f" ({'H, ' if phi.ndim == 4 else ''}S, A = {', '.join(map(str, want))}; d >= 1)",
    )
  if not np.all(np.isfinite(phi)):
    bad = np.argwhere(~np.isfinite(phi))[0]
    raise ArgumentError("features", f"not finite at index {tuple(int(i) for i in bad)}")


def linear_residual(model: LinearCMDP) -> float:
  """How far the kernel is from the features' span: the largest over `(h, s')` of the
  least-squares residual `|| P_h(s' | ., .) - phi w ||_inf` (0 for an exact linear CMDP,
  up to rounding). Dense kernels only; computed on the host in float64."""
  model.cmdp.layout.require_dense(
    "linear_residual", "dense transitions only (oj.to_dense converts)"
  )
  kernel = np.asarray(model.cmdp.transitions, np.float64)  # [H, S, A, S']
  phi = np.asarray(model.step_features(), np.float64)  # [H, S, A, d]
  worst = 0.0
  for h in range(kernel.shape[0]):
    x = phi[h].reshape(-1, phi.shape[-1])
    y = kernel[h].reshape(x.shape[0], -1)
    w, *_ = np.linalg.lstsq(x, y, rcond=None)
    worst = max(worst, float(np.max(np.abs(x @ w - y))))
  return worst
