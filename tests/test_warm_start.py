"""The warm-started exact inner solve: `planning.policy_vertex` (a vertex named by its policy
and fill order, re-filled in another box) against a NumPy fill loop and the extended LP,
warm solves against Clarabel and cold solves, batching, and OptAug's warm start across
episodes (same multipliers as cold solves of the same models, fewer DPs, exact resume)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj
from optaug_jax._src import planning
from optaug_jax._src.layouts import sparse as sparse_layout

S, A, H = 4, 3, 4


def _box(seed, radius=0.3):
  rng = np.random.default_rng(seed)
  p = rng.dirichlet(np.ones(S), size=(H, S, A))
  lower, upper = ref.random_box(rng, p, radius)
  return jnp.asarray(lower), jnp.asarray(upper), rng


def _fill_loop(order_values, lower, upper):
  """The greedy fill of one row in NumPy: from `lower`, the free mass to the next states in
  ascending order of `order_values` (ties to the lower index), each up to `upper`."""
  p = np.array(lower, dtype=float)
  free = 1.0 - p.sum()
  for t in sorted(range(len(p)), key=lambda t: (order_values[t], t)):
    give = min(max(free, 0.0), upper[t] - lower[t])
    p[t] += give
    free -= give
  return p


def _vertex_loop(actions, order_values, lower, upper, initial_state):
  """Occupancy and greedy transitions of a deterministic policy whose rows are filled in
  the given orders, as loops."""
  lower, upper = np.asarray(lower), np.asarray(upper)
  transitions = np.zeros((H, S, A, S))
  greedy = np.zeros((H, S, S))
  for h in range(H):
    for s in range(S):
      a = int(actions[h, s])
      greedy[h, s] = _fill_loop(np.asarray(order_values[h]), lower[h, s, a], upper[h, s, a])
      transitions[h, s, a] = greedy[h, s]
      for b in range(A):
        if b != a:
          transitions[h, s, b] = np.eye(S)[0]  # never played
  policy = np.eye(A)[np.asarray(actions)]
  return ref.occupancy_loop(transitions, policy, initial_state), greedy


@pytest.mark.parametrize("fill", ["matmul", "sort", "blocked"])
def test_policy_vertex_is_the_dp_vertex_in_its_own_box(fill):
  """Named by the DP's actions and `next_values`, the vertex re-filled in the same box is the
  DP's own: same occupancy, transitions and value (dense, every fill; sparse, full support)."""
  lower, upper, rng = _box(0)
  reward = jnp.asarray(rng.uniform(-1, 1, size=(H, S, A)))
  lmo = oj.TransitionSet(lower, upper, fill=fill).lmo(reward, 1)
  vertex = planning.policy_vertex(
    reward, lmo.actions, lmo.next_values, oj.TransitionSet(lower, upper, fill=fill), 1
  )
  for field in ("occupancy", "greedy_transitions", "value", "state_occupancy"):
    np.testing.assert_allclose(
      getattr(vertex, field), getattr(lmo, field), rtol=1e-12, atol=1e-12, err_msg=field
    )
  next_states = jnp.broadcast_to(jnp.arange(S, dtype=jnp.int32), (1, S, A, S))
  sparse = oj.TransitionSet(lower, upper, next_states).lmo(reward, 1)
  sparse_vertex = planning.policy_vertex(
    reward, sparse.actions, sparse.next_values, oj.TransitionSet(lower, upper, next_states), 1
  )
  np.testing.assert_allclose(sparse_vertex.occupancy, lmo.occupancy, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(sparse_vertex.value, lmo.value, rtol=1e-12)


def test_policy_vertex_against_a_fill_loop_bounds_the_extended_lp():
  """Random policies and fill orders in a random box: the occupancy and transitions of a
  NumPy loop; feasible, so its value bounds the extended LP's optimum from above. Under
  `jit` and `vmap` as one by one."""
  lower, upper, rng = _box(1)
  actions = jnp.asarray(rng.integers(0, A, size=(5, H, S)), jnp.int32)
  orders = jnp.asarray(rng.normal(size=(5, H, S)))
  orders = orders.at[0, 1].set(0.0)  # ties: to the lower index
  reward = jnp.asarray(rng.uniform(-1, 1, size=(H, S, A)))
  batched = jax.jit(
    jax.vmap(lambda a, w: planning.policy_vertex(reward, a, w, oj.TransitionSet(lower, upper), 2))
  )(actions, orders)
  optimum = ref.extended_lp_value(np.asarray(reward), np.asarray(lower), np.asarray(upper), 2)
  for i in range(5):
    one = planning.policy_vertex(reward, actions[i], orders[i], oj.TransitionSet(lower, upper), 2)
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[i], batched), one, rtol=1e-12, atol=1e-12)
    q, greedy = _vertex_loop(actions[i], orders[i], lower, upper, 2)
    np.testing.assert_allclose(one.occupancy, q, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(one.greedy_transitions, greedy, rtol=1e-10, atol=1e-12)
    assert float(one.value) == pytest.approx(float(np.sum(np.asarray(reward) * q)), rel=1e-10)
    assert float(one.value) >= optimum - 1e-9
  # Some random vertex is not the optimum: the bound is not trivially tight.
  assert max(float(jax.tree.map(lambda x: x[i], batched).value) for i in range(5)) > optimum + 1e-3


@pytest.mark.parametrize("slot_major", [False, True])
@pytest.mark.parametrize("stationary", [True, False])
def test_sparse_policy_vertex_against_a_fill_loop(stationary, slot_major, monkeypatch):
  """The sparse layout (3 slots of 4 states, some empty; a stationary `[1, ...]` box and
  support, or one per step): random policies and fill orders against the NumPy loop on the
  same box written densely. Under `jit` and `vmap` as one by one. Both ways of picking
  the rows (`SLOT_MAJOR_PICK_MIN_SLOTS`: slot-major from that many slots)."""
  monkeypatch.setattr(sparse_layout, "SLOT_MAJOR_PICK_MIN_SLOTS", 1 if slot_major else 99)
  rng = np.random.default_rng(7)
  steps, n = (1 if stationary else H), 3
  next_states = np.stack(
    [np.sort(rng.choice(S, size=n, replace=False)) for _ in range(steps * S * A)]
  ).reshape(steps, S, A, n)
  empty = (rng.random((steps, S, A, n)) < 0.3) & (np.arange(n) > 0)
  next_states = np.where(empty, -1, next_states).astype(np.int32)
  p = np.where(empty, 0.0, rng.dirichlet(np.ones(n), size=(steps, S, A)))
  p /= p.sum(-1, keepdims=True)
  lower = np.where(empty, 0.0, np.maximum(p - 0.2, 0.0))
  upper = np.where(empty, 0.0, np.minimum(p + 0.3, 1.0))
  dense = np.zeros((2, H, S, A, S))
  for h, s, a, k in np.ndindex(H, S, A, n):
    if next_states[h % steps, s, a, k] >= 0:
      dense[:, h, s, a, next_states[h % steps, s, a, k]] = (
        lower[h % steps, s, a, k],
        upper[h % steps, s, a, k],
      )
  box = oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper), jnp.asarray(next_states))
  actions = jnp.asarray(rng.integers(0, A, size=(4, H, S)), jnp.int32)
  orders = jnp.asarray(rng.normal(size=(4, H, S))).at[0, 1].set(0.0)  # ties: lower index
  reward = jnp.asarray(rng.uniform(-1, 1, size=(H, S, A)))
  vertex = lambda a, w: planning.policy_vertex(reward, a, w, box, 2)
  batched = jax.jit(jax.vmap(vertex))(actions, orders)
  for i in range(4):
    one = vertex(actions[i], orders[i])
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[i], batched), one, rtol=1e-12, atol=1e-12)
    q, greedy = _vertex_loop(actions[i], orders[i], dense[0], dense[1], 2)
    np.testing.assert_allclose(one.occupancy, q, rtol=1e-10, atol=1e-12)
    slots = np.zeros((H, S, S))
    for h, s, k in np.ndindex(H, S, n):
      if one.greedy_next_states[h, s, k] >= 0:
        slots[h, s, one.greedy_next_states[h, s, k]] += one.greedy_transitions[h, s, k]
    np.testing.assert_allclose(slots, greedy, rtol=1e-10, atol=1e-12)


