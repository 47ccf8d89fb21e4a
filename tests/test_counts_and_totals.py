"""Counts past 2^24, running totals of 10^7 episodes, the episode counter near 2^31, and
observations that contradict a declared support: exact integers, compensated sums, refusals
and reports (the reliability probe's cases 4, 5, 6 and 8)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax._src.metrics import summarize_episode

F32 = jnp.float32


def _trajectory(cost, constraint_cost, horizon=1):
  """An episode through (s=0, a=0) -> s'=1 at every step, with the given observed costs."""
  return oj.Trajectory(
    states=jnp.asarray([0] + [1] * horizon, jnp.int32),
    actions=jnp.zeros((horizon,), jnp.int32),
    costs=jnp.full((horizon,), cost, F32),
    constraint_costs=jnp.full((1, horizon), constraint_cost, F32),
  )


def _counts_at(n0, cost_mean, *, num_states=2, horizon=1):
  """float32 counts with `n0` visits of (h, 0, 0), all to s' = 1, costs summing to
  `n0 * cost_mean` (rounded to float32)."""
  counts = oj.init_counts(
    num_states=num_states, num_actions=1, horizon=horizon, num_constraints=1, dtype=F32
  )
  visits = counts.visits.at[:, 0, 0].set(n0)
  transitions = counts.transitions.at[:, 0, 0, 1].set(n0)
  sums = counts.cost_sums.at[:, 0, 0].set(np.float32(n0 * cost_mean))
  return counts._replace(
    visits=visits, transitions=transitions, cost_sums=sums, constraint_cost_sums=sums[None]
  )


def test_counts_keep_counting_past_2_24_and_cost_means_keep_their_precision():
  """Case 4: float32 counts stopped at 2^24 (visits frozen, sums growing: p-bar rows summing
  to 1.006); cost sums lost their precision long before. Here 10^4 visits are added from
  2^24 - 4 under jit: integer counts exact, the means those of float64."""
  n0, k = 2**24 - 4, 10_000
  counts = _counts_at(n0, 0.1)
  step = _trajectory(0.1, 0.5)
  counts = jax.jit(lambda c: jax.lax.fori_loop(0, k, lambda _, c: oj.update_counts(c, step), c))(
    counts
  )
  assert int(counts.visits[0, 0, 0]) == n0 + k
  assert int(counts.transitions[0, 0, 0, 1]) == n0 + k
  # float64 references of what was added (the float32 costs, summed exactly).
  cost_sum = float(np.float32(n0 * 0.1)) + k * float(np.float32(0.1))
  constraint_sum = float(np.float32(n0 * 0.1)) + k * 0.5
  model = oj.optimistic_model(counts, num_episodes=10**9, bonus_scale=0.0)
  np.testing.assert_allclose(float(model.transitions[0, 0, 0].sum()), 1.0, rtol=1e-7)
  # bonus_scale=0: the optimistic costs are the empirical means.
  np.testing.assert_allclose(float(model.cost[0, 0, 0]), cost_sum / (n0 + k), rtol=1e-6)
  np.testing.assert_allclose(
    float(model.constraint_costs[0, 0, 0, 0]), constraint_sum / (n0 + k), rtol=1e-6
  )
  np.testing.assert_allclose(float(counts.cost_sums[0, 0, 0]), cost_sum, rtol=1e-7)
  # Below 2^24 the integer counts give the model of float counts, bit for bit.
  small = _counts_at(1000, 0.25, num_states=3, horizon=2)
  as_float = small._replace(
    visits=small.visits.astype(F32), transitions=small.transitions.astype(F32)
  )
  for setting in (None, oj.Setting(stationary=True)):
    got = oj.optimistic_model(small, num_episodes=100, setting=setting)
    want = oj.optimistic_model(as_float, num_episodes=100, setting=setting)
    jax.tree.map(np.testing.assert_array_equal, got, want)


