"""`kernels.batch_cond`: per-member `lax.cond` semantics, branches skipped under vmap."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj

batch_cond = oj.kernels.batch_cond


def _counting_branches():
  """Branches that record, on the host, each time their compiled code runs."""
  calls = []

  def true_fun(x):
    jax.debug.callback(lambda: calls.append("true"))
    return jnp.sin(x) + 1.0

  def false_fun(x):
    jax.debug.callback(lambda: calls.append("false"))
    return x**2

  return calls, true_fun, false_fun


@pytest.mark.parametrize(
  "pred, expected_calls",
  [
    ([True, True, True], {"true"}),
    ([False, False, False], {"false"}),
    ([True, False, True], {"true", "false"}),
  ],
)
def test_vmap_runs_only_the_branches_some_member_takes(pred, expected_calls):
  calls, true_fun, false_fun = _counting_branches()
  x = jnp.array([0.5, -1.0, 2.0])
  out = jax.jit(jax.vmap(lambda p, v: batch_cond(p, true_fun, false_fun, v)))(jnp.array(pred), x)
  jax.effects_barrier()
  assert set(calls) == expected_calls
  expected = [np.sin(v) + 1.0 if p else v**2 for p, v in zip(pred, np.asarray(x))]
  np.testing.assert_allclose(out, expected, rtol=1e-6)
  # Plain lax.cond under vmap (the behaviour batch_cond avoids) runs both branches.
  calls.clear()
  jax.jit(jax.vmap(lambda p, v: jax.lax.cond(p, true_fun, false_fun, v)))(jnp.array(pred), x)
  jax.effects_barrier()
  assert set(calls) == {"true", "false"}


def test_unbatched_jit_nested_vmap_and_grad():
  f = lambda p, v: batch_cond(p, lambda y: y**3, lambda y: -2.0 * y, v)
  assert float(jax.jit(f)(True, 2.0)) == 8.0 and float(jax.jit(f)(False, 2.0)) == -4.0
  preds = jnp.array([[True, True], [False, True], [False, False]])
  x = jnp.arange(6.0).reshape(3, 2) + 1.0
  np.testing.assert_allclose(
    jax.vmap(jax.vmap(f))(preds, x), np.where(preds, np.asarray(x) ** 3, -2.0 * np.asarray(x))
  )
  g = jax.vmap(jax.grad(lambda v: f(v > 1.5, v)))(jnp.array([1.0, 2.0]))
  np.testing.assert_allclose(g, [-2.0, 12.0])  # d(-2y) = -2, d(y^3) = 3 y^2 = 12


def test_optaug_batched_state_in_pretraining_runs_no_inner_solve():
  """A vmapped run from a batched fresh state (the episode counter is then batched, as in
  chunked runs): in pre-training no inner solve runs at all; once every seed explores,
  they all do. Counted by an inner solver of our own (an `InnerSolver` callable) that wraps
  the exact one and calls back to the host."""
  solves = []
  exact = oj.inner.exact()

  def counting(problem, multipliers, eta, **kw):
    jax.debug.callback(lambda: solves.append(1))
    return exact(problem, multipliers, eta, **kw)

  m = oj.random_cmdp(
    jax.random.PRNGKey(2), num_states=3, num_actions=2, horizon=3, num_constraints=1
  )
  pi, slack = oj.safest_policy(m)
  agent = oj.optaug(
    num_episodes=20, safe_policy=pi, pretrain_episodes=6, slack=slack, eta=5.0, inner=counting
  )
  keys = jax.random.split(jax.random.PRNGKey(7), 3)
  init = agent.init(
    m.thresholds,
    m.initial_state,
    num_states=m.num_states,
    num_actions=m.num_actions,
    horizon=m.horizon,
  )
  fresh = jax.tree.map(lambda x: jnp.stack([x] * 3), init)
  go = jax.jit(jax.vmap(lambda k, s: oj.run(agent, k, m, num_episodes=6, state=s)))
  state, log = go(keys, fresh)
  jax.effects_barrier()
  assert bool(jnp.all(log.pretraining)) and not solves
  _, log = go(keys, state)  # episodes 6-11: every seed explores
  jax.effects_barrier()
  assert not bool(jnp.any(log.pretraining)) and len(solves) == 6


@pytest.mark.slow  # 18-31 s (2-core CPU): in the slow suite to keep the default under 10 min
def test_optaug_batch_split_between_phases_matches_single_runs():
  """Seeds resumed at different episodes (one pre-training, one exploring) in one vmapped
  run: every seed's log equals its own unbatched run; a batch all in pre-training equals
  the same runs too (only the pre-training branch runs then)."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(2), num_states=3, num_actions=2, horizon=3, num_constraints=1
  )
  pi, slack = oj.safest_policy(m)
  agent = oj.optaug(
    num_episodes=20,
    safe_policy=pi,
    pretrain_episodes=6,
    slack=slack,
    eta=5.0,
    inner=oj.inner.frank_wolfe(num_iters=5),
  )
  keys = jax.random.split(jax.random.PRNGKey(7), 2)
  starts = [
    oj.run(agent, keys[0], m, num_episodes=4)[0],  # 2 pre-training left
    oj.run(agent, keys[1], m, num_episodes=9)[0],
  ]  # exploring
  states = jax.tree.map(lambda *x: jnp.stack(x), *starts)
  go = jax.jit(jax.vmap(lambda k, s: oj.run(agent, k, m, num_episodes=5, state=s)))
  state, log = go(keys, states)
  for j in range(2):
    s1, l1 = oj.run(agent, keys[j], m, num_episodes=5, state=starts[j])
    chex.assert_trees_all_close(l1, jax.tree.map(lambda x: x[j], log), rtol=1e-6, atol=1e-7)
    chex.assert_trees_all_close(s1, jax.tree.map(lambda x: x[j], state), rtol=1e-6, atol=1e-7)
  assert np.asarray(log.pretraining).tolist() == [[True, True, False, False, False], [False] * 5]
  _, early = jax.jit(jax.vmap(lambda k: oj.run(agent, k, m, num_episodes=5)))(keys)
  for j in range(2):
    _, l1 = oj.run(agent, keys[j], m, num_episodes=5)
    chex.assert_trees_all_close(l1, jax.tree.map(lambda x: x[j], early), rtol=1e-6, atol=1e-7)
  assert bool(jnp.all(early.pretraining))


