"""A straightforward vectorised NumPy implementation of one OptAug-CMDP episode step.

Written independently of the JAX kernels (argsort + cumsum fill, a piece-walking line
search, explicit loops over the horizon) for two uses: the benchmark baseline of the JAX
step, and a cross-check of the JAX `plan` in the tests. Host side, one seed at a time.
"""

from __future__ import annotations

import numpy as np


def optimistic_model(
  visits, transition_counts, cost_sums, constraint_sums, *, num_episodes, delta, bonus_scale
):
  """(c~, d~, lower, upper) of the paper's eq. (opt-c)."""
  num_constraints, horizon, num_states, num_actions = constraint_sums.shape
  sah_k = num_states * num_actions * horizon * num_episodes
  log_p = np.log(6.0 * sah_k / delta)
  log_c = np.log(6.0 * sah_k * (num_constraints + 1) / delta)
  n = np.maximum(visits, 1.0)
  p_bar = transition_counts / n[..., None]
  beta_c = bonus_scale * np.sqrt(log_c / n)
  beta_p = bonus_scale * (
    2 * np.sqrt(p_bar * (1 - p_bar) * log_p / n[..., None]) + 14 * log_p / (3 * n[..., None])
  )
  visited = visits[..., None] > 0
  lower = np.where(visited, np.clip(p_bar - beta_p, 0, 1), 0.0)
  upper = np.where(visited, np.clip(p_bar + beta_p, 0, 1), 1.0)
  return (
    np.maximum(cost_sums / n - beta_c, 0),
    np.maximum(constraint_sums / n - beta_c, 0),
    lower,
    upper,
  )


def extended_lmo(reward, lower, upper, initial_state, *, return_actions=False):
  """Extended DP: returns (value, occupancy [H, S, A]) of the optimal deterministic policy
  (and its actions [H, S] at every state, reached or not, with `return_actions`)."""
  horizon, num_states, num_actions = reward.shape
  v = np.zeros(num_states)
  actions = np.zeros((horizon, num_states), int)
  greedy_p = np.zeros((horizon, num_states, num_states))
  for h in reversed(range(horizon)):
    order = np.lexsort((np.arange(num_states), v))  # ascending value, ties by index
    cap = (upper[h] - lower[h])[..., order]
    before = np.cumsum(cap, axis=-1) - cap
    free = 1.0 - lower[h].sum(-1, keepdims=True)
    give_sorted = np.clip(free - before, 0.0, cap)
    p = lower[h].copy()
    p[..., order] += give_sorted
    qv = reward[h] + p @ v
    actions[h] = np.argmin(qv, axis=-1)
    greedy_p[h] = p[np.arange(num_states), actions[h]]
    v = qv[np.arange(num_states), actions[h]]
  d = np.zeros(num_states)
  d[initial_state] = 1.0
  q = np.zeros((horizon, num_states, num_actions))
  for h in range(horizon):
    q[h, np.arange(num_states), actions[h]] = d
    d = d @ greedy_p[h]
  if return_actions:
    return v[initial_state], q, actions
  return v[initial_state], q


def policy_from_occupancy(q, fallback_actions=None):
  """Eq. (retrieve-pi); where `q_h(s) = 0`, the one-hot of `fallback_actions [H, S]` (the
  agent's "greedy" choice) or, without them, uniform."""
  total = q.sum(-1, keepdims=True)
  if fallback_actions is None:
    fallback = np.full_like(q, 1.0 / q.shape[-1])
  else:
    fallback = np.eye(q.shape[-1])[fallback_actions]
  return np.where(total > 0, q / np.where(total > 0, total, 1.0), fallback)


def greedy_fallback(q, cost, constraint_costs, lower, upper, initial_state, new_multipliers):
  """The actions of the extended DP on the gradient at `q`: `c + D^T lambda+` [H, S]."""
  grad = cost + np.einsum("i,ihsa->hsa", new_multipliers, constraint_costs)
  return extended_lmo(grad, lower, upper, initial_state, return_actions=True)[2]