def _problem(seed, threshold_scale=0.9, radius=0.2):
  m = oj.random_cmdp(
    jax.random.PRNGKey(seed), num_states=S, num_actions=A, horizon=H, num_constraints=1
  )
  rng = np.random.default_rng(seed)
  lower, upper = ref.random_box(rng, np.asarray(m.transitions), radius)
  return oj.inner.InnerProblem(
    cost=m.cost,
    constraint_costs=m.constraint_costs,
    thresholds=m.thresholds * threshold_scale,
    transitions=oj.TransitionSet(jnp.asarray(lower), jnp.asarray(upper)),
    initial_state=m.initial_state,
  ), rng


@jax.jit
def _solve(problem, lam, eta, warm):
  return oj.solve_inner(problem, lam, eta, gradient=None, warm=warm)


@jax.jit
def _cold(problem, lam, eta):
  return oj.solve_inner(problem, lam, eta, gradient=None)


def _assert_exact(problem, lam, eta, sol):
  optimum, _ = ref.inner_cvxpy(
    problem.cost,
    problem.constraint_costs,
    problem.lower,
    problem.upper,
    int(problem.initial_state),
    problem.thresholds,
    lam,
    eta,
  )
  scale = max(1.0, abs(optimum))
  assert abs(float(sol.objective) - optimum) <= 1e-7 * scale
  assert float(sol.gap) <= 1e-9 * scale and bool(sol.certified)


