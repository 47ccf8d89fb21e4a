"""The linear CMDP where a tabular agent cannot go (`oj.linear.latent_factors`) and its exact
optimum by the Lagrangian dual (`oj.linear.dual_optimum`), against HiGHS on small members
of the family, an exact linear residual, and NumPy loops."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax import linear

SMALL = dict(num_states=40, num_actions=3, num_features=5, horizon=5, support=6)


@pytest.mark.parametrize("seed", range(4))
def test_dual_optimum_is_the_lp_optimum(seed):
  """Value and multiplier against HiGHS on the dense form (strong duality), and a threshold
  that does not bind: the unconstrained optimum, multiplier 0."""
  cmdp = linear.latent_factors(seed, **SMALL, dtype=jnp.float64).model.cmdp
  lp = oj.solve_lp(oj.to_dense(cmdp))
  dual = linear.dual_optimum(cmdp)
  assert dual.binds and dual.bracket < 1e-9
  assert dual.value == pytest.approx(lp.value, abs=1e-9)
  assert dual.multiplier == pytest.approx(float(lp.multipliers[0]), abs=1e-7)
  loose = cmdp._replace(thresholds=jnp.full_like(cmdp.thresholds, cmdp.horizon))
  free = linear.dual_optimum(loose)
  assert not free.binds and free.multiplier == 0.0
  assert free.value == pytest.approx(oj.solve_lp(oj.to_dense(loose)).value, abs=1e-9)


def test_dual_optimum_refuses_what_it_cannot_solve():
  cmdp = linear.latent_factors(0, **SMALL, dtype=jnp.float64).model.cmdp
  with pytest.raises(ValueError, match="not below the threshold"):
    linear.dual_optimum(cmdp._replace(thresholds=jnp.zeros_like(cmdp.thresholds)))
  two = cmdp._replace(
    constraint_costs=jnp.concatenate([cmdp.constraint_costs] * 2),
    thresholds=jnp.concatenate([cmdp.thresholds] * 2),
  )
  with pytest.raises(ValueError, match="one constraint"):
    linear.dual_optimum(two)


@pytest.mark.parametrize("seed", range(3))
def test_latent_factors_is_an_exact_sparse_linear_cmdp_with_its_baseline(seed):
  """Exactly linear in its features (least-squares residual at rounding), rows of at most
  `k m` next states, costs `phi . theta`, the baseline the constraint's minimiser with the
  stated slack (NumPy occupancy), the constraint binding (HiGHS)."""
  bench = linear.latent_factors(seed, **SMALL, dtype=jnp.float64)
  cmdp, phi = bench.model.cmdp, np.asarray(bench.model.features)
  assert cmdp.is_sparse and cmdp.max_next_states == 2 * SMALL["support"]
  dense = oj.to_dense(cmdp)
  assert linear.linear_residual(linear.LinearCMDP(dense, bench.model.features)) < 1e-12
  np.testing.assert_allclose(phi.sum(-1), 1.0, atol=1e-12)
  assert np.all((phi > 0).sum(-1) <= 2)
  theta, *_ = np.linalg.lstsq(phi.reshape(-1, phi.shape[-1]), np.ravel(cmdp.cost[0]), rcond=None)
  np.testing.assert_allclose(phi @ theta, cmdp.cost[0], atol=1e-12)
  # The baseline's constraint value by a NumPy forward pass over the occupancy.
  p, pi = np.asarray(dense.transitions), np.asarray(bench.safe_policy)
  occupancy = np.zeros(cmdp.num_states)
  occupancy[int(cmdp.initial_state)] = 1.0
  value = 0.0
  for h in range(cmdp.horizon):
    value += np.sum(occupancy[:, None] * pi[h] * np.asarray(cmdp.constraint_costs)[0, h])
    occupancy = np.einsum("s,sa,san->n", occupancy, pi[h], p[h])
  assert bench.slack == pytest.approx(float(cmdp.thresholds[0]) - value, abs=1e-10)
  assert bench.slack > 0
  free = cmdp._replace(thresholds=jnp.full_like(cmdp.thresholds, cmdp.horizon))
  assert oj.solve_lp(dense).value > oj.solve_lp(oj.to_dense(free)).value + 1e-6


def test_the_linear_agents_run_on_a_sparse_latent_cmdp_vmapped():
  """On the sparse layout (no dense kernel anywhere, no warning), jit and vmap agree with
  the unbatched run; OptAug's plans are certified."""
  bench = linear.latent_factors(1, num_states=300, num_features=8, horizon=6)
  cmdp = bench.model.cmdp
  agent = linear.optaug_linear(bench.model, bench.safe_policy, eta=10.0, pretrain_episodes=2)
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  with __import__("warnings").catch_warnings():
    __import__("warnings").simplefilter("error")
    states, logs = jax.jit(jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=12)))(keys)
  one, one_logs = oj.run(agent, keys[1], cmdp, num_episodes=12)
  np.testing.assert_allclose(logs.constraint_values[1], one_logs.constraint_values, rtol=1e-5)
  np.testing.assert_allclose(states.multipliers[1], one.multipliers, rtol=1e-5, atol=1e-6)
  assert bool(jnp.all(logs.certified[:, 2:]))