for_active = oj.kernels.for_active


def _counting_fn():
  """A function of its operands that records, on the host, each member it computes (a
  debug callback under `vmap` runs once per member of the batch it is in)."""
  calls = []

  def fn(x, w):
    jax.debug.callback(lambda first: calls.append(first), x[0])
    return {"y": jnp.sin(x)[:, None] * w, "total": jnp.sum(x)}

  return calls, fn


@pytest.mark.parametrize(
  "active, computed",
  [
    ([0, 0, 0, 0, 1, 0, 0, 0], 1),  # one member: a batch of 1
    ([0, 1, 0, 0, 1, 0, 0, 0], 2),
    ([1, 0, 1, 0, 0, 0, 1, 0], 4),  # 3 members: the bucket of 4
    ([1, 1, 1, 1, 1, 0, 0, 0], 8),  # 5 members: the whole batch
    ([1] * 8, 8),
  ],
)
def test_for_active_computes_the_active_members_alone(active, computed):
  calls, fn = _counting_fn()
  x = jnp.arange(24.0, dtype=jnp.float32).reshape(8, 3) / 7.0
  w = jnp.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], jnp.float32)
  active = jnp.array(active, bool)
  out = jax.jit(jax.vmap(lambda a, v: for_active(a, fn, v, w)))(active, x)
  jax.effects_barrier()
  assert len(calls) == computed
  alone = [jax.jit(fn)(x[i], w) for i in range(8)]  # each member unbatched
  for i in np.flatnonzero(np.asarray(active)):
    chex.assert_trees_all_equal(jax.tree.map(lambda t: t[i], out), alone[i])
  # Plain vmap (what a batched loop body does) computes every member.
  calls.clear()
  jax.jit(jax.vmap(lambda v: fn(v, w)))(x)
  jax.effects_barrier()
  assert len(calls) == 8


def test_for_active_unbatched_nested_vmap_and_loop():
  fn = lambda x, w: jnp.cos(x) * w + x**2
  x = jnp.linspace(-1.0, 2.0, 12, dtype=jnp.float32).reshape(3, 4)
  w = jnp.float32(0.75)
  # Unbatched: fn itself, active or not.
  for i in range(3):
    for a in (True, False):
      got = jax.jit(lambda a, v: for_active(a, fn, v, w))(a, x[i, 0])
      np.testing.assert_array_equal(got, jax.jit(fn)(x[i, 0], w))
  # Nested vmap (outer members with different active sets): every active member's value.
  active = jnp.array([[1, 0, 0, 1], [0, 0, 0, 0], [0, 1, 1, 1]], bool)
  out = jax.jit(jax.vmap(jax.vmap(lambda a, v: for_active(a, fn, v, w))))(active, x)
  ref = np.asarray(jax.vmap(jax.vmap(lambda v: fn(v, w)))(x))
  np.testing.assert_array_equal(np.asarray(out)[np.asarray(active)], ref[np.asarray(active)])
  # Unbatched active, batched operands: every member computed.
  out = jax.jit(jax.vmap(lambda v: for_active(True, fn, v, w)))(x[0])
  np.testing.assert_array_equal(out, ref[0])

  # In the body of a batched while loop, where finished members are discarded: each member
  # ends as its own unbatched loop does.
  def doubling(n, y):
    def body(c):
      i, z = c
      return i + 1, for_active(i < n, lambda t: 2.0 * t + 1.0, z)

    return jax.lax.while_loop(lambda c: c[0] < n, body, (0, y))[1]

  counts, start = jnp.array([1, 3, 0, 2, 5]), jnp.linspace(0.0, 1.0, 5)
  out = jax.jit(jax.vmap(doubling))(counts, start)
  for i in range(5):
    assert float(out[i]) == float(jax.jit(doubling)(counts[i], start[i]))
  assert batching_sizes(16) == (1, 2, 4, 8, 16) and batching_sizes(6) == (1, 2, 4, 6)


def batching_sizes(n):
  from optaug_jax._src import batching

  return batching.bucket_sizes(n)
