"""`oj.TransitionSet`: a pytree whose fill is static, whose methods are the planning kernels
with its layout and fill, under `jit`, `vmap` and `grad`; and `InnerProblem` holding one.

The kernels themselves are checked against LPs and NumPy loops in test_planning.py and
test_sparse.py; here the set's methods are checked against the exact LP of the extended
MDP (`references.extended_lp_value`) and against their unbatched calls."""

import copy
import pickle

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
    box.occupancy(jnp.asarray(policy), 1)


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


# --- Every box holds a kernel in every row --------------------------------------------


def _faulty_boxes():
  """The issue's probes, each a dense or sparse box with one bad row, and the message."""
  _, lower, upper = _box(7, np.float32)
  lower, upper = np.asarray(lower), np.asarray(upper)
  out = {}
  up = upper.copy()
  lo = lower.copy()
  lo[1, 2, 0] = 0.0
  up[1, 2, 0] *= 0.4 / up[1, 2, 0].sum()  # sums to 0.4: no kernel fits
  out["upper sums to 0.4"] = ((lo, up, None), r"upper: row \(h, s, a\) = \(1, 2, 0\) sums to less")
  lo = lower.copy()
  lo[0, 3, 1, 2] = upper[0, 3, 1, 2] + 0.2
  out["lower > upper"] = ((lo, upper, None), r"lower: row \(h, s, a\) = \(0, 3, 1\) exceeds upper")
  lo = lower.copy()
  lo[2, 0, 0, 0] = -0.3
  out["negative"] = ((lo, upper, None), r"lower: row \(h, s, a\) = \(2, 0, 0\) has a negative")
  for bad in (np.nan, np.inf):
    up = upper.copy()
    up[2, 1, 1, 1] = bad
    out[f"{bad} bound"] = ((lower, up, None), r"upper: row \(h, s, a\) = \(2, 1, 1\) holds NaN")
  # Sparse: 3 slots per row, the kernel's next states 0, 1, 2.
  rng = np.random.default_rng(3)
  kernel = rng.dirichlet(np.ones(3), size=(H, S, A)).astype(np.float32)
  ns = np.tile(np.arange(3, dtype=np.int32), (H, S, A, 1))
  far = ns.copy()
  far[1, 0, 1, 2] = S + 3
  out["slot at S + 3"] = ((kernel, kernel, far), r"next_states: row \(h, s, a\) = \(1, 0, 1\)")
  twice = ns.copy()
  twice[0, 3, 1, 2] = 0
  out["repeated"] = (
    (kernel, kernel, twice),
    r"next_states: row \(h, s, a\) = \(0, 3, 1\) names a next state",
  )
  empty = ns.copy()
  empty[0, 2, 0, 1] = -1
  out["empty slot with mass"] = (
    (kernel, kernel, empty),
    r"upper: row \(h, s, a\) = \(0, 2, 0\) gives mass to an empty",
  )
  return out


_FAULTS = _faulty_boxes()


@pytest.mark.parametrize("fault", list(_FAULTS))
def test_a_box_that_holds_no_kernel_is_refused_by_every_eager_door(fault):
  """Before: `extended_lmo` returned 0.5306 on a row whose upper bounds sum to 0.4 (0.5828
  on the valid box), NaN for NaN bounds, lost mass through a slot at S + 3."""
  (lower, upper, ns), message = _FAULTS[fault]
  reward = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (H, S, A)), jnp.float32)
  with pytest.raises(ValueError, match="TransitionSet: " + message):
    oj.TransitionSet(lower, upper, ns)
  # A set rebuilt from leaves (as vmap, tree.map and replace do) skips the constructor:
  # each kernel checks it.
  valid_ns = None if ns is None else np.tile(np.arange(3, dtype=np.int32), (H, S, A, 1))
  template = oj.TransitionSet(np.zeros_like(lower), np.ones_like(upper), valid_ns)
  leaves = [jnp.asarray(x) for x in (lower, upper, ns) if x is not None]
  rebuilt = jax.tree.unflatten(jax.tree.structure(template), leaves)
  policy = jnp.full((H, S, A), 1.0 / A, jnp.float32)
  calls = {
    "extended_lmo": lambda: rebuilt.lmo(reward, 0),
    "extended_lmo ": lambda: rebuilt.lmo(reward, 0),
    "optimistic_policy_evaluation": lambda: rebuilt.evaluate(reward, policy),
    "extended_value_iteration": lambda: rebuilt.value_iteration(reward, 0),
    "policy_vertex": lambda: rebuilt.vertex(
      reward, jnp.zeros((H, S), jnp.int32), jnp.zeros((H, S), jnp.float32), 0
    ),
  }
  for where, call in calls.items():
    with pytest.raises(ValueError, match=where.strip() + ": " + message):
      call()


