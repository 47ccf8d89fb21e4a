"""Kernels with and without `jit` (`chex.variants`), against NumPy references, and `vmap`
against the unbatched calls."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import references as ref
from absl.testing import parameterized

import optaug_jax as oj


def _box(seed, s=4, a=3, h=4, radius=0.3):
  rng = np.random.default_rng(seed)
  p = rng.dirichlet(np.ones(s), size=(h, s, a))
  lower, upper = ref.random_box(rng, p, radius)
  return rng, p, lower, upper


class KernelVariantsTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0, 1, 2)
  def test_occupancy(self, seed):
    rng, p, _, _ = _box(seed)
    pi = rng.dirichlet(np.ones(3), size=(4, 4))
    occupancy = lambda ts, policy, s0: ts.occupancy(policy, s0)
    q = self.variant(occupancy)(oj.TransitionSet.point(jnp.asarray(p)), jnp.asarray(pi), 1)
    np.testing.assert_allclose(q, ref.occupancy_loop(p, pi, 1), rtol=1e-12)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters(0, 1, 2)
  def test_extended_lmo_value_is_the_extended_lp(self, seed):
    rng, _, lower, upper = _box(seed)
    reward = rng.uniform(-1, 1, size=(4, 4, 3))
    sol = self.variant(lambda r, ts, s0: ts.lmo(r, s0))(
      jnp.asarray(reward), oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)), 2
    )
    np.testing.assert_allclose(sol.value, ref.extended_lp_value(reward, lower, upper, 2), atol=1e-9)
    np.testing.assert_allclose(np.sum(reward * np.asarray(sol.occupancy)), sol.value, atol=1e-12)

  @chex.variants(with_jit=True, without_jit=True)
  def test_dual_step_closed_form(self):
    rng = np.random.default_rng(0)
    q = rng.uniform(size=(3, 2, 2))
    d = rng.uniform(size=(2, 3, 2, 2))
    alpha, lam = np.array([1.0, 5.0]), np.array([0.2, 0.4])
    got = self.variant(oj.dual_step)(
      jnp.asarray(q), jnp.asarray(d), jnp.asarray(alpha), jnp.asarray(lam), 3.0
    )
    want = np.maximum(lam + 3.0 * (np.einsum("ihsa,hsa->i", d, q) - alpha), 0)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert want[0] > 0 and want[1] == 0  # both sides of the projection

  @chex.variants(with_jit=True, without_jit=True)
  def test_sample_episode_is_a_valid_path(self):
    m = oj.random_cmdp(jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=4)
    pi = jnp.full((4, 3, 2), 0.5)
    traj = self.variant(oj.sample_episode)(jax.random.PRNGKey(1), m, pi)
    states, actions = np.asarray(traj.states), np.asarray(traj.actions)
    assert states[0] == 0
    p = np.asarray(m.transitions)
    for h in range(4):  # every transition taken has positive probability
      assert p[h, states[h], actions[h], states[h + 1]] > 0


def test_extended_lmo_and_solve_inner_vmap_match_unbatched_calls():
  boxes = [_box(seed) for seed in range(3)]
  lower = jnp.stack([b[2] for b in boxes])
  upper = jnp.stack([b[3] for b in boxes])
  reward = jnp.asarray(np.random.default_rng(9).uniform(-1, 1, size=(3, 4, 4, 3)))
  batched = jax.vmap(lambda r, lo, up: oj.TransitionSet(lo, up).lmo(r, 0))(reward, lower, upper)
  for j in range(3):
    single = oj.TransitionSet(lower[j], upper[j]).lmo(reward[j], 0)
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[j], batched), single, atol=1e-12)