@pytest.mark.parametrize("seed", range(4))
def test_warm_solves_are_exact_whatever_the_hint(seed):
  """A random hint, and the hint a solve leaves to the next episode's problem (costs moved by
  1%, prox centre at the last `mu*`): the optimum of Clarabel and of the cold solve."""
  problem, rng = _problem(seed)
  lam, eta = jnp.asarray([rng.uniform(0.0, 2.0)]), float(10 ** rng.uniform(-1, 2))
  hint = oj.inner.WarmStart(
    actions=jnp.asarray(rng.integers(0, A, size=(2, H, S)), jnp.int32),
    values=jnp.asarray(rng.normal(size=(2, H, S))),
    valid=jnp.asarray(True),
  )
  cold = _cold(problem, lam, eta)
  warm = _solve(problem, lam, eta, hint)
  _assert_exact(problem, lam, eta, warm)
  assert float(warm.objective) == pytest.approx(float(cold.objective), rel=1e-10, abs=1e-12)
  mu = oj.dual_step(cold.occupancy, problem.constraint_costs, problem.thresholds, lam, eta)
  moved = problem._replace(
    cost=jnp.clip(
      problem.cost * (1 + 0.01 * jnp.asarray(rng.normal(size=problem.cost.shape))), 0.0, 1.0
    )
  )
  warm2, cold2 = _solve(moved, mu, eta, cold.warm), _cold(moved, mu, eta)
  _assert_exact(moved, mu, eta, warm2)
  assert float(warm2.objective) == pytest.approx(float(cold2.objective), rel=1e-10, abs=1e-12)
  assert bool(warm2.warm.valid) and not bool(
    oj.solve_inner(problem, lam, eta, solver=oj.inner.frank_wolfe(num_iters=3)).warm.valid
  )


def _two_actions():
  """One state, one step, two actions: cost (0, 1), constraint cost (1, 0), alpha = 1/2:
  `f(t) = 1 - t + [lambda + eta (t - 1/2)]_+^2 / (2 eta)` over the weight `t` of action 0."""
  ones = jnp.ones((1, 1, 2, 1))
  return oj.inner.InnerProblem(
    cost=jnp.asarray([[[0.0, 1.0]]]),
    constraint_costs=jnp.asarray([[[[1.0, 0.0]]]]),
    thresholds=jnp.asarray([0.5]),
    transitions=oj.TransitionSet(ones, ones),
    initial_state=0,
  )


def test_warm_start_at_the_kink_proves_the_optimum_in_one_dp():
  """From lambda = 0, eta = 10: `t* = 0.6`, `mu* = 1` (the kink of `Phi(mu) = min(mu, 1)`).
  The next episode's problem (the same, prox centre 1) has `t* = 1/2`, `f* = 1/2 + 1/20`:
  its hint (both actions) gives the kink at once, and one DP proves it (cold: 3)."""
  problem = _two_actions()
  first = oj.solve_inner(problem, jnp.asarray([0.0]), 10.0, gradient=None)
  assert float(first.occupancy[0, 0, 0]) == pytest.approx(0.6, abs=1e-12)
  mu = oj.dual_step(
    first.occupancy, problem.constraint_costs, problem.thresholds, jnp.asarray([0.0]), 10.0
  )
  assert float(mu[0]) == pytest.approx(1.0, abs=1e-12)
  assert sorted(np.asarray(first.warm.actions).ravel().tolist()) == [0, 1]
  warm = oj.solve_inner(problem, mu, 10.0, gradient=None, warm=first.warm)
  cold = oj.solve_inner(problem, mu, 10.0, gradient=None)
  for sol in (warm, cold):
    assert float(sol.occupancy[0, 0, 0]) == pytest.approx(0.5, abs=1e-12)
    assert float(sol.objective) == pytest.approx(0.55, abs=1e-12)
    assert bool(sol.certified)
  assert int(warm.dp_calls) == 1 and int(cold.dp_calls) == 3