@pytest.mark.parametrize("fault", ["upper sums to 0.4", "nan bound", "slot at S + 3"])
def test_check_true_refuses_a_traced_box_that_holds_no_kernel(fault):
  (lower, upper, ns), message = _FAULTS[fault]
  reward = jnp.zeros((H, S, A), jnp.float32)
  lmo = jax.jit(lambda lo, up: oj.TransitionSet(lo, up, ns).lmo(reward, 0, check=True).value)
  with pytest.raises(ValueError, match="extended_lmo: " + message.split(" = ")[0]):
    oj.checked(lmo)(lower, upper)
  unchecked = jax.jit(lambda lo, up: oj.TransitionSet(lo, up, ns).lmo(reward, 0).value)
  unchecked(lower, upper)  # traced without check: nothing is checked (and nothing costs)


def test_check_true_passes_a_valid_box_with_the_eager_value():
  reward, lower, upper = _box(2, np.float32)
  eager = oj.TransitionSet(lower, upper).lmo(reward, 1).value
  traced = oj.checked(jax.jit(lambda lo, up: oj.TransitionSet(lo, up).lmo(reward, 1, check=True)))
  assert float(traced(lower, upper).value) == float(eager)


def test_shapes_and_dtypes_are_refused_naming_the_field():
  _, lower, upper = _box(0, np.float32)
  with pytest.raises(
    ValueError, match=r"TransitionSet: lower: expected a float array, got dtype int32"
  ):
    oj.TransitionSet(jnp.zeros(lower.shape, jnp.int32), jnp.ones(upper.shape, jnp.int32))
  with pytest.raises(ValueError, match=r"TransitionSet: upper: shape \(3, 4, 1, 4\) differs"):
    oj.TransitionSet(lower, upper[:, :, :1])
  with pytest.raises(ValueError, match=r"TransitionSet: lower: expected a \[H or 1, S, A"):
    oj.TransitionSet(lower[0], upper[0])
  with pytest.raises(ValueError, match=r"TransitionSet: lower: a dense box is \[H or 1, S, A, S\]"):
    oj.TransitionSet(lower[..., :3], upper[..., :3])
  slots = np.zeros((H, S, A, 2), np.float32)
  with pytest.raises(ValueError, match=r"TransitionSet: next_states: expected an integer array"):
    oj.TransitionSet(slots, slots + 1, slots)
  with pytest.raises(
    ValueError, match=r"TransitionSet: next_states: expected shape \[H or 1, 4, 2, 2\]"
  ):
    oj.TransitionSet(slots, slots + 1, np.zeros((H, S, A, 3), np.int32))
  # Traced: the same static checks, at trace time.
  with pytest.raises(ValueError, match=r"TransitionSet: upper: shape"):
    jax.jit(lambda lo, up: oj.TransitionSet(lo, up).lower)(lower, upper[:, :, :1])