def line_search(g, a, b, eta):
  """Exact argmin over [0, 1] of t g + ||[a + t b]_+||^2 / (2 eta), walking the pieces."""
  knots = sorted(
    {0.0, 1.0, *[float(-ai / bi) for ai, bi in zip(a, b) if bi != 0 and 0 < -ai / bi < 1]}
  )

  def slope(t):
    return g + np.sum(b * np.maximum(a + t * b, 0.0)) / eta

  if slope(0.0) >= 0:
    return 0.0
  for lo, hi in zip(knots[:-1], knots[1:]):
    if slope(hi) >= 0:  # the root lies in [lo, hi], where the slope is affine
      s_lo, s_hi = slope(lo), slope(hi)
      return lo if s_hi == s_lo else lo + (hi - lo) * (-s_lo) / (s_hi - s_lo)
  return 1.0


def frank_wolfe(
  cost,
  constraint_costs,
  lower,
  upper,
  initial_state,
  thresholds,
  multipliers,
  eta,
  *,
  num_iters,
  step_rule="linesearch",
):
  """Frank-Wolfe on the paper's eq. (convex-fw) in q; returns (q, fw_gap)."""
  d_flat = constraint_costs.reshape(constraint_costs.shape[0], -1)

  def grad(q):
    shifted = np.maximum(multipliers + eta * (d_flat @ q.ravel() - thresholds), 0.0)
    return cost + np.tensordot(shifted, constraint_costs, axes=1)

  _, q = extended_lmo(
    cost + np.tensordot(multipliers, constraint_costs, axes=1), lower, upper, initial_state
  )
  g = grad(q)
  value, s = extended_lmo(g, lower, upper, initial_state)
  for t in range(num_iters):
    direction = s - q
    if step_rule == "standard":
      step = 2.0 / (t + 2.0)
    else:
      a = multipliers + eta * (d_flat @ q.ravel() - thresholds)
      b = eta * (d_flat @ direction.ravel())
      step = line_search(float(np.sum(cost * direction)), a, b, eta)
    q = q + step * direction
    g = grad(q)
    value, s = extended_lmo(g, lower, upper, initial_state)
  return q, float(np.sum(g * q) - value)


def optaug_step(
  rng,
  cmdp,
  counts,
  multipliers,
  eta,
  *,
  radii,
  num_iters,
  step_rule="linesearch",
  unreached="greedy",
):
  """One exploration episode of OptAug-CMDP: plan, dual step, play, update counts.

  `cmdp` is a tuple (transitions, cost, constraint_costs, thresholds, initial_state);
  `counts` a tuple (visits, transition_counts, cost_sums, constraint_sums), updated in
  place; `radii` a tuple (num_episodes, delta, bonus_scale). Returns (policy, new
  multipliers, q, fw_gap).
  """
  transitions, cost, constraint_costs, thresholds, initial_state = cmdp
  num_episodes, delta, bonus_scale = radii
  c_t, d_t, lower, upper = optimistic_model(
    *counts, num_episodes=num_episodes, delta=delta, bonus_scale=bonus_scale
  )
  q, gap = frank_wolfe(
    c_t,
    d_t,
    lower,
    upper,
    initial_state,
    thresholds,
    multipliers,
    eta,
    num_iters=num_iters,
    step_rule=step_rule,
  )
  d_flat = d_t.reshape(d_t.shape[0], -1)
  new_multipliers = np.maximum(multipliers + eta * (d_flat @ q.ravel() - thresholds), 0.0)
  fallback = (
    greedy_fallback(q, c_t, d_t, lower, upper, initial_state, new_multipliers)
    if unreached == "greedy"
    else None
  )
  policy = policy_from_occupancy(q, fallback)
  visits, transition_counts, cost_sums, constraint_sums = counts
  horizon, num_states, num_actions = cost.shape
  s = initial_state
  for h in range(horizon):
    a = rng.choice(num_actions, p=policy[h, s])
    s_next = rng.choice(num_states, p=transitions[h, s, a])
    visits[h, s, a] += 1
    transition_counts[h, s, a, s_next] += 1
    cost_sums[h, s, a] += rng.random() < cost[h, s, a]
    constraint_sums[:, h, s, a] += (
      rng.random(constraint_costs.shape[0]) < constraint_costs[:, h, s, a]
    )
    s = s_next
  return policy, new_multipliers, q, gap
