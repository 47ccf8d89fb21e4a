"""Agents and the runner: pre-training, dual steps, batching, retracing, resuming."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import references as ref

import optaug_jax as oj
from optaug_jax import experiment

S, A, H, I = 4, 3, 5, 2  # noqa: E741 (the paper's axis names)


def _cmdp(seed=0, dtype=None):
  return oj.random_cmdp(
    jax.random.PRNGKey(seed), num_states=S, num_actions=A, horizon=H, num_constraints=I, dtype=dtype
  )


def _optaug(m, num_episodes=30, pretrain=10, fw_iters=30, **kw):
  """OptAug with Frank-Wolfe's `fw_iters` steps as its inner solver."""
  pi, slack = oj.safest_policy(m)
  kw = {"eta": 20.0, "inner": oj.inner.frank_wolfe(num_iters=fw_iters), **kw}
  return oj.optaug(
    num_episodes=num_episodes, safe_policy=pi, pretrain_episodes=pretrain, slack=slack, **kw
  )


@pytest.mark.slow  # 18-21 s; in the slow suite to keep the default under 10 minutes
def test_log_shapes_and_pretraining_phase():
  m = _cmdp()
  agent = _optaug(m)
  state, log = oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=30)
  chex.assert_shape([log.cost_value, log.inner_gap, log.pretraining, log.sampled_cost], (30,))
  chex.assert_shape(
    [
      log.constraint_values,
      log.multipliers,
      log.optimistic_constraint_values,
      log.sampled_constraint_costs,
    ],
    (30, I),
  )
  assert int(state.episode) == 30
  assert float(state.counts.visits.sum()) == 30 * H
  pretraining = np.asarray(log.pretraining)
  np.testing.assert_array_equal(pretraining, np.arange(30) < 10)
  # Pre-training plays the safe policy: its exact values, zero multipliers and gaps.
  pi, _ = oj.safest_policy(m)
  v, vd = oj.policy_values(m, pi)
  np.testing.assert_allclose(log.cost_value[:10], v, rtol=1e-12)
  np.testing.assert_allclose(log.constraint_values[:10], np.broadcast_to(vd, (10, I)), rtol=1e-12)
  np.testing.assert_array_equal(log.multipliers[:10], 0.0)
  np.testing.assert_array_equal(log.inner_gap[:10], 0.0)
  assert np.all(np.isfinite(np.asarray(log.cost_value)))


# 19 s; slow suite (default suite under 10 minutes; test_optaug_plan_matches_numpy_reference
# stays in the default suite)
@pytest.mark.slow
def test_optaug_dual_steps_follow_the_schedule_against_numpy():
  """Each optimistic episode's lambda_{k+1} against the NumPy step (its own optimistic
  model, Frank-Wolfe and dual step) from the agent's counts, with eta_fn(count), count =
  optimistic episodes so far (the one schedule convention)."""
  npr = experiment.numpy_reference
  m = _cmdp(1)
  # A uniform pre-training policy (every first action visited), a first constraint that
  # opposes the cost (d_0 = 1 - c) and thresholds just above the uniform policy's values (it
  # stays a safe baseline, with slack 0.02) and small bonuses after 50 pre-training episodes:
  # the optimistic constraint binds, so the dual step is exercised.
  m = m._replace(constraint_costs=m.constraint_costs.at[0].set(1.0 - m.cost))
  pi = jnp.full((H, S, A), 1.0 / A)
  _, v_uniform = oj.policy_values(m, pi)
  m = m._replace(thresholds=v_uniform + 0.02)
  alpha = np.asarray(m.thresholds)
  eta_fn = lambda count: 2.0 + 3.0 * count
  agent = oj.optaug(
    num_episodes=100,
    safe_policy=pi,
    pretrain_episodes=50,
    slack=0.01,
    eta=eta_fn,
    bonus_scale=0.01,
    inner=oj.inner.frank_wolfe(num_iters=40),
  )
  key = jax.random.PRNGKey(1)
  state, _ = oj.run(agent, key, m, num_episodes=50)  # pre-training
  plan = jax.jit(agent.plan)
  positive = 0
  for k in range(50, 55):
    counts = tuple(np.array(x) for x in state.counts[:4])
    c_t, d_t, lower, upper = npr.optimistic_model(
      *counts, num_episodes=100, delta=0.1, bonus_scale=0.01
    )
    lam = np.asarray(state.multipliers)
    q, _ = npr.frank_wolfe(c_t, d_t, lower, upper, 0, alpha, lam, eta_fn(k - 50), num_iters=40)
    want = np.maximum(lam + eta_fn(k - 50) * (np.einsum("ihsa,hsa->i", d_t, q) - alpha), 0)
    policy, new_state, _ = plan(state)
    np.testing.assert_allclose(new_state.multipliers, want, rtol=1e-7, atol=1e-9)
    fallback = npr.greedy_fallback(q, c_t, d_t, lower, upper, 0, want)
    np.testing.assert_allclose(policy, npr.policy_from_occupancy(q, fallback), atol=1e-7)
    positive += int(np.any(want > 0))
    state, _ = oj.run(agent, key, m, num_episodes=1, state=state)
  assert positive >= 2  # the dual step is exercised, not stuck at 0


