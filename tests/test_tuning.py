"""`oj.kernels.tuning`: the implementation's tuning constants, set for a block."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj


def test_tuning_reaches_the_traces_inside_its_block_only():
  """`oj.kernels.tuning`: a program traced inside the block uses its constants (a rolled
  horizon scan at `unroll_horizon=1`), one traced after it the defaults again; the same
  function object is traced afresh (the caches are cleared), and the values agree."""
  rng = np.random.default_rng(9)
  p = rng.dirichlet(np.ones(7), size=(5, 7, 3))
  lower, upper = (jnp.asarray(x) for x in ref.random_box(rng, p, 0.3))
  reward = jnp.asarray(rng.uniform(-1, 1, size=(5, 7, 3)))
  fn = jax.jit(lambda r, lo, up: oj.TransitionSet(lo, up).lmo(r, 0))
  defaults = oj.kernels.tuning_constants()
  assert "while" not in fn.lower(reward, lower, upper).as_text()
  unrolled = fn(reward, lower, upper)
  with oj.kernels.tuning(unroll_horizon=1) as inside:
    assert inside == {**defaults, "unroll_horizon": 1}
    assert "while" in fn.lower(reward, lower, upper).as_text()
    rolled = fn(reward, lower, upper)
  assert oj.kernels.tuning_constants() == defaults
  assert "while" not in fn.lower(reward, lower, upper).as_text()
  chex.assert_trees_all_close(unrolled, rolled, atol=1e-12)
  with pytest.raises(ValueError, match="unroll: not a tuning constant"):
    with oj.kernels.tuning(unroll=1):
      pass
  with pytest.raises(ValueError, match="unroll_horizon"):
    with oj.kernels.tuning(unroll_horizon=0):
      pass
  with pytest.warns(DeprecationWarning, match=r"tuning_constants\(\)\['unroll_horizon'\]"):
    assert oj.kernels.UNROLL_HORIZON == defaults["unroll_horizon"]


def test_the_several_constraint_solves_dp_is_traced_rolled_from_its_size(monkeypatch):
  """`horizon.rolled_scans(size)`: a program traced inside a block of a size from
  `ROLLED_BLOCK_MIN_ELEMENTS` keeps its horizon scans rolled (a `while` loop); one of a
  smaller size, or traced outside, unrolls them (a fresh function each time: JAX reuses a
  function's trace); nested blocks end with the outer one. The I >= 2 solve's oracle
  (`cutting_planes._lagrangian_lmo`) rolls by its problem's size, and agrees with the
  unrolled DP."""
  from optaug_jax._src import horizon
  from optaug_jax._src.inner import cutting_planes

  rng = np.random.default_rng(10)
  p = rng.dirichlet(np.ones(6), size=(4, 6, 3))
  lower, upper = (jnp.asarray(x) for x in ref.random_box(rng, p, 0.3))
  cost = jnp.asarray(rng.uniform(0, 1, size=(4, 6, 3)))
  constraint_costs = jnp.asarray(rng.uniform(0, 1, size=(2, 4, 6, 3)))
  problem = oj.inner.InnerProblem(
    cost, constraint_costs, jnp.asarray([1.0, 1.0]), oj.TransitionSet(lower, upper), 0
  )
  lmo = lambda r: oj.TransitionSet(lower, upper).lmo(r, 0)
  rolled = lambda: "while" in jax.jit(lambda r: lmo(r)).lower(cost).as_text()
  least = horizon.ROLLED_BLOCK_MIN_ELEMENTS
  assert not rolled()
  with horizon.rolled_scans(least - 1):
    assert not rolled()
  with horizon.rolled_scans(least):
    with horizon.rolled_scans(least):
      assert rolled()
    assert rolled()
  assert not rolled()
  mu = jnp.asarray([0.5, 1.5])
  oracle = lambda: jax.jit(lambda m: cutting_planes._lagrangian_lmo(problem, m))
  assert "while" not in oracle().lower(mu).as_text()  # 4 x 6 x 3 x 6 elements: unrolled
  monkeypatch.setattr(horizon, "ROLLED_BLOCK_MIN_ELEMENTS", 4 * 6 * 3 * 6)
  assert "while" in oracle().lower(mu).as_text()
  unrolled = jax.jit(lmo)(cost + jnp.einsum("i,ihsa->hsa", mu, constraint_costs))
  chex.assert_trees_all_close(oracle()(mu), unrolled, atol=1e-12)
