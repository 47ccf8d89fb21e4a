"""The sparse transitions layout (`CMDP.next_states`, an int `Setting.support`) against the
dense layout on the same problems, against HiGHS, and against Monte Carlo.

Independent references: the dense kernels (themselves tested against NumPy loops and the
HiGHS extended LP), `scipy`'s HiGHS on the occupancy LP, and sampled frequencies.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax import lp as oj_lp
from optaug_jax._src import estimates, layouts
from optaug_jax._src.agents import base
from optaug_jax._src.env import Trajectory


def _sparse_random(key, *, num_states=7, num_actions=3, horizon=4, num_constraints=2, keep=0.35):
  """A random dense CMDP whose rows have a few possible next states (and its sparse form)."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(key),
    num_states=num_states,
    num_actions=num_actions,
    horizon=horizon,
    num_constraints=num_constraints,
  )
  rng = np.random.default_rng(key)
  p = np.asarray(m.transitions)
  mask = rng.uniform(size=p.shape) < keep
  mask[..., 0] |= ~mask.any(-1)  # every row keeps a next state
  p = np.where(mask, p, 0.0)
  p /= p.sum(-1, keepdims=True)
  dense = m._replace(transitions=jnp.asarray(p))
  return dense, oj.to_sparse(dense)


def _bench(cmdp):
  """A `Benchmark` of `cmdp` with its safe policy (what `make_agent` reads)."""
  policy, slack = oj.safest_policy(cmdp)
  return oj.benchmarks.Benchmark(cmdp, policy, float(slack))


def _slots(dense_values, next_states):
  """Dense `[..., S']` values read at the slots of `next_states` (0 in empty slots)."""
  ns = np.asarray(next_states)
  taken = np.take_along_axis(np.asarray(dense_values), np.maximum(ns, 0), axis=-1)
  return np.where(ns >= 0, taken, 0.0)


def _box(dense, radius, key):
  """A random box around the dense transitions, zero off their support, in both layouts."""
  rng = np.random.default_rng(key)
  p = np.asarray(dense.transitions)
  support = p > 0
  lower = np.where(support, np.clip(p - radius * rng.uniform(size=p.shape), 0, 1), 0.0)
  upper = np.where(support, np.clip(p + radius * rng.uniform(size=p.shape), 0, 1), 0.0)
  return lower, upper


def test_round_trip_and_validation():
  dense, sparse = _sparse_random(0)
  assert sparse.is_sparse and not dense.is_sparse
  np.testing.assert_array_equal(
    np.asarray(oj.to_dense(sparse).transitions), np.asarray(dense.transitions)
  )
  oj.validate_cmdp(sparse)
  ns = np.asarray(sparse.next_states)
  assert ns.shape == sparse.transitions.shape and ns.max() < dense.num_states
  with pytest.raises(ValueError, match="max_next_states"):
    oj.to_sparse(dense, max_next_states=1)


@pytest.mark.parametrize(
  "fault, message",
  [
    (lambda m: m._replace(next_states=m.next_states[..., :1]), "next_states: expected shape"),
    (lambda m: m._replace(next_states=m.next_states.at[0, 0, 0, 0].set(99)), "next_states: 99"),
    (
      lambda m: m._replace(next_states=m.next_states.astype(jnp.float32)),
      "next_states: expected integer",
    ),
    (
      lambda m: m._replace(next_states=m.next_states.at[0, 0, 0, 1].set(m.next_states[0, 0, 0, 0])),
      "names a next state twice",
    ),
    (lambda m: m._replace(next_states=m.next_states.at[0, 0, 0, 0].set(-1)), "empty slot"),
  ],
)
def test_bad_sparse_cmdp_is_named(fault, message):
  _, sparse = _sparse_random(1, keep=0.9)
  with pytest.raises(ValueError, match=message):
    oj.validate_cmdp(fault(sparse))


