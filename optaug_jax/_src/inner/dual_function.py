"""The Fenchel dual of the inner problem, on which the exact solver works.

Write eq. (step1) as `f(q) = c.q + g(Dq)` with `g(y) = ||[lambda + eta (y - alpha)]_+||^2 /
(2 eta)`. Then `min_Z f = max_{mu >= 0} psi(mu)` with

    psi(mu) = Phi(mu) - mu.alpha - (||mu - lambda||^2 - ||lambda||^2) / (2 eta),
    Phi(mu) = min_{q in Z} (c + D^T mu).q          (one extended DP),

strongly concave (modulus `1/eta`), and its maximiser is `mu* = lambda_{k+1}`: each OptAug
episode is one proximal-point step on the optimistic dual function. `psi(mu) <= f*` for
every `mu >= 0` (weak duality), so the best `psi` queried certifies any primal point.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import numerics


def dual_value(mu, phi, thresholds, multipliers, eta) -> jax.Array:
  """`psi(mu)` given `Phi(mu) = phi` (the extended DP's value at the costs `c + D^T mu`)."""
  return phi - numerics.dot(mu, thresholds) - numerics.dot(mu, mu - 2.0 * multipliers) / (2.0 * eta)


# The relative gap (the model's or master's bound on the dual maximum - the best dual value
# queried, over `1 + |bound|`) at which the exact solves stop: in float64 1e-12; in float32
# half of what a certificate must prove (`problem.certified_tolerance`, 1e-4) for I >= 2,
# float32 rounding the gap at ~1e-6 of the objective, and a tenth of that for I = 1.
# Measured for I >= 2 on a 60-state random CMDP (docs/results/episode_cost "Several
# constraints": a stop at a tenth of the certificate's tolerance took 14.8 DPs, at half
# 8.6). For I = 1 a stop at 5e-5 moved media_streaming's constraint regret beyond its seed
# noise (twice, on two sets of 32 seeds); 5e-6 did not (docs/results/statistics).
STOP_RTOL = 1e-12
FLOAT32_STOP_RTOL = 5e-5
FLOAT32_SEARCH_STOP_RTOL = 5e-6


def stop_tolerance(dtype, tol: float | None, num_constraints: int) -> float:
  """The relative gap at which a solve with the user's `tol` stops (`exact(tol=)`): the
  larger of `tol` and the dtype's floor (`STOP_RTOL`; in float32 `FLOAT32_STOP_RTOL`, or
  `FLOAT32_SEARCH_STOP_RTOL` for the I = 1 search)."""
  if jnp.finfo(dtype).bits >= 64:
    floor = STOP_RTOL
  else:
    floor = FLOAT32_SEARCH_STOP_RTOL if num_constraints == 1 else FLOAT32_STOP_RTOL
  return floor if tol is None else max(floor, tol)


def default_num_iters(dtype, num_constraints: int) -> int:
  """Search steps (I = 1) or cutting planes (I >= 2) that reach the dtype's accuracy."""
  if num_constraints == 1:
    return 58 if jnp.finfo(dtype).bits >= 64 else 30
  return 80 if jnp.finfo(dtype).bits >= 64 else 50


# DPs of an exact solve outside its loop's budget, I = 1 and I >= 2: the search's bracket
# ends (I = 1: 2); the first DP (at `lambda`, or at the warm hint's master), and, for a
# loop out of cuts, the final master's mu and the recovered point's dual step (I >= 2: 3);
# and in both the one `solve_inner` adds at the solution for the envelope (and, without
# the solver's last DP, the greedy fallback's).
DP_CALLS_OUTSIDE_BUDGET = (3, 4)


def max_dp_calls(dtype, num_constraints: int, num_iters: int | None = None) -> int:
  """The most extended DPs one `solve_inner` with `exact(num_iters)` makes (what an agent's
  `PlanInfo.extras["dp_calls"]` can reach): the loop's budget (`num_iters`, default
  `default_num_iters`) plus `DP_CALLS_OUTSIDE_BUDGET`: 84 in float64 and 54 in float32 for
  I >= 2, 61 and 33 for I = 1. A solve that stops on its proof pays far fewer (see
  `exact`)."""
  budget = default_num_iters(dtype, num_constraints) if num_iters is None else num_iters
  return int(budget) + DP_CALLS_OUTSIDE_BUDGET[num_constraints >= 2]