def test_counts_saturate_at_the_int32_limit_and_pooled_counts_do_not_overflow():
  """Near 2^31: exact up to MAX_EPISODES, then saturating (never wrapping to negative). A
  stationary model pools H counts of up to 2^31 - 1 each: summed in the float dtype."""
  top = oj.MAX_EPISODES
  counts = _counts_at(top - 2, 0.5, horizon=4)
  step = _trajectory(1.0, 1.0, horizon=4)
  seen = []
  for _ in range(3):
    counts = jax.jit(oj.update_counts)(counts, step)
    seen.append(int(counts.visits[0, 0, 0]))
  assert seen == [top - 1, top, top]
  assert int(counts.transitions[0, 0, 0, 1]) == top
  model = oj.optimistic_model(
    counts, num_episodes=10, bonus_scale=1.0, setting=oj.Setting(stationary=True)
  )
  # Pooled over H = 4 steps: 4 (2^31 - 1) visits, beyond int32 (a wrapped sum would be
  # negative: the whole simplex); p-bar is a distribution and the box a narrow one.
  np.testing.assert_allclose(np.asarray(model.transitions[:, 0, 0]).sum(-1), 1.0, rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(model.transitions[:, 0, 0, 1]), 1.0)
  assert np.all(np.asarray(model.lower[:, 0, 0, 1]) > 0.999)
  pooled_mean = float(model.cost[0, 0, 0]) + float(
    np.sqrt(np.log(6 * 2 * 1 * 4 * 10 * 2 / 0.1) / (4.0 * top))
  )
  np.testing.assert_allclose(pooled_mean, (0.5 * (top - 2) + 3.0) / top, rtol=1e-6)


def _one_episode_summary(value, num_constraints=1):
  log = oj.EpisodeLog(
    cost_value=jnp.asarray(value, F32),
    constraint_values=jnp.full((num_constraints,), value, F32),
    optimistic_cost_value=jnp.zeros((), F32),
    optimistic_constraint_values=jnp.zeros((num_constraints,), F32),
    multipliers=jnp.zeros((num_constraints,), F32),
    inner_gap=jnp.zeros((), F32),
    pretraining=jnp.zeros((), bool),
    sampled_cost=jnp.zeros((), F32),
    sampled_constraint_costs=jnp.zeros((num_constraints,), F32),
  )
  return summarize_episode(log, 0.0, jnp.zeros((num_constraints,), F32))


def test_run_summary_totals_of_ten_million_episodes_keep_float32_precision():
  """Case 5: a float32 running sum of 10^7 values 0.1 was 8.8% off. A chunk of 10^6
  episodes summed in a scan, then ten chunks merged (as `run(logs="summary")` chunks are):
  every total within 1e-6 of the exact sum."""
  one = _one_episode_summary(0.1)

  @jax.jit
  def chunk(summary):
    return jax.lax.fori_loop(0, 10**6, lambda _, s: s.merge(one), summary)

  part = chunk(oj.RunSummary.zeros(1, F32))
  total = part
  for _ in range(9):
    total = total.merge(part)
  exact = 10**7 * float(np.float32(0.1))
  assert int(total.episodes) == 10**7
  for name in ("strong_cost", "weak_cost", "absolute_cost", "strong_constraint", "weak_constraint"):
    np.testing.assert_allclose(
      np.asarray(getattr(total, name), np.float64), exact, rtol=1e-6, err_msg=name
    )
  np.testing.assert_array_equal(total.violating_episodes, [10**7])


