"""`oj.TransitionSet`: a pytree whose fill is static, whose methods are the planning kernels
with its layout and fill, under `jit`, `vmap` and `grad`; and `InnerProblem` holding one.

The kernels themselves are checked against LPs and NumPy loops in test_planning.py and
test_sparse.py; here the set's methods are checked against the exact LP of the extended
MDP (`references.extended_lp_value`) and against their unbatched calls."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj

H, S, A = 3, 4, 2


def _box(seed, dtype=np.float64):
  rng = np.random.default_rng(seed)
  p = rng.dirichlet(np.ones(S), size=(H, S, A))
  lower, upper = ref.random_box(rng, p, 0.2)
  reward = rng.uniform(-1, 1, size=(H, S, A))
  return jnp.asarray(reward, dtype), jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)


@pytest.mark.parametrize("fill", ["matmul", "sort", "blocked"])
def test_lmo_is_the_extended_lp_optimum(fill):
  reward, lower, upper = _box(0)
  box = oj.TransitionSet(lower, upper, fill=fill)
  sol = box.lmo(reward, 1)
  assert float(sol.value) == pytest.approx(
    ref.extended_lp_value(np.asarray(reward), np.asarray(lower), np.asarray(upper), 1), abs=1e-9
  )
  np.testing.assert_allclose(float(jnp.sum(reward * sol.occupancy)), float(sol.value), atol=1e-12)


def test_fill_is_static_and_resolved_for_the_width():
  _, lower, upper = _box(1)
  box = oj.TransitionSet(lower, upper)  # "auto" at S' = 4: the matrix fill
  assert box.fill == "matmul" and not box.sparse
  leaves, treedef = jax.tree.flatten(box)
  assert len(leaves) == 2  # lower, upper (no next_states): the fill is not a leaf
  again = jax.tree.unflatten(treedef, leaves)
  assert again.fill == "matmul" and again.next_states is None
  with pytest.raises(ValueError, match="fill"):
    oj.TransitionSet(lower, upper, fill="bubble")


def test_methods_under_jit_and_vmap_match_unbatched_calls():
  batch = [_box(seed) for seed in range(3)]
  reward, lower, upper = (jnp.stack(x) for x in zip(*batch))
  boxes = jax.vmap(lambda lo, up: oj.TransitionSet(lo, up))(lower, upper)
  assert boxes.lower.shape == (3, H, S, A, S)

  def everything(box, r):
    lmo = box.lmo(r, 0)
    vertex = box.vertex(r, lmo.actions, lmo.next_values, 0)
    evi = box.value_iteration(r, 0)
    values, _ = box.evaluate(r, evi.policy)
    return lmo.value, vertex.value, evi.value, values[0, 0]

  got = jax.jit(jax.vmap(everything))(boxes, reward)
  for j in range(3):
    single = everything(oj.TransitionSet(lower[j], upper[j]), reward[j])
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[j], got), single, atol=1e-12)
    # The LMO's vertex filled again in its own box, value iteration and the optimistic
    # evaluation of its policy all give the optimum.
    np.testing.assert_allclose(np.asarray(single[1:]), float(single[0]), atol=1e-12)


def test_gradient_flows_to_the_bounds():
  reward, lower, upper = _box(2)
  g = jax.grad(lambda lo, up: oj.TransitionSet(lo, up).lmo(reward, 0).value, argnums=(0, 1))(
    lower, upper
  )
  eps = 1e-6
  bump = jnp.zeros_like(upper).at[0, 0, 0, 1].set(eps)
  f = lambda up: float(oj.TransitionSet(lower, up).lmo(reward, 0).value)
  np.testing.assert_allclose(
    float(g[1][0, 0, 0, 1]), (f(upper + bump) - f(upper - bump)) / (2 * eps), atol=1e-6
  )


def test_sparse_set_matches_the_dense_one():
  m = oj.benchmarks.gridworld(3, horizon=5, sparse=True, dtype=jnp.float64).cmdp
  reward = m.cost + 0.5 * m.constraint_costs[0]
  sparse = oj.TransitionSet.point(m.transitions, m.next_states)
  dense = oj.TransitionSet.point(oj.to_dense(m).transitions)
  assert sparse.sparse and not dense.sparse
  np.testing.assert_allclose(
    float(sparse.lmo(reward, m.initial_state).value),
    float(dense.lmo(reward, m.initial_state).value),
    atol=1e-12,
  )


def test_inner_problem_holds_a_set_and_reads_through():
  reward, lower, upper = _box(3)
  kw = dict(cost=jnp.abs(reward), constraint_costs=jnp.ones((1, H, S, A)), thresholds=jnp.ones(1))
  problem = oj.inner.InnerProblem(
    **kw, transitions=oj.TransitionSet(lower, upper, fill="sort"), initial_state=0
  )
  assert problem.transitions.fill == "sort"
  assert problem.lower is lower and problem.upper is upper and problem.next_states is None
  moved = problem._replace(upper=upper + 0.0, thresholds=jnp.full(1, 2.0))
  assert isinstance(moved, oj.inner.InnerProblem) and moved.transitions.fill == "sort"
  assert float(moved.thresholds[0]) == 2.0
  a = oj.solve_inner(problem, jnp.zeros(1), 10.0)
  b = oj.solve_inner(moved._replace(thresholds=problem.thresholds), jnp.zeros(1), 10.0)
  np.testing.assert_array_equal(np.asarray(a.objective), np.asarray(b.objective))
  with pytest.raises(TypeError):  # the loose bounds are no longer taken
    oj.inner.InnerProblem(**kw, lower=lower, upper=upper, initial_state=0)


def _kernel(seed):
  rng = np.random.default_rng(seed)
  p = rng.dirichlet(np.ones(S), size=(H, S, A))
  policy = rng.dirichlet(np.ones(A), size=(H, S))
  return p, policy, rng.uniform(0, 1, size=(H, S, A))


def test_a_point_set_has_one_leaf_and_gives_the_occupancy_of_its_kernel():
  p, policy, _ = _kernel(4)
  kernel = oj.TransitionSet.point(jnp.asarray(p))
  leaves, treedef = jax.tree.flatten(kernel)
  assert len(leaves) == 1 and kernel.is_point and kernel.lower is kernel.upper
  again = jax.tree.unflatten(treedef, leaves)
  assert again.is_point and again.upper is again.lower
  np.testing.assert_allclose(
    np.asarray(kernel.occupancy(jnp.asarray(policy), 1)),
    ref.occupancy_loop(p, policy, 1),
    atol=1e-12,
  )
  # Its bounds replaced, a point set is a box, and a box has no one kernel.
  box = kernel.replace(upper=jnp.clip(kernel.upper + 0.1, 0.0, 1.0))
  assert not box.is_point and len(jax.tree.leaves(box)) == 2
  with pytest.raises(ValueError, match="known kernel"):
    box.occupancy(jnp.asarray(policy), 1)
  with pytest.raises(ValueError, match="known kernel"):
    oj.occupancy(box, jnp.asarray(policy), 1)


def test_point_set_optimal_policy_is_the_best_deterministic_policy():
  p, _, reward = _kernel(5)
  kernel = oj.TransitionSet.point(jnp.asarray(p))
  policy = np.asarray(kernel.optimal_policy(jnp.asarray(reward)))
  value = lambda pi: float(np.sum(reward * ref.occupancy_loop(p, pi, 0)))
  best = min(value(pi) for pi in ref.deterministic_policies(H, S, A))
  assert value(policy) == pytest.approx(best, abs=1e-12)


def test_point_sets_under_jit_and_vmap_match_unbatched_calls():
  batch = [_kernel(seed) for seed in range(3)]
  p, policy, reward = (jnp.asarray(np.stack(x)) for x in zip(*batch))

  def both(kernel, pi, r):
    return kernel.occupancy(pi, 0), kernel.optimal_policy(r)

  kernels = jax.vmap(oj.TransitionSet.point)(p)
  assert kernels.is_point and kernels.lower.shape == (3, H, S, A, S)
  got = jax.jit(jax.vmap(both))(kernels, policy, reward)
  for j in range(3):
    single = both(oj.TransitionSet.point(p[j]), policy[j], reward[j])
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[j], got), single, atol=1e-12)