def test_a_checked_set_cannot_be_changed_after_its_check():
  """A set is checked when built; assigning a bound afterwards (a row summing to 0.4) would
  skip that check, so the set is frozen: every field refuses assignment and deletion, and
  the set still answers with its checked bounds. `replace` builds a new set."""
  reward, lower, upper = _box(2)
  ts = oj.TransitionSet(lower, upper)
  before = float(ts.lmo(reward, 0).value)
  bad = np.array(upper)
  bad[0, 0, 0] = 0.1  # the row (0, 0, 0) sums to 0.4: no kernel fits
  for name in ("lower", "upper", "layout", "is_point", "checked", "anything"):
    with pytest.raises(AttributeError, match="immutable"):
      setattr(ts, name, bad)
  with pytest.raises(AttributeError, match="immutable"):
    del ts.upper
  assert float(ts.lmo(reward, 0).value) == before
  point = oj.TransitionSet.point(jnp.asarray(np.full((H, S, A, S), 1.0 / S)))
  with pytest.raises(AttributeError, match="immutable"):
    point.lower = bad
  with pytest.raises(ValueError, match="upper"):
    ts.replace(upper=jnp.asarray(bad)).lmo(reward, 0)
  for again in (pickle.loads(pickle.dumps(ts)), copy.deepcopy(ts), copy.copy(ts)):
    assert again.checked and float(again.lmo(reward, 0).value) == before
    with pytest.raises(AttributeError, match="immutable"):
      again.upper = bad


def _np_soft_backup(reward, lower, upper, next_states, temperature):
  """Soft optimistic backward induction by loops: each row's box minimum by sorting its
  entries' next-state values (ties to the lower next state) and pouring the free mass."""
  horizon, num_states, num_actions = reward.shape
  v_next = np.zeros(num_states)
  values = np.zeros((horizon, num_states))
  q = np.zeros((horizon, num_states, num_actions))
  for h in reversed(range(horizon)):
    hb = 0 if lower.shape[0] == 1 else h
    for s in range(num_states):
      for a in range(num_actions):
        lo, up = lower[hb, s, a], upper[hb, s, a]
        targets = np.arange(lo.shape[-1]) if next_states is None else next_states[hb, s, a]
        vals = np.where(targets >= 0, v_next[np.maximum(targets, 0)], 0.0)
        p = lo.copy()
        free = 1.0 - lo.sum()
        for j in sorted(range(lo.shape[-1]), key=lambda j: (vals[j], targets[j])):
          give = min(max(free, 0.0), up[j] - lo[j])
          p[j] += give
          free -= give
        q[h, s, a] = reward[h, s, a] + p @ vals
      z = -q[h, s] / temperature
      values[h, s] = -temperature * (np.log(np.sum(np.exp(z - z.max()))) + z.max())
    v_next = values[h]
  policy = np.exp(-(q - values[..., None]) / temperature)
  return values, q, policy


@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_soft_value_iteration_matches_a_numpy_loop(layout):
  """`TransitionSet.soft_value_iteration` (entropy-regularised backups for an agent's own
  planning) against loops, in both layouts, under jit and vmap over temperatures; it tends
  to the hard extended DP as the temperature goes to 0."""
  reward, lower, upper = _box(7)
  lower, upper, next_states = np.asarray(lower), np.asarray(upper), None
  if layout == "sparse":  # the same box in slots: every next state, in increasing order
    next_states = np.broadcast_to(np.arange(S, dtype=np.int32), lower.shape).copy()
  ts = oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper), next_states)
  for tau in (0.05, 0.3, 2.0):
    got = jax.jit(ts.soft_value_iteration)(reward, tau)
    want = _np_soft_backup(np.asarray(reward), lower, upper, next_states, tau)
    for field, expected in zip(("values", "q_values", "policy"), want):
      np.testing.assert_allclose(getattr(got, field), expected, atol=1e-10, err_msg=field)
  taus = jnp.asarray([0.05, 0.3, 2.0])
  batched = jax.jit(jax.vmap(ts.soft_value_iteration, in_axes=(None, 0)))(reward, taus)
  single = ts.soft_value_iteration(reward, 0.3)
  chex.assert_trees_all_close(jax.tree.map(lambda x: x[1], batched), single, atol=1e-12)
  cold = ts.soft_value_iteration(reward, 1e-6)
  assert float(cold.values[0, 0]) == pytest.approx(float(ts.lmo(reward, 0).value), abs=1e-5)
  with pytest.raises(ValueError, match="temperature"):
    ts.soft_value_iteration(reward, 0.0)