def test_bad_sparse_support_is_named():
  _, sparse = _sparse_random(2, keep=0.9)
  ns = np.asarray(sparse.next_states)
  with pytest.raises(ValueError, match="names a next state twice"):
    oj.Setting(support=np.concatenate([ns[..., :1], ns[..., :1]], axis=-1))
  with pytest.raises(ValueError, match="at least one possible next state"):
    oj.Setting(support=np.full_like(ns, -1))
  with pytest.raises(ValueError, match="next states must lie in"):
    oj.Setting(support=np.full_like(ns, 1000))
  agent = oj.agents.make_agent(
    "optdual", _bench(sparse), num_episodes=5, setting=oj.Setting(support=ns[..., :, :1, :])
  )
  with pytest.raises(ValueError, match="setting.support"):
    agent.init(
      sparse.thresholds,
      0,
      num_states=sparse.num_states,
      num_actions=sparse.num_actions,
      horizon=sparse.horizon,
    )
  with pytest.raises(ValueError, match="no sparse layout"):
    oj.agents.make_agent("optcmdp", _bench(sparse), num_episodes=5, setting=oj.Setting(support=ns))


@pytest.mark.parametrize(
  "key", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]
)
def test_kernels_agree_with_dense(key):
  dense, sparse = _sparse_random(key)
  ns = sparse.next_states
  rng = np.random.default_rng(key)
  # Integer rewards and values: many ties, broken by next-state index in both layouts.
  reward = jnp.asarray(rng.integers(-2, 3, size=dense.cost.shape).astype(np.float64))
  lower, upper = _box(dense, 0.3, key)
  lo_s, up_s = jnp.asarray(_slots(lower, ns)), jnp.asarray(_slots(upper, ns))
  lower, upper = jnp.asarray(lower), jnp.asarray(upper)

  a = oj.TransitionSet(lower, upper).lmo(reward, 0)
  b = oj.TransitionSet(lo_s, up_s, ns).lmo(reward, 0)
  np.testing.assert_allclose(b.value, a.value, atol=1e-12)
  np.testing.assert_allclose(b.occupancy, a.occupancy, atol=1e-12)
  np.testing.assert_array_equal(b.actions, a.actions)
  greedy_dense = oj.to_dense(
    sparse._replace(
      transitions=b.greedy_transitions[:, :, None, :],
      next_states=b.greedy_next_states[:, :, None, :],
    )
  ).transitions[:, :, 0]
  np.testing.assert_allclose(greedy_dense, a.greedy_transitions, atol=1e-12)

  ev_a = oj.TransitionSet(lower, upper).value_iteration(reward, 0)
  ev_b = oj.TransitionSet(lo_s, up_s, ns).value_iteration(reward, 0)
  np.testing.assert_allclose(ev_b.value, ev_a.value, atol=1e-12)
  np.testing.assert_allclose(
    oj.to_dense(sparse._replace(transitions=ev_b.transitions)).transitions,
    ev_a.transitions,
    atol=1e-12,
  )

  policy = jax.nn.softmax(jnp.asarray(rng.normal(size=dense.cost.shape)))
  ope_a = oj.TransitionSet(lower, upper).evaluate(reward, policy)
  ope_b = oj.TransitionSet(lo_s, up_s, ns).evaluate(reward, policy)
  np.testing.assert_allclose(ope_b[1], ope_a[1], atol=1e-12)
  np.testing.assert_array_equal(
    oj.TransitionSet.point(sparse.transitions, ns).optimal_policy(reward),
    oj.TransitionSet.point(dense.transitions).optimal_policy(reward),
  )
  np.testing.assert_allclose(
    oj.TransitionSet.point(sparse.transitions, ns).occupancy(policy, 0),
    oj.TransitionSet.point(dense.transitions).occupancy(policy, 0),
    atol=1e-12,
  )
  for x, y in zip(oj.policy_values(sparse, policy), oj.policy_values(dense, policy)):
    np.testing.assert_allclose(x, y, atol=1e-12)


def test_sparse_lmo_matches_the_highs_extended_lp():
  dense, sparse = _sparse_random(3, num_states=6, horizon=3)
  rng = np.random.default_rng(3)
  reward = rng.uniform(0, 1, size=dense.cost.shape)
  lower, upper = _box(dense, 0.2, 3)
  ns = sparse.next_states
  b = oj.TransitionSet(jnp.asarray(_slots(lower, ns)), jnp.asarray(_slots(upper, ns)), ns).lmo(
    jnp.asarray(reward), 0
  )
  # HiGHS on the extended LP with a constraint that cannot bind (zero constraint cost).
  q, feasible = oj_lp.solve_extended_lp(
    reward, np.zeros((1,) + reward.shape), lower, upper, 0, np.array([1.0])
  )
  assert feasible
  np.testing.assert_allclose(float(b.value), float(np.sum(reward * q)), atol=1e-7)


