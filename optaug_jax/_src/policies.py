"""Policies evaluated on a CMDP: exact values, the safest policy and its slack, the check of
a baseline, and `random_cmdp` (whose thresholds sit between a safe and an optimal policy's
values). Above `cmdp` (the model) and `planning` (the DPs), which import neither this
module nor each other's functions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import numerics, planning
from .checking import arguments
from .cmdp import CMDP
from .cmdp_checks import baseline_fault, check_cmdp, validate_cmdp


def policy_values(cmdp: CMDP, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Exact expected costs of `policy` in `cmdp`.

  Args:
    cmdp: an (unbatched) `CMDP`, dense or sparse.
    policy: `[H, S, A]` policy.

  Returns:
    `(cost_value, constraint_values)`: `V^pi(c, p)` (scalar) and `V^pi(d_i, p)` `[I]`.
  """
  q = planning.occupancy(cmdp.transition_set(), policy, cmdp.initial_state)
  cost_value = jnp.sum(cmdp.cost * q)
  constraint_values = numerics.einsum("ihsa,hsa->i", cmdp.constraint_costs, q)
  return cost_value, constraint_values


def safest_policy(cmdp: CMDP) -> tuple[jax.Array, jax.Array]:
  """A policy minimising the summed constraint costs, and its slack.

  The policy is the deterministic DP minimiser of `V^pi(sum_i d_i, p)`; its slack is the
  paper's `gamma = min_i (alpha_i - V^pi(d_i, p))` (Assumption "Strictly feasible
  policy"). Jittable; the slack is not positive when no policy of this kind is safe: use
  `check_safe_policy` on the host to get an error for that.

  Args:
    cmdp: an (unbatched) `CMDP`.

  Returns:
    `(policy [H, S, A], slack [])`.

  Raises:
    ValueError: a concrete (not traced) `cmdp` that `validate_cmdp` refuses (a threshold
      outside `[0, H]`, rows not summing to 1, ...), named.
  """
  check_cmdp(cmdp, "safest_policy")
  policy = planning.optimal_policy(jnp.sum(cmdp.constraint_costs, axis=0), cmdp.transition_set())
  _, values = policy_values(cmdp, policy)
  return policy, jnp.min(cmdp.thresholds - values)


def check_safe_policy(cmdp: CMDP, policy, slack=None, *, atol: float = 1e-6) -> float:
  """Host-side check that `policy` is a strictly feasible baseline for `cmdp`.

  Args:
    cmdp: an unbatched `CMDP`.
    policy: `[H, S, A]` candidate baseline policy.
    slack: optional claimed slack `gamma`; it must be positive and at most the true slack.
    atol: tolerance of the probability checks.

  Returns:
    The true slack `min_i (alpha_i - V^pi(d_i, p))`.

  Raises:
    ValueError: naming the fault (shape, probabilities, not strictly feasible, slack
      larger than the true one).
  """
  validate_cmdp(cmdp)
  fault = arguments.policy_fault(
    "safe_policy", policy, (cmdp.horizon, cmdp.num_states, cmdp.num_actions), atol=atol
  )
  if fault is not None:
    raise ValueError(fault)
  _, values = policy_values(cmdp, jnp.asarray(policy, dtype=cmdp.transitions.dtype))
  fault = baseline_fault(np.asarray(values), np.asarray(cmdp.thresholds), slack, atol=atol)
  if fault is not None:
    raise ValueError(fault)
  return float(np.min(np.asarray(cmdp.thresholds) - np.asarray(values)))


def random_cmdp(
  key: jax.Array,
  *,
  num_states: int,
  num_actions: int,
  horizon: int,
  num_constraints: int = 1,
  concentration: float = 1.0,
  threshold_fraction: float = 0.5,
  dtype=None,
) -> CMDP:
  """A random CMDP whose constraints matter. Jittable; vmap over keys for a batch.

  Family: transitions `p_h(.|s,a) ~ Dirichlet(concentration * 1)`, objective and
  constraint costs i.i.d. uniform on `[0, 1]`, initial state 0. Thresholds interpolate
  between the constraint values of the safe policy (`safe_policy`: minimises summed
  constraint costs) and those of the unconstrained cost-optimal policy:
  `alpha_i = V^safe_i + threshold_fraction * |V^opt_i - V^safe_i|`. Almost surely the
  safe policy is strictly feasible (slack > 0), and, as `sum_i V^opt_i >= sum_i V^safe_i`,
  some constraint binds for the unconstrained optimum whenever `threshold_fraction < 1`.

  Args:
    key: PRNG key.
    num_states: `S`.
    num_actions: `A`.
    horizon: `H`.
    num_constraints: `I`.
    concentration: Dirichlet parameter of every transition row.
    threshold_fraction: position of the thresholds between safe and unconstrained values.
    dtype: float dtype (default: JAX's default float).

  Returns:
    A `CMDP`.
  """
  dtype = dtype or jnp.zeros(()).dtype
  k_p, k_c, k_d = jax.random.split(key, 3)
  shape = (horizon, num_states, num_actions)
  alpha_dir = jnp.full((num_states,), concentration, dtype)
  transitions = jax.random.dirichlet(k_p, alpha_dir, shape=shape, dtype=dtype)
  cost = jax.random.uniform(k_c, shape, dtype)
  constraint_costs = jax.random.uniform(k_d, (num_constraints,) + shape, dtype)
  initial_state = jnp.zeros((), jnp.int32)
  provisional = CMDP(
    transitions, cost, constraint_costs, jnp.zeros((num_constraints,), dtype), initial_state
  )
  pi_safe, _ = safest_policy(provisional)
  _, v_safe = policy_values(provisional, pi_safe)
  pi_opt = planning.optimal_policy(cost, provisional.transition_set())
  _, v_opt = policy_values(provisional, pi_opt)
  thresholds = v_safe + threshold_fraction * jnp.abs(v_opt - v_safe)
  return provisional._replace(thresholds=jnp.clip(thresholds, 0.0, horizon))