def test_paper_schedule_and_pretrain_bound():
  sched = oj.agents.paper_eta_schedule(10, 2.0, 0.5)
  sigma = 10 / (0.5 * 2.0)
  assert float(sched(0)) == pytest.approx((5 * sigma) ** 2.5)
  assert float(sched(3)) == pytest.approx((14 * sigma) ** 2.5)
  k = oj.agents.pretrain_episodes_bound(num_states=10, num_actions=4, horizon=10, slack=1.0, nu=0.5)
  assert k == int(np.ceil(max(2 * 100 * 4 * 1000 / 0.5, 4 * 10 * 10 * 4 * 1e4 / 0.25)))


def test_optdual_dual_steps_and_default_eta_against_numpy():
  """OptDual's best response and dual step against the NumPy extended DP, with the paper's
  default eta = sqrt(rho^2 / (H^2 I K)), rho = H / slack."""
  npr = experiment.numpy_reference
  m = _cmdp(2)
  _, v_uniform = oj.policy_values(m, jnp.full((H, S, A), 1.0 / A))
  m = m._replace(thresholds=0.3 * v_uniform)  # tight: the dual step engages
  alpha = np.asarray(m.thresholds)
  slack = 0.5  # a claimed slack: only the default step size uses it
  agent = oj.optdual(num_episodes=25, slack=slack, bonus_scale=0.05)
  eta = np.sqrt((H / slack) ** 2 / (H**2 * I * 25))
  key = jax.random.PRNGKey(2)
  state, log = oj.run(agent, key, m, num_episodes=3)
  assert not np.any(np.asarray(log.pretraining))
  plan = jax.jit(agent.plan)
  positive = 0
  for _ in range(6):
    counts = tuple(np.array(x) for x in state.counts[:4])
    c_t, d_t, lower, upper = npr.optimistic_model(
      *counts, num_episodes=25, delta=0.1, bonus_scale=0.05
    )
    lam = np.asarray(state.multipliers)
    _, q = npr.extended_lmo(c_t + np.tensordot(lam, d_t, axes=1), lower, upper, 0)
    want = np.maximum(lam + eta * (np.einsum("ihsa,hsa->i", d_t, q) - alpha), 0)
    policy, new_state, _ = plan(state)
    np.testing.assert_allclose(new_state.multipliers, want, rtol=1e-9, atol=1e-12)
    reached = q.sum(-1, keepdims=True) > 0  # OptDual is greedy (one-hot) everywhere
    np.testing.assert_allclose(
      np.where(reached, policy, 0),
      np.where(reached, q, 0) / np.where(reached, q.sum(-1, keepdims=True), 1),
      atol=1e-12,
    )
    positive += int(np.any(want > 0))
    state, _ = oj.run(agent, key, m, num_episodes=1, state=state)
  assert positive >= 1