def test_stationary_bounds_agree_with_tiled_ones():
  dense, sparse = _sparse_random(4)
  ns = sparse.next_states[:1]  # one support for every step
  first = oj.to_dense(sparse._replace(transitions=sparse.transitions[:1], next_states=ns))
  lower, upper = _box(first, 0.3, 4)
  lo_s, up_s = jnp.asarray(_slots(lower, ns)), jnp.asarray(_slots(upper, ns))
  reward = jnp.asarray(np.random.default_rng(4).uniform(-1, 1, size=dense.cost.shape))
  horizon = dense.horizon
  tile = lambda x: jnp.broadcast_to(x, (horizon,) + x.shape[1:])
  a = oj.TransitionSet(tile(lo_s), tile(up_s), tile(ns)).lmo(reward, 0)
  b = oj.TransitionSet(lo_s, up_s, ns).lmo(reward, 0)
  dense_box = oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper))  # dense, [1, ...]
  c = dense_box.lmo(reward, 0)
  np.testing.assert_allclose(b.occupancy, a.occupancy, atol=1e-12)
  np.testing.assert_allclose(c.occupancy, a.occupancy, atol=1e-12)


def test_sparse_lmo_under_jit_and_vmap():
  dense, sparse = _sparse_random(5)
  ns = sparse.next_states
  lower, upper = _box(dense, 0.3, 5)
  lo_s, up_s = jnp.asarray(_slots(lower, ns)), jnp.asarray(_slots(upper, ns))
  rewards = jnp.asarray(np.random.default_rng(5).uniform(-1, 1, (4,) + dense.cost.shape))
  fn = lambda r: oj.TransitionSet(lo_s, up_s, ns).lmo(r, 0).occupancy
  batched = jax.jit(jax.vmap(fn))(rewards)
  for i in range(4):
    np.testing.assert_allclose(batched[i], fn(rewards[i]), atol=1e-12)


@pytest.mark.slow
def test_sparse_inner_solve_and_gradient_agree_with_dense():
  dense, sparse = _sparse_random(6)
  ns = sparse.next_states
  lower, upper = _box(dense, 0.2, 6)
  lo_s, up_s = jnp.asarray(_slots(lower, ns)), jnp.asarray(_slots(upper, ns))
  problem = oj.inner.InnerProblem(
    cost=dense.cost,
    constraint_costs=dense.constraint_costs,
    thresholds=dense.thresholds,
    transitions=oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)),
    initial_state=0,
  )
  sparse_problem = problem._replace(lower=lo_s, upper=up_s, next_states=ns)
  lam, eta = jnp.array([0.5, 0.0]), 30.0
  a = oj.solve_inner(problem, lam, eta)
  b = oj.solve_inner(sparse_problem, lam, eta)
  assert bool(a.certified) and bool(b.certified)
  np.testing.assert_allclose(b.objective, a.objective, atol=1e-10)
  np.testing.assert_allclose(
    oj.to_dense(sparse._replace(transitions=b.transitions)).transitions, a.transitions, atol=1e-6
  )
  # d objective / d cost = q* (envelope), against central finite differences.
  f = lambda c: (
    oj.solve_inner(sparse_problem._replace(cost=c), lam, eta, gradient="envelope").objective
  )
  grad = jax.grad(f)(dense.cost)
  direction = jnp.asarray(np.random.default_rng(6).normal(size=dense.cost.shape))
  eps = 1e-6
  fd = (f(dense.cost + eps * direction) - f(dense.cost - eps * direction)) / (2 * eps)
  np.testing.assert_allclose(jnp.sum(grad * direction), fd, rtol=1e-5, atol=1e-7)


def _trajectories(cmdp, num, key):
  """`num` episodes of a random policy, sampled in the dense layout."""
  policy = jnp.full(cmdp.cost.shape, 1.0 / cmdp.num_actions)
  keys = jax.random.split(jax.random.PRNGKey(key), num)
  batch = jax.jit(jax.vmap(lambda k: oj.sample_episode(k, cmdp, policy)))(keys)
  return [jax.tree.map(lambda x, i=i: x[i], batch) for i in range(num)]