def test_warm_solves_batched_as_unbatched_and_bad_hints_refused():
  """A vmapped batch mixing no hint, a good hint and a random one against each unbatched
  solve; a hint of the wrong shape is a ValueError naming `warm`."""
  problem, rng = _problem(5)
  lam, eta = jnp.asarray([0.4]), 5.0
  good = _cold(problem, lam, eta).warm
  random = oj.inner.WarmStart(
    actions=jnp.asarray(rng.integers(0, A, size=(2, H, S)), jnp.int32),
    values=jnp.asarray(rng.normal(size=(2, H, S))),
    valid=jnp.asarray(True),
  )
  hints = jax.tree.map(
    lambda *x: jnp.stack(x), oj.inner.WarmStart.cold(H, S, jnp.float64), good, random
  )
  lams = jnp.asarray([[0.4], [0.4], [1.3]])
  batched = jax.jit(
    jax.vmap(lambda lam_, w: oj.solve_inner(problem, lam_, eta, gradient=None, warm=w))
  )(lams, hints)
  for i in range(3):
    one = oj.solve_inner(
      problem, lams[i], eta, gradient=None, warm=jax.tree.map(lambda x: x[i], hints)
    )
    for field in ("occupancy", "objective", "gap", "dp_calls", "policy"):
      np.testing.assert_allclose(
        getattr(batched, field)[i],
        getattr(one, field),
        rtol=1e-12,
        atol=1e-12,
        err_msg=f"{field} {i}",
      )
  with pytest.raises(ValueError, match="warm: expected a WarmStart"):
    oj.solve_inner(problem, lam, eta, warm=oj.inner.WarmStart.cold(H, S + 1))


def _agent(m, warm_start, num_episodes=60):
  pi, slack = oj.safest_policy(m)
  return oj.optaug(
    num_episodes=num_episodes,
    safe_policy=pi,
    pretrain_episodes=10,
    slack=slack,
    eta=20.0,
    bonus_scale=0.1,
    warm_start=warm_start,
  )


def test_optaug_warm_start_keeps_the_cold_solves_multipliers_with_fewer_dps():
  """Along a warm-started OptAug run, each plan's multipliers and optimistic values are those
  of a cold plan from the same state, every solve certified; the warm plans pay fewer DPs."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(2), num_states=S, num_actions=A, horizon=H, num_constraints=1
  )
  warm_agent, cold_agent = _agent(m, True), _agent(m, False)
  key = jax.random.PRNGKey(0)
  state, _ = oj.run(warm_agent, key, m, num_episodes=10)  # pre-training
  assert isinstance(state, oj.agents.OptAugState) and not bool(state.warm.valid)
  chunk = jax.jit(lambda s: oj.run(warm_agent, key, m, num_episodes=5, state=s))
  plan_warm, plan_cold = jax.jit(warm_agent.plan), jax.jit(cold_agent.plan)
  dps = {"warm": [], "cold": []}
  for _ in range(8):
    state, log = chunk(state)
    assert bool(state.warm.valid) and bool(jnp.all(log.certified))
    _, after_warm, info_warm = plan_warm(state)
    _, after_cold, info_cold = plan_cold(state.agent)
    np.testing.assert_allclose(
      after_warm.multipliers, after_cold.multipliers, rtol=1e-9, atol=1e-10
    )
    np.testing.assert_allclose(
      info_warm.optimistic_constraint_values,
      info_cold.optimistic_constraint_values,
      rtol=1e-8,
      atol=1e-9,
    )
    assert bool(info_warm.certified) and bool(info_cold.certified)
    dps["warm"].append(int(info_warm.extras["dp_calls"]))
    dps["cold"].append(int(info_cold.extras["dp_calls"]))
  assert np.mean(dps["warm"]) < np.mean(dps["cold"]), dps


def test_warm_started_run_resumes_bit_for_bit():
  """The hint lives in the state: a run continued from its state is the uninterrupted run."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(4), num_states=S, num_actions=A, horizon=H, num_constraints=1
  )
  agent = _agent(m, True, num_episodes=30)
  key = jax.random.PRNGKey(3)
  full_state, full_log = oj.run(agent, key, m, num_episodes=30)
  state, log_a = oj.run(agent, key, m, num_episodes=17)
  state, log_b = oj.run(agent, key, m, num_episodes=13, state=state)
  chex.assert_trees_all_equal(
    jax.tree.map(lambda a, b: jnp.concatenate([a, b]), log_a, log_b), full_log
  )
  chex.assert_trees_all_equal(state, full_state)