def test_run_refuses_runs_the_counters_cannot_hold():
  """Case 6: the int32 episode counter wrapped at 2^31; `run` accepted any length."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=2, num_constraints=1, dtype=F32
  )
  pi, _ = oj.safest_policy(m)
  agent = oj.agents.safe_baseline(num_episodes=10, safe_policy=pi)
  state = agent.init(m.thresholds, m.initial_state, num_states=3, num_actions=2, horizon=2)
  late = state._replace(episode=jnp.asarray(oj.MAX_EPISODES - 3, jnp.int32))
  with pytest.raises(ValueError, match="MAX_EPISODES"):
    oj.run(agent, jax.random.PRNGKey(1), m, num_episodes=4, state=late)
  with pytest.raises(ValueError, match="MAX_EPISODES"):
    oj.run_sharded(
      agent,
      jax.random.split(jax.random.PRNGKey(1), 2),
      m,
      num_episodes=4,
      state=jax.tree.map(lambda x: jnp.stack([x, x]), late),
    )
  with pytest.raises(ValueError, match="MAX_EPISODES"):
    oj.run(agent, jax.random.PRNGKey(1), m, num_episodes=oj.MAX_EPISODES + 1)
  at_limit = late._replace(episode=jnp.asarray(oj.MAX_EPISODES, jnp.int32))
  with pytest.raises(ValueError, match="MAX_EPISODES"):
    oj.episode_step(agent, m, at_limit, jax.random.PRNGKey(2))
  with pytest.raises(ValueError, match="num_episodes"):
    oj.optaug(num_episodes=oj.MAX_EPISODES + 1, safe_policy=pi, pretrain_episodes=1, eta=1.0)
  with pytest.raises(ValueError, match="num_episodes"):
    oj.optdual(num_episodes=oj.MAX_EPISODES + 1, eta=1.0)
  # Up to the limit is accepted.
  final, log = oj.run(agent, jax.random.PRNGKey(1), m, num_episodes=3, state=late)
  assert int(final.episode) == oj.MAX_EPISODES
  assert log.cost_value.shape == (3,)


def test_optaug_stays_out_of_pretraining_at_the_counter_limit():
  """Case 6: at 2^31 the counter wrapped to -2^31 and OptAug went back to pre-training
  (multipliers reset). Now it runs up to MAX_EPISODES and the counter saturates there."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=2, num_constraints=1, dtype=F32
  )
  pi, slack = oj.safest_policy(m)
  agent = oj.optaug(num_episodes=100, safe_policy=pi, pretrain_episodes=2, slack=slack, eta=5.0)
  state = agent.init(m.thresholds, m.initial_state, num_states=3, num_actions=2, horizon=2)
  state = state._replace(episode=jnp.asarray(oj.MAX_EPISODES - 2, jnp.int32))
  state, log = oj.run(agent, jax.random.PRNGKey(1), m, num_episodes=2, state=state)
  assert not np.any(np.asarray(log.pretraining))
  assert int(state.episode) == oj.MAX_EPISODES
  # One more update (outside `run`, which would refuse): no wrap, still exploring (an inner
  # solve, no reset of the multipliers to the pre-training zeros).
  trajectory = oj.sample_episode(jax.random.PRNGKey(3), m, pi)
  state = jax.jit(agent.update)(state, trajectory)
  assert int(state.episode) == oj.MAX_EPISODES
  _, _, info = jax.jit(agent.plan)(state)
  assert not bool(info.pretraining)
  assert int(info.extras["dp_calls"]) > 0