@pytest.mark.slow
@pytest.mark.parametrize("stationary", [False, True])
def test_counts_and_models_agree_with_dense(stationary):
  dense, sparse = _sparse_random(7, keep=0.5)
  ns = np.asarray(sparse.next_states)
  if stationary:  # one support for every step: the union of the steps' supports
    union = oj.to_dense(sparse).transitions.sum(0) > 0
    stationary_sparse = oj.to_sparse(
      dense._replace(
        transitions=jnp.broadcast_to(union / union.sum(-1, keepdims=True), dense.transitions.shape)
      )
    )
    ns = np.asarray(stationary_sparse.next_states[0])
    support_dense = np.asarray(union)
  else:
    support_dense = np.asarray(dense.transitions) > 0
  sparse_setting = oj.Setting(support=ns, stationary=stationary)
  dense_setting = oj.Setting(support=support_dense, stationary=stationary)
  sizes = dict(num_states=dense.num_states, num_actions=dense.num_actions, horizon=dense.horizon)
  s_state = base.init_state(dense.thresholds, 0, **sizes, setting=sparse_setting)
  d_state = base.init_state(dense.thresholds, 0, **sizes, setting=dense_setting)
  assert s_state.counts.transitions.shape[-1] == ns.shape[-1]
  assert s_state.counts.transitions.shape[0] == (1 if stationary else dense.horizon)
  update_s = jax.jit(base.update_fn(sparse_setting))
  update_d = jax.jit(base.update_fn(dense_setting))
  for traj in _trajectories(dense, 40, 7):
    s_state, d_state = update_s(s_state, traj), update_d(d_state, traj)
  np.testing.assert_array_equal(
    _slots(d_state.counts.transitions, np.broadcast_to(ns, s_state.counts.transitions.shape)),
    s_state.counts.transitions,
  )
  assert int(s_state.counts.off_support) == 0
  model_s = estimates.optimistic_model(s_state.counts, num_episodes=100, setting=sparse_setting)
  model_d = estimates.optimistic_model(d_state.counts, num_episodes=100, setting=dense_setting)
  ns_b = np.broadcast_to(np.asarray(model_s.next_states), model_s.lower.shape)
  for field in ("lower", "upper", "transitions"):
    np.testing.assert_allclose(
      getattr(model_s, field), _slots(getattr(model_d, field), ns_b), atol=1e-12, err_msg=field
    )
  np.testing.assert_allclose(model_s.cost, model_d.cost, atol=1e-12)
  # Every agent built on these models plans the same policy in both layouts.
  for name, extra in (("optaug", {"pretrain_episodes": 0}), ("optdual", {})):
    kw = dict(num_episodes=100, setting=sparse_setting, **extra)
    agent_s = oj.agents.make_agent(name, _bench(dense), **kw)
    agent_d = oj.agents.make_agent(name, _bench(dense), **dict(kw, setting=dense_setting))
    init_s = agent_s.init(dense.thresholds, 0, **sizes)
    init_d = agent_d.init(dense.thresholds, 0, **sizes)
    st_s = init_s._replace(counts=s_state.counts, episode=jnp.asarray(60, jnp.int32))
    st_d = init_d._replace(counts=d_state.counts, episode=jnp.asarray(60, jnp.int32))
    pol_s, _, info_s = jax.jit(agent_s.plan)(st_s)
    pol_d, _, info_d = jax.jit(agent_d.plan)(st_d)
    np.testing.assert_allclose(pol_s, pol_d, atol=1e-8, err_msg=name)
    np.testing.assert_allclose(
      info_s.optimistic_cost_value, info_d.optimistic_cost_value, atol=1e-8, err_msg=name
    )