@pytest.mark.slow  # 18-21 s; in the slow suite to keep the default under 10 minutes
def test_run_vmapped_over_64_seeds_matches_single_runs():
  m = _cmdp(3)
  agent = _optaug(m, num_episodes=12, pretrain=4, fw_iters=10)
  keys = jax.random.split(jax.random.PRNGKey(0), 64)
  many = jax.jit(jax.vmap(lambda k: oj.run(agent, k, m, num_episodes=12)))
  state, log = many(keys)
  chex.assert_shape(log.cost_value, (64, 12))
  for j in [0, 17, 63]:
    s1, l1 = oj.run(agent, keys[j], m, num_episodes=12)
    chex.assert_trees_all_close(l1, jax.tree.map(lambda x: x[j], log), rtol=1e-9, atol=1e-10)
    chex.assert_trees_all_close(s1, jax.tree.map(lambda x: x[j], state), rtol=1e-9, atol=1e-10)
  # Different seeds explore differently.
  assert np.unique(np.asarray(state.counts.visits).reshape(64, -1), axis=0).shape[0] > 1


@pytest.mark.slow
def test_run_vmapped_over_a_batch_of_cmdps():
  """One compiled call over (key, CMDP) pairs; each CMDP has its own safe policy and slack,
  so the agent is built inside the vmapped function (its closure holds tracers)."""
  keys = jax.random.split(jax.random.PRNGKey(5), 6)
  cmdps = jax.vmap(
    lambda k: oj.random_cmdp(k, num_states=S, num_actions=A, horizon=H, num_constraints=I)
  )(keys)

  def one(key, m):
    pi, slack = oj.safest_policy(m)
    agent = oj.optaug(num_episodes=10, safe_policy=pi, pretrain_episodes=3, slack=slack, eta=10.0)
    return oj.run(agent, key, m, num_episodes=10)

  _, log = jax.jit(jax.vmap(one))(keys, cmdps)
  chex.assert_shape(log.cost_value, (6, 10))
  for j in [0, 5]:
    _, l1 = one(keys[j], jax.tree.map(lambda x: x[j], cmdps))
    chex.assert_trees_all_close(l1, jax.tree.map(lambda x: x[j], log), rtol=1e-9, atol=1e-10)
  # The fixed-agent pattern for OptDual (no per-CMDP baseline needed).
  agent = oj.optdual(num_episodes=10, eta=0.5)
  _, log = jax.jit(jax.vmap(lambda k, m: oj.run(agent, k, m, num_episodes=10)))(keys, cmdps)
  chex.assert_shape(log.multipliers, (6, 10, I))


@pytest.mark.slow  # 13 s; slow suite (default suite under 10 minutes)
def test_no_retracing_across_calls():
  m = _cmdp(4)
  agent = _optaug(m, num_episodes=8, pretrain=2, fw_iters=5)

  @jax.jit
  @chex.assert_max_traces(n=1)
  def go(key, cmdp):
    return oj.run(agent, key, cmdp, num_episodes=8)

  for seed in range(3):
    go(jax.random.PRNGKey(seed), m)
  go(jax.random.PRNGKey(9), _cmdp(5))  # another CMDP of the same shapes: no retrace
  before = oj.run._cache_size()
  oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=8)
  oj.run(agent, jax.random.PRNGKey(1), m, num_episodes=8)
  assert oj.run._cache_size() - before <= 1


@pytest.mark.slow  # 18-31 s (2-core CPU): in the slow suite to keep the default under 10 min
def test_resume_equals_uninterrupted_run():
  m = _cmdp(6)
  agent = _optaug(m, num_episodes=20, pretrain=5, fw_iters=10)
  key = jax.random.PRNGKey(3)
  full_state, full_log = oj.run(agent, key, m, num_episodes=20)
  state, log_a = oj.run(agent, key, m, num_episodes=7)
  state, log_b = oj.run(agent, key, m, num_episodes=13, state=state)
  joined = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), log_a, log_b)
  chex.assert_trees_all_equal(joined, full_log)
  chex.assert_trees_all_equal(state, full_state)


@pytest.mark.slow  # 18-31 s (2-core CPU): in the slow suite to keep the default under 10 min
def test_float32_default_run_is_finite():
  m = _cmdp(7, dtype=jnp.float32)
  pi, slack = oj.safest_policy(m)
  # The paper's eta schedule: eta ~ 1e5 and growing.
  agent = oj.optaug(num_episodes=15, safe_policy=pi, pretrain_episodes=5, slack=slack)
  state, log = oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=15)
  assert log.cost_value.dtype == jnp.float32 and state.multipliers.dtype == jnp.float32
  for leaf in jax.tree.leaves(log):
    assert np.all(np.isfinite(np.asarray(leaf, np.float64)))


