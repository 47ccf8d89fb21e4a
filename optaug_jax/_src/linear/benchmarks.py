"""The benchmarks of Kitamura et al. (NeurIPS 2025, "Provably Efficient RL under
Episode-Wise Safety in Constrained MDPs with Linear Function Approximation"), written from
their definitions, in the cost convention.

Their convention: a reward `r` and a utility `u` in `[0, 1]`, the constraint `V_u >= b`
with `b = const_scale * max_pi V_u(s_1)`, the baseline `pi_sf` the deterministic utility
maximiser (ties to the first action). Here: `c = 1 - r`, `d = 1 - u`, `alpha = H - b`, so
`V^pi(d) <= alpha` iff `V^pi(u) >= b`, and the baseline's slack is `xi = max_pi V_u - b`.
Each instance is drawn by `jax.random` from `PRNGKey(seed)` with the calls and key
splits of their construction, so that, at a given JAX version, the arrays are theirs
(checked against their published values of `b` and `s_1`: tests/test_linear.py).

- `kitamura_random(seed)`: `S = 5, A = 3, H = 4`, one-hot features (`d = 15`); rewards
  and utilities 1 with probability 0.1 per `(h, s, a)`, else 0; kernel rows
  Dirichlet(0.1); `s_1` uniform; `const_scale = 0.6`.
- `kitamura_streaming(seed)`: a media-streaming buffer of 6 levels, `A = 2` (fast, slow),
  `H = 4`, one-hot features (`d = 12`); reward 1 when the buffer holds at least one
  packet, utility 1 for the slow transmission; a birth-death kernel with the fast rate
  `mu_1 ~ U(0.5, 0.9)`, the slow one `1 - mu_1` and the leave probability
  `rho ~ U(0.1, 0.4)`, reflecting at both ends; `s_1 = 0`; `const_scale = 0.6`.
- `kitamura_linear(seed)`: an exact linear CMDP, `S = 100, A = 3, d = 5, H = 4`: features
  Dirichlet(0.1) rows (on the simplex), `mu_h` rows Dirichlet(0.1) over the states, `P_h =
  phi mu_h`; `r_h = phi . theta_r` and `u_h = phi . theta_u` with `theta ~ U(0, 1)^{H x d}`
  scaled so that the largest reward and utility are 1; `s_1` uniform;
  `const_scale = 0.68`.

Whether the constraint binds (the LP optimum above the unconstrained one; HiGHS, float64,
tests/test_linear.py): random, instances 1, 3, 6, 7, 8 of 0-9; streaming, all of 0-9;
linear, none of 0-9 (there the utility threshold is met by the reward's optimum).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import numerics
from ..cmdp import CMDP
from .model import LinearCMDP

# Their draws are float32 (x64 off); drawn in float32 whatever `jax_enable_x64` says, so the
# instance is the same under x64 (its arrays are then cast to the requested dtype).
F32 = jnp.float32


class LinearBenchmark(NamedTuple):
  """A linear CMDP with its baseline and the baseline's true slack."""

  model: LinearCMDP
  safe_policy: np.ndarray  # [H, S, A] the deterministic utility maximiser
  slack: float  # xi = alpha - V^{pi_sf}(d) > 0
  utility_threshold: float  # b of the reward convention (alpha = H - b)


def _greedy_utility(kernel, utility, initial_state):
  """`(max_pi V_u(s_1), the greedy policy [H, S, A])` by DP in float64 (ties: first action)."""
  horizon, num_states, num_actions = utility.shape
  v = np.zeros(num_states)
  policy = np.zeros(utility.shape)
  for h in range(horizon - 1, -1, -1):
    q = utility[h] + kernel[h] @ v
    best = np.argmax(q, axis=-1)
    policy[h, np.arange(num_states), best] = 1.0
    v = q[np.arange(num_states), best]
  return float(v[initial_state]), policy


def _benchmark(kernel, reward, utility, features, initial_state, const_scale, dtype):
  kernel, reward, utility = (np.asarray(x, np.float64) for x in (kernel, reward, utility))
  kernel = kernel / kernel.sum(-1, keepdims=True)  # float32 draws: rows to 1 in float64
  horizon = reward.shape[0]
  best, policy = _greedy_utility(kernel, utility, initial_state)
  # The threshold as they compute it (float32 arithmetic in JAX): b = const_scale * max.
  b = float(np.float32(const_scale) * np.float32(best))
  dtype = dtype or jnp.float32
  cmdp = CMDP(
    transitions=jnp.asarray(kernel, dtype),
    cost=jnp.asarray(np.clip(1.0 - reward, 0.0, 1.0), dtype),  # float32 scaling: 1 + 1 ulp
    constraint_costs=jnp.asarray(np.clip(1.0 - utility, 0.0, 1.0), dtype)[None],
    thresholds=jnp.asarray([horizon - b], dtype),
    initial_state=jnp.asarray(initial_state, jnp.int32),
  )
  model = LinearCMDP(cmdp, jnp.asarray(features, dtype))
  return LinearBenchmark(model, policy.astype(np.dtype(dtype)), best - b, b)