def test_off_support_observations_are_counted():
  dense, sparse = _sparse_random(8, keep=0.5)
  ns = np.asarray(sparse.next_states)
  setting = oj.Setting(support=ns)
  sizes = dict(num_states=dense.num_states, num_actions=dense.num_actions, horizon=dense.horizon)
  state = base.init_state(dense.thresholds, 0, **sizes, setting=setting)
  # An episode that moves from 0 to a next state outside (h=0, s=0, a=0)'s slots.
  outside = next(t for t in range(dense.num_states) if t not in ns[0, 0, 0].tolist())
  horizon = dense.horizon
  states = jnp.asarray([0, outside] + [0] * (horizon - 1), jnp.int32)
  traj = Trajectory(
    states=states,
    actions=jnp.zeros((horizon,), jnp.int32),
    costs=jnp.zeros((horizon,)),
    constraint_costs=jnp.zeros((2, horizon)),
  )
  state = base.update_fn(setting)(state, traj)
  assert int(state.counts.off_support) >= 1
  assert int(state.counts.visits[0, 0, 0]) == 1
  assert int(state.counts.transitions[0, 0, 0].sum()) == 0
  with pytest.warns(UserWarning, match="outside the declared sparse support"):
    found = oj.support_violations(state.counts, setting)
  assert int(found.counts.sum()) == int(state.counts.off_support)


def test_sparse_sampling_matches_occupancy():
  """Monte Carlo: state frequencies of 20,000 sparse episodes against the exact
  occupancy (4.5 standard errors, per state and step)."""
  _, sparse = _sparse_random(9)
  policy = jax.nn.softmax(jnp.asarray(np.random.default_rng(9).normal(size=sparse.cost.shape)))
  num = 20000
  keys = jax.random.split(jax.random.PRNGKey(9), num)
  trajs = jax.jit(jax.vmap(lambda k: oj.sample_episode(k, sparse, policy)))(keys)
  states = np.asarray(trajs.states[:, :-1])  # [num, H]
  freq = np.stack(
    [np.bincount(states[:, h], minlength=sparse.num_states) / num for h in range(sparse.horizon)]
  )
  exact = np.asarray(
    oj.TransitionSet.point(sparse.transitions, sparse.next_states).occupancy(policy, 0)
  ).sum(-1)
  se = np.sqrt(exact * (1 - exact) / num) + 1e-12
  assert np.all(np.abs(freq - exact) <= 4.5 * se + 1e-9)


def test_solve_lp_agrees_across_layouts():
  dense, sparse = _sparse_random(10)
  a, b = oj.solve_lp(dense), oj.solve_lp(sparse)
  np.testing.assert_allclose(b.value, a.value, atol=1e-9)
  np.testing.assert_allclose(b.occupancy, a.occupancy, atol=1e-7)


@pytest.mark.slow
def test_sparse_benchmarks_agree_with_dense_and_run():
  for make in (
    lambda sp: oj.benchmarks.gridworld(5, sparse=sp),
    lambda sp: oj.benchmarks.queue(capacity=20, horizon=12, sparse=sp),
  ):
    d, s = make(False), make(True)
    np.testing.assert_array_equal(oj.to_dense(s.cmdp).transitions, d.cmdp.transitions)
    np.testing.assert_allclose(s.cmdp.thresholds, d.cmdp.thresholds)
    np.testing.assert_allclose(s.slack, d.slack, atol=1e-9)
    np.testing.assert_allclose(oj.solve_lp(s.cmdp).value, oj.solve_lp(d.cmdp).value, atol=1e-7)
    setting = oj.Setting(support=s.cmdp.next_states, stationary=True)
    agent = oj.agents.make_agent("optaug", s, num_episodes=6, pretrain_episodes=2, setting=setting)
    state, log = oj.run(agent, jax.random.PRNGKey(0), s.cmdp, num_episodes=6)
    assert np.all(np.isfinite(np.asarray(log.cost_value)))
    # Stationary and sparse: no array of the run's state has S' next states per row.
    for leaf in jax.tree.leaves(state):
      assert leaf.size <= s.cmdp.horizon * s.cmdp.num_states * s.cmdp.num_actions * 2, leaf.shape


def _rows_with_repeats(seed, shape=(3, 5, 2), width=6, num_states=5):
  """Random sparse rows `[*shape, width]` that repeat next states, with empty slots (-1) and
  zero-probability slots; each row sums to 1."""
  rng = np.random.default_rng(seed)
  ns = rng.integers(0, num_states, size=shape + (width,))
  empty = rng.uniform(size=ns.shape) < 0.2
  empty[..., 0] = False  # every row keeps a next state
  ns = np.where(empty, -1, ns)
  p = np.where(empty, 0.0, rng.uniform(size=ns.shape))
  p = np.where(rng.uniform(size=ns.shape) < 0.1, 0.0, p)
  p[..., 0] += 1e-3  # no row of zeros only
  return ns, p / p.sum(-1, keepdims=True)