@pytest.mark.slow  # 15-25 s; another default test covers the kernel (default suite under 10 min)
def test_regret_decomposition_on_a_small_cmdp():
  """The paper's decomposition, measured: in the optimistic model the augmented Lagrangian
  drives the constraint to alpha (optimisation error ~ 0), and the true violation (the
  estimation error, from optimism) shrinks as the counts grow."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=3, num_constraints=1
  )
  lp = oj.solve_lp(m)
  pi, slack = oj.safest_policy(m)
  k_total = 2000
  agent = oj.optaug(
    num_episodes=k_total,
    safe_policy=pi,
    pretrain_episodes=50,
    slack=slack,
    eta=10.0,
    bonus_scale=0.05,
  )
  _, log = oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=k_total)
  alpha = float(m.thresholds[0])
  early, late = slice(100, 200), slice(k_total - 100, k_total)
  optimistic = np.asarray(log.optimistic_constraint_values[:, 0]) - alpha
  assert np.max(np.abs(optimistic[late])) < 5e-3
  viol = np.maximum(np.asarray(log.constraint_values[:, 0]) - alpha, 0)
  assert np.mean(viol[late]) < 0.5 * np.mean(viol[early])
  assert np.mean(viol[late]) < 0.06
  gap = np.asarray(log.cost_value) - lp.value
  assert np.mean(np.abs(gap[late])) < 0.5 * np.mean(np.abs(gap[early]))


@pytest.mark.parametrize(
  "kwargs, message",
  [
    ({"pretrain_episodes": 50}, "pretrain_episodes"),
    ({"delta": 1.5}, "delta"),
    ({"nu": 1.0}, "nu"),
    ({"slack": None, "eta": None}, "slack: required"),
    ({"slack": -1.0}, "slack: must be positive"),
    ({"eta": -2.0}, "eta: must be positive"),
    ({"safe_policy": np.ones((H, S, A))}, "safe_policy"),
    ({"inner": "frank_wolfe"}, "inner: expected an inner solver"),
  ],
)
def test_optaug_rejects_bad_configuration(kwargs, message):
  m = _cmdp()
  pi, slack = oj.safest_policy(m)
  args = {"num_episodes": 20, "safe_policy": pi, "pretrain_episodes": 5, "slack": 1.0, **kwargs}
  with pytest.raises(ValueError, match=message):
    oj.optaug(**args)


def test_optdual_rejects_bad_configuration():
  with pytest.raises(ValueError, match="rho or the baseline's slack"):
    oj.optdual(num_episodes=10)
  with pytest.raises(ValueError, match="num_episodes"):
    oj.optdual(num_episodes=0, eta=1.0)


@pytest.mark.parametrize(
  "step_rule", ["standard", pytest.param("linesearch", marks=pytest.mark.slow)]
)  # 15 s each
def test_optaug_plan_matches_numpy_reference(step_rule):
  """The jitted plan (optimistic model, Frank-Wolfe, dual step) against the independent
  NumPy implementation, from counts gathered by a few episodes."""
  npr = experiment.numpy_reference
  m = _cmdp(8)
  pi, slack = oj.safest_policy(m)
  agent = oj.optaug(
    num_episodes=40,
    safe_policy=pi,
    pretrain_episodes=6,
    slack=slack,
    eta=25.0,
    bonus_scale=0.3,
    inner=oj.inner.frank_wolfe(num_iters=60, step_rule=step_rule),
  )
  state, _ = oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=8)  # 2 optimistic steps
  policy, new_state, info = jax.jit(agent.plan)(state)
  counts = tuple(np.array(x) for x in state.counts[:4])
  c_t, d_t, lower, upper = npr.optimistic_model(
    *counts, num_episodes=40, delta=0.1, bonus_scale=0.3
  )
  q, gap = npr.frank_wolfe(
    c_t,
    d_t,
    lower,
    upper,
    0,
    np.asarray(m.thresholds),
    np.asarray(state.multipliers),
    25.0,
    num_iters=60,
    step_rule=step_rule,
  )
  lam = np.maximum(
    np.asarray(state.multipliers)
    + 25.0 * (np.einsum("ihsa,hsa->i", d_t, q) - np.asarray(m.thresholds)),
    0,
  )
  np.testing.assert_allclose(new_state.multipliers, lam, rtol=1e-7, atol=1e-9)
  np.testing.assert_allclose(info.inner_gap, gap, rtol=1e-6, atol=1e-9)
  # Where q_h(s) = 0: the extended DP's action on the gradient c + D^T lambda+ (NumPy loop).
  fallback = npr.greedy_fallback(q, c_t, d_t, lower, upper, 0, lam)
  assert np.any(q.sum(-1) == 0)  # the fallback is exercised
  np.testing.assert_allclose(policy, npr.policy_from_occupancy(q, fallback), atol=1e-7)
  np.testing.assert_allclose(
    info.optimistic_constraint_values, np.einsum("ihsa,hsa->i", d_t, q), rtol=1e-7, atol=1e-9
  )
  np.testing.assert_allclose(info.optimistic_cost_value, np.sum(c_t * q), rtol=1e-7)


def test_registry_builds_every_agent_and_a_new_module_registers_itself():
  """`safe_baseline` lives in its own module and touches no other file: the registry finds
  it. Its exact values are those of the safe policy (NumPy occupancy loop)."""
  assert {"optaug", "optdual", "optprimaldual", "optcmdp", "safe_baseline"} <= set(oj.agents.AGENTS)
  bench = oj.benchmarks.make_benchmark("factored")
  required = {"optaug": {"pretrain_episodes": 2}}  # no problem-independent default
  for name in oj.agents.AGENTS:
    agent = oj.agents.make_agent(name, bench, num_episodes=10, **required.get(name, {}))
    assert isinstance(agent, oj.Agent)
  agent = oj.agents.make_agent("safe_baseline", bench, num_episodes=10)
  _, log = oj.run(agent, jax.random.PRNGKey(0), bench.cmdp, num_episodes=3)
  q = ref.occupancy_loop(bench.cmdp.transitions, bench.safe_policy, 0)
  np.testing.assert_allclose(
    log.constraint_values[:, 0], np.sum(np.asarray(bench.cmdp.constraint_costs)[0] * q), rtol=1e-12
  )
  with pytest.raises(ValueError, match="does not accept"):
    oj.agents.make_agent("optdual", bench, num_episodes=10, inner=oj.inner.exact())
  with pytest.raises(ValueError, match="unknown agent"):
    oj.agents.make_agent("optnothing", bench, num_episodes=10)


@pytest.mark.parametrize(
  "make",
  [
    lambda m: _optaug(m),
    lambda m: oj.optdual(num_episodes=30, dual_optimizer=optax.adam(0.1)),
    lambda m: oj.agents.optprimaldual(num_episodes=30),
  ],
  ids=["optaug", "optdual_optax", "optprimaldual"],
)
def test_composed_states_replace_agent_fields_through(make):
  """`_replace` on a state that composes an `AgentState` writes its fields (`episode`,
  `multipliers`, ...) into `state.agent`, the agent's own fields into the state, and refuses
  a name that is neither (as a NamedTuple does)."""
  m = _cmdp()
  state = make(m).init(m.thresholds, m.initial_state, num_states=S, num_actions=A, horizon=H)
  assert isinstance(state, oj.agents.ComposedAgentState)
  own = state._fields[1]  # the agent's own field, after `agent`
  changed = state._replace(episode=jnp.asarray(7, jnp.int32), multipliers=jnp.full((I,), 0.5))
  assert type(changed) is type(state)
  assert int(changed.agent.episode) == 7 and int(changed.episode) == 7
  np.testing.assert_array_equal(np.asarray(changed.agent.multipliers), [0.5, 0.5])
  assert getattr(changed, own) is getattr(state, own)
  assert state.agent.episode is not changed.agent.episode  # the original is unchanged
  replaced_own = state._replace(**{own: getattr(state, own)}, episode=jnp.asarray(3, jnp.int32))
  assert int(replaced_own.episode) == 3
  with pytest.raises(ValueError, match="unexpected field names: \\['bogus'\\]"):
    state._replace(bogus=1)


def test_optdual_paper_step_is_public_and_is_the_agents_step():
  """`oj.agents.paper_step_size` is `sqrt(rho^2 / (H^2 I K))` with `rho = H / gamma` (NumPy),
  and OptDual given it as `eta` runs bit for bit as with `eta=None`."""
  bench = oj.benchmarks.make_benchmark("factored")
  cmdp, k = bench.cmdp, 200
  h, i = cmdp.horizon, cmdp.num_constraints
  step = oj.agents.paper_step_size(horizon=h, num_constraints=i, num_episodes=k, slack=bench.slack)
  np.testing.assert_allclose(step, np.sqrt((h / bench.slack) ** 2 / (h**2 * i * k)), rtol=1e-6)
  assert float(
    oj.agents.paper_step_size(horizon=h, num_constraints=i, num_episodes=k, rho=2.0)
  ) == (pytest.approx(np.sqrt(4.0 / (h**2 * i * k))))
  with pytest.raises(ValueError, match="slack"):
    oj.agents.paper_step_size(horizon=h, num_constraints=i, num_episodes=k)
  key = jax.random.PRNGKey(0)
  paper = oj.run(oj.optdual(num_episodes=k, slack=bench.slack), key, cmdp, num_episodes=30)
  given = oj.run(oj.optdual(num_episodes=k, eta=step), key, cmdp, num_episodes=30)
  np.testing.assert_array_equal(paper[1].multipliers, given[1].multipliers)


def test_plan_info_needs_only_the_optimistic_values():
  """An agent of one's own without an inner solve or pre-training reports the two
  optimistic values only; the log holds no gap (0, in the run's dtype), no pre-training
  and certified solves."""
  bench = oj.benchmarks.make_benchmark("factored")
  cmdp = bench.cmdp
  safe = jnp.asarray(bench.safe_policy)

  def plan(state):
    q = oj.TransitionSet.point(cmdp.transitions).occupancy(safe, state.initial_state)
    info = oj.agents.PlanInfo(
      optimistic_cost_value=jnp.sum(cmdp.cost * q),
      optimistic_constraint_values=jnp.einsum("ihsa,hsa->i", cmdp.constraint_costs, q),
    )
    return safe, state, info

  agent = oj.Agent(
    init=oj.agents.init_state, plan=plan, update=lambda s, t: oj.agents.update_state(s, t)
  )
  _, log = jax.jit(lambda key: oj.run(agent, key, cmdp, num_episodes=5))(jax.random.PRNGKey(0))
  assert log.inner_gap.dtype == log.optimistic_cost_value.dtype
  np.testing.assert_array_equal(log.inner_gap, 0.0)
  assert not np.any(log.pretraining) and np.all(log.certified)


@pytest.mark.parametrize("form", ["kwargs", "wrapped"])
def test_make_agents_gives_every_option_to_a_factory_that_takes_kwargs(form):
  """The issue's silent drop: a factory written `(*args, **kwargs)` (or wrapped without
  `functools.wraps`) received `num_episodes` alone from `make_agents`, without the
  setting, delta, bonus or slack the other agents got, and ran at its own defaults. Now
  it receives every shared option and its own entry of per-agent ones."""
  received = {}

  def my_agent(*args, **kwargs):
    received.update(kwargs)
    return oj.optdual(*args, **kwargs)

  factory = my_agent if form == "kwargs" else (lambda *a, **k: my_agent(*a, **k))
  name = f"test_silent_drop_{form}"
  oj.agents.register_agent(name, problem_args=lambda b: {"slack": b.slack})(factory)
  try:
    bench = oj.benchmarks.make_benchmark("factored")
    assert oj.agents.accepts_any_option(name)
    options = {
      "setting": "bura2022",
      "delta": 0.05,
      "bonus_scale": 0.1,
      "eta": {"optaug": 20.0, name: 0.5},
      "pretrain_episodes": {"optaug": 10},
    }
    agents = oj.agents.make_agents(["optaug", name], bench, num_episodes=50, options=options)
    assert set(agents) == {"optaug", name}
    assert received["num_episodes"] == 50 and received["slack"] == bench.slack
    assert received["delta"] == 0.05 and received["bonus_scale"] == 0.1
    assert received["eta"] == 0.5 and "pretrain_episodes" not in received
    assert received["setting"].log_factor == "bura2022"  # the named setting, built
    with pytest.raises(TypeError, match="nonsense"):  # reaches the factory, which refuses
      oj.agents.make_agent(name, bench, num_episodes=50, nonsense=1)
  finally:
    oj.agents.AGENTS.pop(name)