@pytest.fixture(scope="module")
def wrong_support():
  """A CMDP whose transitions from state 0 reach state 1, and a declared support that
  excludes state 1 after state 0 (every action, every step)."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(5), num_states=3, num_actions=2, horizon=3, num_constraints=1, dtype=F32
  )
  assert np.all(np.asarray(m.transitions)[:, 0, :, 1] > 0.05)
  support = np.ones((3, 2, 3), bool)
  support[0, :, 1] = False
  return m, support


@pytest.mark.parametrize("name", ["safe_baseline", "optaug", "optdual", "optprimaldual"])
def test_observed_transitions_outside_the_declared_support_are_counted(wrong_support, name):
  """Case 8: with `Setting.support` False where the CMDP goes, the box became a point at 0
  with no warning. Now the log counts the distinct contradicted (h, s, a, s') and the host
  function names them; with the true support the count stays 0."""
  m, support = wrong_support
  pi, slack = oj.safest_policy(m)
  k = 12

  def make(setting):
    return {
      "safe_baseline": lambda: oj.agents.safe_baseline(k, pi, setting=setting),
      "optaug": lambda: oj.optaug(
        num_episodes=k, safe_policy=pi, pretrain_episodes=4, slack=slack, eta=5.0, setting=setting
      ),
      "optdual": lambda: oj.optdual(num_episodes=k, eta=1.0, setting=setting),
      "optprimaldual": lambda: oj.agents.optprimaldual(k, setting=setting),
    }[name]()

  wrong = oj.Setting(support=support)
  state, log = oj.run(make(wrong), jax.random.PRNGKey(2), m, num_episodes=k)
  counted = np.asarray(log.off_support_transitions)
  assert counted[0] == 0 and counted[-1] > 0  # nothing observed before the first episode
  assert np.all(np.diff(counted) >= 0)
  with pytest.warns(UserWarning, match=r"outside the declared support: \(h=\d, s=0, a=\d, s'=1\)"):
    found = oj.support_violations(state.counts, wrong)
  assert found.indices.shape[0] > 0
  assert np.all(found.indices[:, 1] == 0) and np.all(found.indices[:, 3] == 1)
  transitions = np.asarray(state.counts.transitions)
  np.testing.assert_array_equal(found.counts, transitions[tuple(found.indices.T)])
  # The log's count before the last episode, plus what that episode added, is the host's.
  assert counted[-1] <= found.indices.shape[0]
  with pytest.raises(ValueError, match="s'=1"):
    oj.support_violations(state.counts, wrong, on_violation="raise")
  # The true support (every next state possible here): nothing is reported.
  right = oj.Setting(support=np.ones((3, 2, 3), bool))
  state, summary = oj.run(make(right), jax.random.PRNGKey(2), m, num_episodes=k, logs="summary")
  assert int(summary.off_support_transitions) == 0
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert oj.support_violations(state.counts, right).indices.shape == (0, 4)


def test_summary_keeps_the_largest_off_support_count(wrong_support):
  m, support = wrong_support
  pi, _ = oj.safest_policy(m)
  agent = oj.agents.safe_baseline(12, pi, setting=oj.Setting(support=support))
  _, log = oj.run(agent, jax.random.PRNGKey(2), m, num_episodes=12)
  _, summary = oj.run(agent, jax.random.PRNGKey(2), m, num_episodes=12, logs="summary")
  assert int(summary.off_support_transitions) == int(np.max(log.off_support_transitions)) > 0


@pytest.mark.slow  # 15 s; slow suite (default suite under 10 minutes)
def test_uncertified_inner_solves_are_logged_and_counted():
  """`InnerSolution.certified` reaches the log: one Frank-Wolfe step cannot certify, the
  exact dual method does; pre-training (no inner solve) counts as certified."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=3, num_constraints=1, dtype=F32
  )
  pi, slack = oj.safest_policy(m)
  rough = oj.optaug(
    num_episodes=16,
    safe_policy=pi,
    pretrain_episodes=8,
    slack=slack,
    eta=5.0,
    inner=oj.inner.frank_wolfe(num_iters=1),
    bonus_scale=0.0,
  )
  _, log = oj.run(rough, jax.random.PRNGKey(1), m, num_episodes=16)
  certified = np.asarray(log.certified)
  assert certified.dtype == bool and np.all(certified[:8])
  assert 0 < np.sum(~certified) < 8  # some solves of the binding episodes fail to certify
  assert np.all(np.asarray(log.inner_gap)[~certified] > 1e-3)
  _, summary = oj.run(rough, jax.random.PRNGKey(1), m, num_episodes=16, logs="summary")
  assert int(summary.uncertified_episodes) == int(np.sum(~certified))
  exact = oj.optaug(
    num_episodes=16, safe_policy=pi, pretrain_episodes=8, slack=slack, eta=5.0, bonus_scale=0.0
  )
  _, log = oj.run(exact, jax.random.PRNGKey(1), m, num_episodes=16)
  assert np.all(np.asarray(log.certified))
  # Agents without an inner solve report certified episodes.
  _, summary = oj.run(
    oj.optdual(num_episodes=10, eta=1.0), jax.random.PRNGKey(1), m, num_episodes=10, logs="summary"
  )
  assert int(summary.uncertified_episodes) == 0


def test_pid_integral_keeps_float32_precision_over_a_million_steps():
  """The PID Lagrangian's integral is a running sum too: 10^6 errors of 0.1 in float32
  (a plain sum is 1% off) against the exact sum."""
  pid = oj.agents.pid_lagrangian(kp=0.0, ki=1.0)
  lam = jnp.zeros((1,), F32)
  gradient = -jnp.full((1,), 0.1, F32)  # the error (violation) is 0.1 every step

  @jax.jit
  def go(lam):
    def body(_, carry):
      lam, state = carry
      updates, state = pid.update(gradient, state, lam)
      return lam + updates, state

    return jax.lax.fori_loop(0, 10**6, body, (lam, pid.init(lam)))

  lam, state = go(lam)
  exact = 10**6 * float(np.float32(0.1))
  np.testing.assert_allclose(np.asarray(state.integral, np.float64), exact, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(lam, np.float64), exact, rtol=1e-6)