def _merge_loop(ns, p):
  """Reference: per row, a dict next state -> summed probability (plain Python loops)."""
  rows = []
  for row_ns, row_p in zip(
    ns.reshape(-1, ns.shape[-1]).tolist(), p.reshape(-1, p.shape[-1]).tolist()
  ):
    merged = {}
    for t, w in zip(row_ns, row_p):
      if t >= 0:
        merged[t] = merged.get(t, 0.0) + w
    rows.append(merged)
  return rows


def _repeats(ns):
  """Whether some row names a next state twice (plain loops over the rows)."""
  return any(
    len(set(t for t in row if t >= 0)) < sum(t >= 0 for t in row)
    for row in ns.reshape(-1, ns.shape[-1]).tolist()
  )


def _dense_add_at(ns, p, num_states):
  """Dense rows `[..., S']` of sparse rows, repeats accumulated by `np.add.at`."""
  out = np.zeros(ns.shape[:-1] + (num_states,))
  index = np.indices(ns.shape[:-1])
  for n in range(ns.shape[-1]):
    taken = ns[..., n] >= 0
    np.add.at(out, tuple(i[taken] for i in index) + (ns[..., n][taken],), p[..., n][taken])
  return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_merge_repeated_next_states_against_a_dict_loop(seed):
  ns, p = _rows_with_repeats(seed)
  assert _repeats(ns)  # the input does repeat
  out_ns, out_p = oj.merge_repeated_next_states(ns, p)
  assert out_ns.shape == ns.shape and out_p.shape == p.shape  # N unchanged
  assert out_ns.dtype == np.int32 and out_p.dtype == p.dtype
  assert not _repeats(out_ns)
  np.testing.assert_allclose(out_p.sum(-1), 1.0, rtol=0, atol=1e-12)
  for merged, row_ns, row_p in zip(
    _merge_loop(ns, p), out_ns.reshape(-1, ns.shape[-1]), out_p.reshape(-1, ns.shape[-1])
  ):
    k = len(merged)
    assert row_ns[:k].tolist() == sorted(merged)  # increasing, then empty slots
    np.testing.assert_allclose(row_p[:k], [merged[t] for t in sorted(merged)], rtol=0, atol=1e-15)
    assert np.all(row_ns[k:] == -1) and np.all(row_p[k:] == 0.0)
  # The same model written densely, both ways.
  np.testing.assert_allclose(
    _dense_add_at(out_ns, out_p, 5), _dense_add_at(ns, p, 5), rtol=0, atol=1e-15
  )


def test_merge_keeps_rows_without_repeats():
  """`to_sparse` rows (increasing, no repeats) come back identical; a permuted row without
  repeats comes back sorted, with the same (next state, probability) pairs."""
  _, sparse = _sparse_random(4)
  ns, p = np.asarray(sparse.next_states), np.asarray(sparse.transitions)
  out_ns, out_p = oj.merge_repeated_next_states(ns, p)
  np.testing.assert_array_equal(out_ns, ns)
  np.testing.assert_array_equal(out_p, p)
  perm = np.random.default_rng(4).permutation(ns.shape[-1])
  out_ns, out_p = oj.merge_repeated_next_states(ns[..., perm], p[..., perm])
  np.testing.assert_array_equal(out_ns, ns)
  np.testing.assert_array_equal(out_p, p)
  # Zero-probability next states keep their slot (the agent's support may read them).
  kept_ns, kept_p = oj.merge_repeated_next_states(
    np.array([3, 1, 3, -1]), np.array([0.5, 0.0, 0.5, 0.0])
  )
  assert kept_ns.tolist() == [1, 3, -1, -1] and kept_p.tolist() == [0.0, 1.0, 0.0, 0.0]


