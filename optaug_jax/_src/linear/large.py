"""A linear CMDP where a tabular agent cannot go, and its exact optimum without an LP.

`latent_factors` draws an exact linear CMDP with sparse rows (a soft state aggregation):
`d` latent factors, each with a next-state distribution `mu_{h, j}` on `m` states per step;
each pair `(s, a)` mixes `k` of them, `phi(s, a)` on the simplex with `k` nonzeros, so that

    p_h(. | s, a) = sum_j phi_j(s, a) mu_{h, j}

has at most `k m` next states (the sparse layout, `N = k m` slots) and `S`, the number of
states, enters only through the rows. The costs are linear in the features, `c = phi .
theta_c` and `d = phi . theta_d` with `theta_c, theta_d ~ U(0, 1)^d` independent (in
`[0, 1]`: `phi` is on the simplex), `s_1 = 0`. The baseline is the
constraint's minimiser `pi_d` (deterministic, by DP), and the threshold `alpha = V_d(pi_d)
+ fraction (V_d(pi_c) - V_d(pi_d))` lies between it and the cost minimiser's `pi_c`.

`dual_optimum` gives the optimum of a one-constraint CMDP, dense or sparse, by its
Lagrangian dual: `V* = max_{lambda >= 0} min_pi V_c(pi) + lambda (V_d(pi) - alpha)`
(strong duality: the CMDP is an LP in the occupancy). The inner minimum is one backward
DP, `O(H S A N)`, and the outer maximum of a concave function of one variable a bisection
on its supergradient `V_d(pi_lambda) - alpha`; the value is exact to `H` times the final
bracket. Where HiGHS would need `H S A` variables and `H S A N` nonzeros (4 x 10^5 and 8
x 10^6 at the defaults), this takes a few seconds; tests/test_linear.py checks it against
`oj.solve_lp` on small members of the family.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from ..cmdp import CMDP, merge_repeated_next_states
from ..cmdp_checks import validate_cmdp
from ..errors import ArgumentError
from .benchmarks import LinearBenchmark
from .model import LinearCMDP


def _greedy(cmdp: CMDP, weights):
  """`(values [H+1, S], policy [H, S] int)`: the backward DP minimising `cost + w .
  constraint_costs` (float64, the first action on ties), dense or sparse."""
  cost = np.asarray(cmdp.cost, np.float64)
  constraints = np.asarray(cmdp.constraint_costs, np.float64)
  cost = cost + np.tensordot(np.asarray(weights, np.float64), constraints, 1)
  horizon, num_states, _ = cost.shape
  kernel = np.asarray(cmdp.transitions, np.float64)
  nxt = None if cmdp.next_states is None else np.asarray(cmdp.next_states)
  values = np.zeros((horizon + 1, num_states))
  policy = np.zeros((horizon, num_states), np.int64)
  for h in range(horizon - 1, -1, -1):
    after = values[h + 1]
    if nxt is None:
      expected = kernel[h] @ after
    else:
      expected = np.sum(kernel[h] * np.where(nxt[h] >= 0, after[np.maximum(nxt[h], 0)], 0.0), -1)
    q = cost[h] + expected
    policy[h] = np.argmin(q, axis=-1)
    values[h] = np.take_along_axis(q, policy[h][:, None], -1)[:, 0]
  return values, policy


def _evaluate(cmdp: CMDP, policy, costs) -> float:
  """`V^pi(s_1)` of the deterministic `policy [H, S]` for `costs [H, S, A]` (float64)."""
  horizon, num_states = policy.shape
  kernel = np.asarray(cmdp.transitions, np.float64)
  nxt = None if cmdp.next_states is None else np.asarray(cmdp.next_states)
  rows = np.arange(num_states)
  v = np.zeros(num_states)
  for h in range(horizon - 1, -1, -1):
    p = kernel[h][rows, policy[h]]
    if nxt is None:
      expected = p @ v
    else:
      slots = nxt[h][rows, policy[h]]
      expected = np.sum(p * np.where(slots >= 0, v[np.maximum(slots, 0)], 0.0), -1)
    v = costs[h][rows, policy[h]] + expected
  return float(v[int(cmdp.initial_state)])


class DualOptimum(NamedTuple):
  """The optimum of a one-constraint CMDP by its Lagrangian dual (`dual_optimum`)."""

  value: float  # V*, exact to `H * bracket`
  multiplier: float  # lambda*, within `bracket`
  bracket: float  # the bisection's final width
  binds: bool  # whether the constraint binds (lambda* > 0)


def dual_optimum(cmdp: CMDP, *, tol: float = 1e-10, max_iters: int = 200) -> DualOptimum:
  """The optimum of a CMDP with one constraint, dense or sparse, by bisection on the
  Lagrangian dual's supergradient (module docstring); `tol`: the final bracket on
  `lambda`. Raises `ValueError` for several constraints or a threshold no policy meets
  with room to spare (no strictly feasible policy: the dual is unbounded)."""
  validate_cmdp(cmdp)
  d = np.asarray(cmdp.constraint_costs, np.float64)
  if d.shape[0] != 1:
    raise ArgumentError("cmdp", f"dual_optimum takes one constraint, got {d.shape[0]}")
  alpha = float(np.asarray(cmdp.thresholds, np.float64)[0])
  horizon = d.shape[1]
  s1 = int(cmdp.initial_state)
  least = _greedy(cmdp._replace(cost=jnp.zeros_like(cmdp.cost)), [1.0])[0][0, s1]
  if not least < alpha:
    raise ArgumentError(
      "cmdp", f"the least constraint value {least:.6g} is not below the threshold {alpha:.6g}"
    )

  def dual(lam):
    values, policy = _greedy(cmdp, [lam])
    return values[0, s1] - lam * alpha, _evaluate(cmdp, policy, d[0]) - alpha

  g0, slope0 = dual(0.0)
  if slope0 <= 0:  # the unconstrained optimum is feasible
    return DualOptimum(value=float(g0), multiplier=0.0, bracket=0.0, binds=False)
  # lambda* <= (V_c(pi_d) - V*) / (alpha - V_d(pi_d)) <= H / slack.
  lo, hi = 0.0, horizon / (alpha - least)
  best = g0
  for _ in range(max_iters):
    if hi - lo <= tol * max(1.0, hi):
      break
    mid = 0.5 * (lo + hi)
    g, slope = dual(mid)
    best = max(best, g)
    lo, hi = (mid, hi) if slope > 0 else (lo, mid)
  g_hi, _ = dual(hi)
  best = max(best, g_hi)
  return DualOptimum(value=float(best), multiplier=0.5 * (lo + hi), bracket=hi - lo, binds=True)


def latent_factors(
  seed: int = 0,
  *,
  num_states: int = 10_000,
  num_actions: int = 4,
  num_features: int = 10,
  horizon: int = 10,
  mixed: int = 2,
  support: int = 10,
  fraction: float = 0.5,
  dtype=None,
) -> LinearBenchmark:
  """The latent-factor linear CMDP of the module docstring, member `seed` (NumPy's
  `default_rng(seed)`): `mixed` factors per pair (`k`), `support` states per factor
  (`m`), the threshold at `fraction` of the way from the baseline to the cost minimiser.
  Sparse layout, `k m` slots per row; stationary features `[S, A, d]`."""
  rng = np.random.default_rng(seed)
  s, a, d, m, k = num_states, num_actions, num_features, support, mixed
  if not (1 <= k <= d and 1 <= m <= s and a >= 2 and 0 < fraction < 1):
    raise ArgumentError(
      "latent_factors",
      f"need 1 <= mixed <= num_features, 1 <= support <= num_states,"
      f" num_actions >= 2 and 0 < fraction < 1 (got {k}, {d}, {m}, {s}, {a}, {fraction})",
    )
  # mu_{h, j}: m distinct states with Dirichlet(1) weights, per step and factor.
  mu_states = np.argsort(rng.random((horizon, d, s)), axis=-1)[..., :m]
  mu_probs = rng.dirichlet(np.ones(m), size=(horizon, d))
  # phi(s, a): k distinct factors with Dirichlet(1) weights.
  factors = np.argsort(rng.random((s, a, d)), axis=-1)[..., :k]
  weights = rng.dirichlet(np.ones(k), size=(s, a))
  phi = np.zeros((s, a, d))
  np.put_along_axis(phi, factors, weights, axis=-1)
  theta_c, theta_d = rng.random(d), rng.random(d)
  next_states = mu_states[:, factors].reshape(horizon, s, a, k * m)  # [H, S, A, k m]
  probs = (weights[None, :, :, :, None] * mu_probs[:, factors]).reshape(horizon, s, a, k * m)
  cost = np.broadcast_to(phi @ theta_c, (horizon, s, a))
  constraint = np.broadcast_to(phi @ theta_d, (horizon, s, a))
  # Two factors may share a next state: one slot each, merged.
  merged_n, merged_p = merge_repeated_next_states(next_states, probs)
  host: dict[str, Any] = dict(  # NumPy fields, float64: the host DPs below read them
    transitions=merged_p,
    cost=cost,
    constraint_costs=constraint[None],
    thresholds=np.array([float(horizon)]),
    initial_state=np.asarray(0, np.int32),
    next_states=merged_n,
  )
  model64 = CMDP(**host)
  _, pi_d = _greedy(CMDP(**{**host, "cost": np.zeros_like(cost)}), [1.0])
  _, pi_c = _greedy(model64, [0.0])
  low, high = (_evaluate(model64, pi, constraint) for pi in (pi_d, pi_c))
  alpha = low + fraction * (high - low)
  dtype = dtype or jnp.float32
  cmdp = validate_cmdp(
    CMDP(
      transitions=jnp.asarray(merged_p, dtype),
      cost=jnp.asarray(cost, dtype),
      constraint_costs=jnp.asarray(constraint[None], dtype),
      thresholds=jnp.asarray([alpha], dtype),
      initial_state=jnp.asarray(0, jnp.int32),
      next_states=jnp.asarray(merged_n),
    )
  )
  policy = np.zeros((horizon, s, a), np.dtype(dtype))
  np.put_along_axis(policy, pi_d[..., None], 1.0, -1)
  model = LinearCMDP(cmdp, jnp.asarray(phi, dtype))
  return LinearBenchmark(model, policy, alpha - low, horizon - alpha)