def kitamura_random(seed: int = 0, dtype=None) -> LinearBenchmark:
  """The random tabular CMDP of Kitamura et al. (module docstring)."""
  num_states, num_actions, horizon = 5, 3, 4
  key = jax.random.PRNGKey(seed)
  key, _ = jax.random.split(key)
  reward = jax.random.bernoulli(key, p=F32(0.1), shape=(horizon, num_states, num_actions))
  key, _ = jax.random.split(key)
  utility = jax.random.bernoulli(key, p=F32(0.1), shape=(horizon, num_states, num_actions))
  key, _ = jax.random.split(key)
  alpha = jnp.full((num_states,), 0.1, F32)
  draws = jax.random.dirichlet(key, alpha, (horizon, num_states * num_actions), F32)
  key, _ = jax.random.split(key)
  start = int(jax.random.randint(key, (), 0, num_states, jnp.int32))
  eye = np.eye(num_states * num_actions).reshape(num_states, num_actions, -1)
  kernel = np.asarray(draws).reshape(horizon, num_states, num_actions, num_states)
  return _benchmark(kernel, reward, utility, eye, start, 0.6, dtype)


def kitamura_streaming(seed: int = 0, dtype=None) -> LinearBenchmark:
  """The media-streaming CMDP of Kitamura et al. (module docstring)."""
  buffer, num_actions, horizon = 5, 2, 4
  num_states = buffer + 1
  key = jax.random.PRNGKey(seed)
  key, _ = jax.random.split(key)
  fast = float(jax.random.uniform(key, minval=F32(0.5), maxval=F32(0.9), dtype=F32))
  key, _ = jax.random.split(key)
  leave = float(jax.random.uniform(key, minval=F32(0.1), maxval=F32(0.4), dtype=F32))
  step = np.zeros((num_states, num_actions, num_states))
  for a, rate in enumerate((fast, 1.0 - fast)):
    down, up = leave * (1 - rate), (1 - leave) * rate
    for s in range(num_states):
      if s > 0:
        step[s, a, s - 1] = down
      if s < buffer:
        step[s, a, s + 1] = up
      step[s, a, s] = 1.0 - step[s, a].sum()  # stay, and the reflected moves at the ends
  reward = np.zeros((horizon, num_states, num_actions))
  reward[:, int(buffer * 0.3) :, :] = 1.0
  utility = np.zeros((horizon, num_states, num_actions))
  utility[:, :, 1] = 1.0
  kernel = np.broadcast_to(step, (horizon,) + step.shape)
  eye = np.eye(num_states * num_actions).reshape(num_states, num_actions, -1)
  return _benchmark(kernel, reward, utility, eye, 0, 0.6, dtype)


def kitamura_linear(seed: int = 0, dtype=None) -> LinearBenchmark:
  """The linear CMDP of Kitamura et al. (module docstring; after Amani et al. 2021)."""
  num_states, num_actions, num_features, horizon = 100, 3, 5, 4
  key = jax.random.PRNGKey(seed)
  phi = jax.random.dirichlet(
    key, jnp.full((num_features,), 0.1, F32), (num_states * num_actions,), F32
  )
  key, _ = jax.random.split(key)
  mu = jax.random.dirichlet(key, jnp.full((num_states,), 0.1, F32), (horizon * num_features,), F32)
  mu = mu.reshape(horizon, num_features, num_states)
  key, _ = jax.random.split(key)
  kernel = numerics.einsum("hds,kd->hks", mu, phi).reshape(horizon, num_states, num_actions, -1)

  def scaled(key):
    theta = jax.random.uniform(key, shape=(horizon, num_features), dtype=F32)
    values = numerics.einsum("hd,kd->hk", theta, phi)
    theta = theta * (1 / values.max())
    return numerics.einsum("hd,kd->hk", theta, phi).reshape(horizon, num_states, num_actions)

  reward = scaled(key)
  key, _ = jax.random.split(key)
  utility = scaled(key)
  key, _ = jax.random.split(key)
  key, _ = jax.random.split(key)
  start = int(jax.random.randint(key, (), 0, num_states, jnp.int32))
  features = np.asarray(phi).reshape(num_states, num_actions, num_features)
  return _benchmark(kernel, reward, utility, features, start, 0.68, dtype)


# Kitamura et al.'s constants (their notebook): benchmark -> (the bonus scale C of every
# bonus, the softmax temperature tau). The scripts' defaults for the linear agents there.
PUBLISHED_CONSTANTS = {
  "kitamura_random": (1.0, 0.1),
  "kitamura_streaming": (2.0, 0.1),
  "kitamura_linear": (5.0, 0.01),
}

BENCHMARKS = {
  "kitamura_random": kitamura_random,
  "kitamura_streaming": kitamura_streaming,
  "kitamura_linear": kitamura_linear,
}