def test_cmdp_from_merged_rows_equals_the_dense_cmdp():
  """Rows with repeats (an inventory clipped at 0): validate_cmdp refuses them and names
  the helper; the merged rows make a CMDP equal to the dense one built by np.add.at."""
  m = oj.random_cmdp(jax.random.PRNGKey(5), num_states=5, num_actions=2, horizon=3)
  ns, p = _rows_with_repeats(5, shape=(3, 5, 2), width=6, num_states=5)
  raw = m._replace(transitions=jnp.asarray(p), next_states=jnp.asarray(ns, jnp.int32))
  with pytest.raises(
    ValueError,
    match=r"names a next state twice; merge the repeats .*"
    r"oj\.merge_repeated_next_states\(next_states, transitions\)",
  ):
    oj.validate_cmdp(raw)
  out_ns, out_p = oj.merge_repeated_next_states(raw.next_states, raw.transitions)
  sparse = oj.validate_cmdp(
    m._replace(transitions=jnp.asarray(out_p), next_states=jnp.asarray(out_ns))
  )
  dense = oj.validate_cmdp(m._replace(transitions=jnp.asarray(_dense_add_at(ns, p, 5))))
  np.testing.assert_allclose(oj.to_dense(sparse).transitions, dense.transitions, rtol=0, atol=1e-15)
  np.testing.assert_allclose(oj.solve_lp(sparse).value, oj.solve_lp(dense).value, atol=1e-9)
  policy = jax.nn.softmax(jnp.asarray(np.random.default_rng(5).normal(size=m.cost.shape)))
  for x, y in zip(oj.policy_values(sparse, policy), oj.policy_values(dense, policy)):
    np.testing.assert_allclose(x, y, atol=1e-12)


def test_merge_repeated_next_states_names_bad_input():
  ns, p = np.array([[0, 0, -1]]), np.array([[0.5, 0.5, 0.0]])
  with pytest.raises(ValueError, match="next_states: expected the shape"):
    oj.merge_repeated_next_states(ns[:, :2], p)
  with pytest.raises(ValueError, match="next_states: expected integer"):
    oj.merge_repeated_next_states(ns.astype(np.float64), p)
  with pytest.raises(ValueError, match="next_states: -2"):
    oj.merge_repeated_next_states(np.array([[0, -2, -1]]), p)
  with pytest.raises(ValueError, match="empty slot"):
    oj.merge_repeated_next_states(np.array([[0, -1, -1]]), p)
  float32 = oj.merge_repeated_next_states(ns, p.astype(np.float32))[1]
  assert float32.dtype == np.float32 and float32.tolist() == [[1.0, 0.0, 0.0]]


def test_the_layouts_index_operations_against_numpy_loops():
  """`layouts.Dense`/`Sparse`: the entries of a dense array at the slots, the next state of
  every entry, a sampled slot's next state and an observed next state's slot, against
  loops over the rows (and `to_sparse` for the entries)."""
  dense_cmdp = oj.benchmarks.gridworld(size=4).cmdp
  cmdp = oj.to_sparse(dense_cmdp)
  ns = np.asarray(cmdp.next_states)
  p = np.asarray(dense_cmdp.transitions, np.float64)
  sparse, dense = layouts.of(cmdp.next_states), layouts.of(None)
  assert sparse.sparse and not dense.sparse
  np.testing.assert_allclose(sparse.entries(p), np.asarray(cmdp.transitions), rtol=1e-6)
  assert dense.entries(p) is p
  targets = sparse.targets(ns.shape)
  dense_targets = dense.targets(p.shape)
  h, s, a, n = ns.shape
  rng = np.random.default_rng(0)
  for _ in range(50):
    i, j, k, m = (int(rng.integers(d)) for d in (h, s, a, n))
    assert targets[i, j, k, m] == ns[i, j, k, m]
    assert dense_targets[i, j, k, m] == m
    assert int(sparse.next_state(jnp.int32(m), jnp.asarray(ns[i]), j, k)) == ns[i, j, k, m]
    assert int(dense.next_state(jnp.int32(m), None, j, k)) == m
  steps = jnp.arange(h)
  states = jnp.asarray(rng.integers(s, size=h))
  actions = jnp.asarray(rng.integers(a, size=h))
  observed = jnp.asarray(rng.integers(s, size=h))
  found, slot = jax.jit(sparse.count_slot)(steps, states, actions, observed)
  for t in range(h):
    row = list(ns[t, int(states[t]), int(actions[t])])
    hit = int(observed[t]) in row
    assert bool(found[t]) == hit
    if hit:
      assert int(slot[t]) == row.index(int(observed[t]))
  found, entry = dense.count_slot(steps, states, actions, observed)
  assert bool(jnp.all(found)) and bool(jnp.all(entry == observed))
