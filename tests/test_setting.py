"""Named settings (`Setting`): known costs, pooled counts, a known support, log factors.

Each option is checked against an independent construction: a NumPy loop of Bura et al.
(2022)'s confidence box, counts pooled by hand, an extended LP (HiGHS) over the masked
box, and the true costs.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj


def _play(cmdp, policy, num_episodes, seed=0):
  """Trajectories of `policy` and their counts (float64)."""
  keys = jax.random.split(jax.random.PRNGKey(seed), num_episodes)
  trajs = jax.vmap(lambda k: oj.sample_episode(k, cmdp, policy))(keys)
  counts = oj.init_counts(
    num_states=cmdp.num_states,
    num_actions=cmdp.num_actions,
    horizon=cmdp.horizon,
    num_constraints=cmdp.num_constraints,
    dtype=jnp.float64,
  )
  counts, _ = jax.lax.scan(lambda c, t: (oj.update_counts(c, t), None), counts, trajs)
  return trajs, counts


@pytest.fixture(scope="module")
def media():
  return oj.benchmarks.make_benchmark("media_streaming", dtype=jnp.float64)


def test_bura2022_box_matches_their_code_as_loops(media):
  """Pooled counts, their log factor and delta, support, uniform p-hat when unvisited."""
  cmdp = media.cmdp
  # A mixed policy visits most pairs; some (s, a) stay unvisited (both kinds checked).
  policy = 0.5 * media.safe_policy + 0.25
  trajs, counts = _play(cmdp, policy, 40)
  setting = oj.named_setting("bura2022", cmdp)
  assert setting.resolved_delta == 0.01
  model = oj.optimistic_model(counts, num_episodes=1000, setting=setting)
  support = np.asarray(cmdp.transitions[0]) > 0
  assert np.all((np.asarray(cmdp.transitions) > 0) == support)  # stationary support
  lower, upper, _ = ref.bura2022_box(
    np.asarray(trajs.states),
    np.asarray(trajs.actions),
    cmdp.num_states,
    cmdp.num_actions,
    1000,
    0.01,
    support,
  )
  visits = np.asarray(counts.visits).sum(0)
  assert 0 < (visits == 0).sum() < visits.size
  for h in range(cmdp.horizon):
    np.testing.assert_allclose(model.lower[h], lower, atol=1e-14)
    np.testing.assert_allclose(model.upper[h], upper, atol=1e-14)
  # Known costs: exactly the truth, no bonus.
  np.testing.assert_array_equal(model.cost, cmdp.cost)
  np.testing.assert_array_equal(model.constraint_costs, cmdp.constraint_costs)


def test_stationary_model_is_the_model_of_hand_pooled_counts():
  rng = np.random.default_rng(3)
  h, s, a, i = 4, 3, 2, 2
  visits = rng.integers(0, 5, size=(h, s, a)).astype(float)
  visits[:, 0, 1] = [0, 0, 3, 0]  # a pair seen at one step only
  trans = np.zeros((h, s, a, s))
  for idx in np.ndindex(h, s, a):
    trans[idx] = rng.multinomial(int(visits[idx]), [0.5, 0.3, 0.2])
  csum = visits * rng.uniform(size=visits.shape)
  dsum = visits[None] * rng.uniform(size=(i, h, s, a))
  counts = oj.Counts(*(jnp.asarray(x) for x in (visits, trans, csum, dsum)))
  pooled = oj.Counts(
    visits=jnp.asarray(np.repeat(visits.sum(0, keepdims=True), h, 0)),
    transitions=jnp.asarray(np.repeat(trans.sum(0, keepdims=True), h, 0)),
    cost_sums=jnp.asarray(np.repeat(csum.sum(0, keepdims=True), h, 0)),
    constraint_cost_sums=jnp.asarray(np.repeat(dsum.sum(1, keepdims=True), h, 1)),
  )
  stationary = oj.Setting(stationary=True)
  got = oj.optimistic_model(counts, num_episodes=50, setting=stationary)
  want = oj.optimistic_model(pooled, num_episodes=50)
  chex.assert_trees_all_close(got, want, rtol=1e-14)
  # Pair (0, 1) is visited at step 2 only, yet its box is narrowed at step 0 too.
  narrow = dict(num_episodes=50, bonus_scale=0.05)
  per_step = oj.optimistic_model(counts, **narrow)
  assert np.all(np.asarray(per_step.upper[0, 0, 1]) == 1.0)
  assert np.any(
    np.asarray(oj.optimistic_model(counts, setting=stationary, **narrow).upper[0, 0, 1]) < 1.0
  )


def _trap(dtype=jnp.float64):
  """3 states, 2 actions, H=3: state 2 has cost 0, but no (s, a) can reach it."""
  p = np.zeros((3, 3, 2, 3))
  p[:, :, 0] = [1.0, 0.0, 0.0]
  p[:, :, 1] = [0.0, 1.0, 0.0]
  cost = np.ones((3, 3, 2))
  cost[:, 2] = 0.0
  cmdp = oj.CMDP(
    transitions=jnp.asarray(p, dtype),
    cost=jnp.asarray(cost, dtype),
    constraint_costs=jnp.zeros((1, 3, 3, 2), dtype),
    thresholds=jnp.ones((1,), dtype),
    initial_state=jnp.asarray(0),
  )
  return oj.validate_cmdp(cmdp)


def test_support_makes_an_impossible_state_unreachable():
  """Unvisited boxes: the optimist plans to reach the free state 2 unless the support
  says it cannot be reached; the extended LP (HiGHS) over the masked box agrees."""
  cmdp = _trap()
  counts = oj.init_counts(
    num_states=3, num_actions=2, horizon=3, num_constraints=1, dtype=jnp.float64
  )
  setting = oj.Setting(support=np.asarray(cmdp.transitions) > 0, cost=np.asarray(cmdp.cost))
  for s, expect_reach in ((oj.Setting(cost=np.asarray(cmdp.cost)), True), (setting, False)):
    model = oj.optimistic_model(counts, num_episodes=10, setting=s)
    lmo = oj.TransitionSet(model.lower, model.upper).lmo(model.cost, 0)
    reach = float(lmo.occupancy[1:, 2].sum())
    lp_value = ref.extended_lp_value(
      np.asarray(model.cost), np.asarray(model.lower), np.asarray(model.upper), 0
    )
    assert float(lmo.value) == pytest.approx(lp_value, abs=1e-9)
    if expect_reach:
      assert reach == pytest.approx(2.0) and lp_value == pytest.approx(1.0)
    else:
      assert reach == 0.0 and lp_value == pytest.approx(3.0)
  # The point estimate of an unvisited pair is uniform over its support.
  model = oj.optimistic_model(counts, num_episodes=10, setting=setting)
  np.testing.assert_array_equal(model.transitions, cmdp.transitions)


def test_known_costs_have_no_bonus_and_stationary_shapes_broadcast(media):
  cmdp = media.cmdp
  _, counts = _play(cmdp, media.safe_policy, 3)
  learned = oj.optimistic_model(counts, num_episodes=100)
  assert float(jnp.max(cmdp.cost - learned.cost)) > 0.5  # the bonus is large at 3 episodes
  known = oj.Setting(
    cost=np.asarray(cmdp.cost[0]), constraint_costs=np.asarray(cmdp.constraint_costs[:, 0])
  )
  model = oj.optimistic_model(counts, num_episodes=100, setting=known)
  np.testing.assert_array_equal(model.cost, cmdp.cost)
  np.testing.assert_array_equal(model.constraint_costs, cmdp.constraint_costs)
  chex.assert_trees_all_equal(model.lower, learned.lower)  # transitions untouched


def test_a_known_array_stays_a_host_constant_and_a_traced_one_is_traced(media):
  """A known cost or support (`Setting.cost`, `.support`) was broadcast and reduced by
  `jnp` under `jit`: XLA folded those constants again at every compilation (3 s per program
  for a dense 200-state support). A concrete one is now a NumPy array (the program's
  constant as it is); a traced one (a setting vmapped over CMDPs) still goes through JAX,
  with the same values."""
  from optaug_jax._src.checking import arguments

  cmdp = media.cmdp
  cost = np.asarray(cmdp.cost[0])  # stationary: repeated over h
  host = arguments.known_array(cost, "cost", cmdp.cost.shape, jnp.float32)
  assert isinstance(host, np.ndarray) and host.dtype == np.float32
  traced = jax.jit(lambda c: arguments.known_array(c, "cost", cmdp.cost.shape, jnp.float32))
  np.testing.assert_array_equal(traced(cost), host)
  np.testing.assert_array_equal(host, np.broadcast_to(cost, cmdp.cost.shape))
  # The model under jit equals the model op by op, with a known support and known costs.
  _, counts = _play(cmdp, media.safe_policy, 3)
  known = oj.Setting(support=np.asarray(cmdp.transitions) > 0, cost=cost, stationary=True)
  eager = oj.optimistic_model(counts, num_episodes=100, setting=known)
  jitted = jax.jit(lambda c: oj.optimistic_model(c, num_episodes=100, setting=known))(counts)
  chex.assert_trees_all_close(jitted, eager, rtol=1e-6)


def test_log_factor_and_delta_conventions(media):
  cmdp = media.cmdp
  _, counts = _play(cmdp, media.safe_policy, 5)
  k, s, a, h = 1000, cmdp.num_states, cmdp.num_actions, cmdp.horizon
  # The default is the paper's setting with delta 0.1, as before settings existed.
  chex.assert_trees_all_equal(
    oj.optimistic_model(counts, num_episodes=k),
    oj.optimistic_model(counts, num_episodes=k, delta=0.1),
  )
  bura = oj.Setting(log_factor="bura2022")
  assert bura.resolved_delta == 0.01
  chex.assert_trees_all_equal(
    oj.optimistic_model(counts, num_episodes=k, setting=bura),
    oj.optimistic_model(counts, num_episodes=k, delta=0.01, setting=bura),
  )
  # bonus_scale=0 radii read off the log factor: an unvisited-free row's 14 L / (3 n) term.
  visits = np.asarray(counts.visits)
  idx = np.unravel_index(np.argmax(visits), visits.shape)
  n = visits[idx]
  for setting, log_l in (
    (oj.Setting(), np.log(6 * s * a * h * k / 0.1)),
    (bura, np.log(6 * s**2 * h * k / 0.01)),
  ):
    model = oj.optimistic_model(counts, num_episodes=k, setting=setting)
    p_bar = np.asarray(counts.transitions)[idx] / n
    beta = 2 * np.sqrt(p_bar * (1 - p_bar) * log_l / n) + 14 * log_l / (3 * n)
    np.testing.assert_allclose(model.upper[idx], np.minimum(p_bar + beta, 1.0), rtol=1e-13)
    assert setting.whole_simplex_visits(
      num_states=s, num_actions=a, horizon=h, num_constraints=1, num_episodes=k
    ) == int(14 * log_l / 3)


@pytest.mark.parametrize(
  "kwargs, message",
  [
    ({"log_factor": "efroni"}, "log_factor"),
    ({"delta": 1.5}, "delta"),
    ({"cost": np.full((3, 2), 1.5)}, "cost"),
    ({"constraint_costs": np.zeros((3, 2))}, "constraint_costs"),
    ({"support": np.ones((3, 2, 3))}, "bool"),
    ({"support": np.zeros((3, 2, 3), bool)}, "at least one"),
    ({"stationary": "yes"}, "stationary"),
  ],
)
def test_bad_settings_are_refused(kwargs, message):
  with pytest.raises(ValueError, match=message):
    oj.Setting(**kwargs)


def test_setting_shape_mismatch_and_names_are_refused(media):
  counts = oj.init_counts(
    num_states=10, num_actions=2, horizon=10, num_constraints=1, dtype=jnp.float64
  )
  with pytest.raises(ValueError, match=r"setting.cost: expected shape \(10, 10, 2\)"):
    oj.optimistic_model(counts, num_episodes=5, setting=oj.Setting(cost=np.zeros((4, 2))))
  with pytest.raises(ValueError, match="setting.support"):
    oj.optimistic_model(
      counts, num_episodes=5, setting=oj.Setting(support=np.ones((3, 2, 3), bool))
    )
  with pytest.raises(ValueError, match="named_setting"):
    oj.optdual(10, eta=0.1, setting="bura2022")
  with pytest.raises(ValueError, match="cmdp"):
    oj.named_setting("bura2022")
  with pytest.raises(ValueError, match="name"):
    oj.named_setting("dope", media.cmdp)


@pytest.mark.slow
def test_every_counting_agent_runs_the_bura2022_setting_jit_and_vmap():
  bench = oj.benchmarks.make_benchmark("factored", dtype=jnp.float64)
  names = [n for n in oj.agents.AGENTS if "setting" in oj.agents.agent_options(n)]
  assert {"optaug", "optdual", "optprimaldual", "optcmdp", "safe_baseline"} <= set(names)
  keys = jax.random.split(jax.random.PRNGKey(1), 2)
  for name in names:
    options = {"pretrain_episodes": 2} if name == "optaug" else {}
    agent = oj.agents.make_agent(name, bench, num_episodes=6, setting="bura2022", **options)
    run = jax.jit(jax.vmap(lambda k, a=agent: oj.run(a, k, bench.cmdp, num_episodes=6)))
    _, logs = run(keys)
    _, one = oj.run(agent, keys[1], bench.cmdp, num_episodes=6)
    np.testing.assert_allclose(logs.cost_value[1], one.cost_value, atol=1e-9, err_msg=name)
    # factored is deterministic: with known costs and support every box is the true
    # transition, so the optimistic values are the true values of the policy played.
    # DOPE and OptPess-LP report their own LP's values: optimistic cost (a bonus
    # subtracted), pessimistic constraints (a bonus added).
    if name in ("dope", "optpess_lp"):
      assert np.all(np.asarray(logs.optimistic_cost_value) < np.asarray(logs.cost_value))
      assert np.all(
        np.asarray(logs.optimistic_constraint_values) > np.asarray(logs.constraint_values)
      ), name
      continue
    np.testing.assert_allclose(logs.optimistic_cost_value, logs.cost_value, atol=1e-9, err_msg=name)
    np.testing.assert_allclose(
      logs.optimistic_constraint_values, logs.constraint_values, atol=1e-9, err_msg=name
    )


def test_stationary_sparse_support_keeps_one_step_and_refuses_steps_that_differ():
  """A stationary setting pools the transition counts into one slot layout: an `[H, S, A,
  N]` support (as `named_setting` takes it from a sparse CMDP) is kept as `[1, S, A, N]`,
  so the counts, the box and the extended DP's slots have no step axis, and the model is
  that of the `[S, A, N]` support; a support whose steps differ is refused, naming the
  step."""
  bench = oj.benchmarks.make_benchmark("gridworld", size=3, sparse=True, dtype=jnp.float64)
  cmdp = bench.cmdp
  per_step = oj.named_setting("bura2022", cmdp)
  assert np.asarray(per_step.support).shape[0] == cmdp.horizon
  one_step = oj.Setting(
    log_factor="bura2022",
    stationary=True,
    cost=per_step.cost,
    constraint_costs=per_step.constraint_costs,
    support=np.asarray(cmdp.next_states)[0],
  )
  assert per_step.next_states().shape == (1,) + cmdp.next_states.shape[1:]
  states = []
  for setting in (per_step, one_step):
    agent = oj.optdual(50, eta=0.5, setting=setting)
    state, _ = oj.run(agent, jax.random.PRNGKey(0), cmdp, num_episodes=30)
    states.append(state)
  # The same run; only the stamp of the options differs (the two settings are written
  # differently): a state resumes the agent built with its own options.
  assert int(states[0].options) != int(states[1].options)
  unstamped = [s._replace(options=np.int32(0)) for s in states]
  chex.assert_trees_all_equal(unstamped[0], unstamped[1])
  model = oj.optimistic_model(states[0].counts, num_episodes=50, setting=per_step)
  for name in ("lower", "upper", "transitions", "next_states"):
    assert getattr(model, name).shape[0] == 1, name
  other = oj.optimistic_model(states[1].counts, num_episodes=50, setting=one_step)
  chex.assert_trees_all_equal(model, other)
  differing = np.array(cmdp.next_states)
  row = np.flatnonzero(differing[1, 0, 0] >= 0)[:2]
  differing[1, 0, 0, row] = differing[1, 0, 0, row[::-1]]  # same states, other slots
  with pytest.raises(ValueError, match="support: stationary .* step 1 differs from step 0"):
    oj.Setting(log_factor="bura2022", stationary=True, support=differing)
  oj.Setting(log_factor="bura2022", support=differing)  # per-step counts: allowed
