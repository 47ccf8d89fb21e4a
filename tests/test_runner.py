"""Summary logs and `run_sharded` (multi-device, batched)."""

import textwrap

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj

K = 24


@pytest.fixture(scope="module")
def setup():
  cmdp = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=4, num_actions=3, horizon=4, num_constraints=2
  )
  policy, slack = oj.safest_policy(cmdp)
  agent = oj.optaug(
    num_episodes=100,
    safe_policy=policy,
    pretrain_episodes=4,
    slack=slack,
    eta=10.0,
    bonus_scale=0.1,
    inner=oj.inner.frank_wolfe(num_iters=8),
  )
  keys = jax.random.split(jax.random.PRNGKey(1), 5)
  state, log = jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=K))(keys)
  return cmdp, agent, keys, state, log


def _numpy_summary(log, optimal_value, thresholds):
  """Independent NumPy totals of a full log `[N, K]`."""
  gap = np.asarray(log.cost_value) - optimal_value
  viol = np.asarray(log.constraint_values) - np.asarray(thresholds)
  return {
    "strong_cost": np.maximum(gap, 0).sum(-1),
    "weak_cost": gap.sum(-1),
    "absolute_cost": np.abs(gap).sum(-1),
    "strong_constraint": np.maximum(viol, 0).sum(-2),
    "weak_constraint": viol.sum(-2),
    "max_violation": viol.max(-2),
    "violating_episodes": (viol > 0).sum(-2),
    "max_inner_gap": np.asarray(log.inner_gap).max(-1),
    "multipliers": np.asarray(log.multipliers)[:, -1],
  }


def test_summary_logs_equal_totals_of_full_logs(setup):
  cmdp, agent, keys, state, log = setup
  v_star = 1.3
  st, summary = jax.vmap(
    lambda k: oj.run(agent, k, cmdp, num_episodes=K, logs="summary", optimal_value=v_star)
  )(keys)
  assert np.all(np.asarray(summary.episodes) == K)
  want = _numpy_summary(log, v_star, cmdp.thresholds)
  for name, value in want.items():
    np.testing.assert_allclose(getattr(summary, name), value, rtol=1e-10, atol=1e-12, err_msg=name)
  # The paper's constraint regrets are the max over constraints of the totals.
  r = oj.regrets(log, v_star, cmdp.thresholds)
  np.testing.assert_allclose(
    summary.strong_constraint.max(-1), r.strong_constraint[:, -1], rtol=1e-10
  )
  np.testing.assert_allclose(summary.weak_cost, r.weak_cost[:, -1], rtol=1e-10)
  jax.tree.map(np.testing.assert_array_equal, st, state)


def test_summary_of_chunks_merges_to_summary_of_run(setup):
  cmdp, agent, keys, _, _ = setup
  _, whole = oj.run(agent, keys[0], cmdp, num_episodes=K, logs="summary")
  s1, a = oj.run(agent, keys[0], cmdp, num_episodes=10, logs="summary")
  _, b = oj.run(agent, keys[0], cmdp, num_episodes=K - 10, logs="summary", state=s1)
  merged = a.merge(b)
  for name in whole._fields:
    np.testing.assert_allclose(
      getattr(merged, name), getattr(whole, name), rtol=1e-12, err_msg=name
    )


def test_run_rejects_unknown_logs(setup):
  cmdp, agent, keys, _, _ = setup
  with pytest.raises(ValueError, match="logs"):
    oj.run(agent, keys[0], cmdp, num_episodes=2, logs="none")


@pytest.mark.parametrize("batch_size", [None, pytest.param(2, marks=pytest.mark.slow), 5])
def test_run_sharded_equals_vmapped_run(setup, batch_size):
  cmdp, agent, keys, state, log = setup
  st, lg = oj.run_sharded(agent, keys, cmdp, num_episodes=K, batch_size=batch_size)
  jax.tree.map(np.testing.assert_array_equal, st, state)
  for name in log._fields:  # the log bit for bit; the exact evaluations to rounding
    same = np.testing.assert_array_equal
    if name in ("cost_value", "constraint_values"):
      same = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    jax.tree.map(same, getattr(lg, name), getattr(log, name))


@pytest.mark.slow
def test_run_sharded_summary_batched_cmdps_and_resume(setup):
  cmdp, agent, keys, _, _ = setup
  cmdps = jax.vmap(
    lambda k: oj.random_cmdp(k, num_states=4, num_actions=3, horizon=4, num_constraints=2)
  )(jax.random.split(jax.random.PRNGKey(7), 5))
  # The agent's safe policy (the safest of `cmdp`) must be safe, with the agent's slack, in
  # every CMDP of the batch: thresholds at its values plus twice that slack.
  policy = agent.assumptions.safe_policy
  _, values = jax.vmap(oj.policy_values, in_axes=(0, None))(cmdps, policy)
  cmdps = cmdps._replace(thresholds=values + 2 * agent.assumptions.slack)
  v_star = jnp.linspace(1.0, 2.0, 5)
  state, log = jax.vmap(lambda k, m: oj.run(agent, k, m, num_episodes=K))(keys, cmdps)
  half, _ = oj.run_sharded(agent, keys, cmdps, num_episodes=10, batched_cmdp=True)
  st, summary = oj.run_sharded(
    agent,
    keys,
    cmdps,
    num_episodes=K - 10,
    batched_cmdp=True,
    state=half,
    logs="summary",
    optimal_value=v_star,
    batch_size=3,
    donate_state=True,
  )
  jax.tree.map(np.testing.assert_array_equal, st, state)
  # Summary of the last K - 10 episodes against NumPy totals.
  tail = jax.tree.map(lambda x: x[:, 10:], log)
  want = _numpy_summary(tail, np.asarray(v_star)[:, None], np.asarray(cmdps.thresholds)[:, None])
  for name in ("strong_cost", "weak_cost", "strong_constraint", "multipliers"):
    np.testing.assert_allclose(getattr(summary, name), want[name], rtol=1e-10, err_msg=name)


def test_run_sharded_rejects_bad_arguments(setup):
  cmdp, agent, keys, _, _ = setup
  with pytest.raises(ValueError, match="batch_size"):
    oj.run_sharded(agent, keys, cmdp, num_episodes=2, batch_size=0)
  with pytest.raises(ValueError, match="mesh"):
    oj.run_sharded(agent, keys, cmdp, num_episodes=2, mesh=jax.make_mesh((1,), ("batch",)))


_SUBPROCESS = textwrap.dedent("""
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import optaug_jax as oj
    assert jax.device_count() == 4, jax.devices()
    cmdp = oj.random_cmdp(jax.random.PRNGKey(0), num_states=4, num_actions=3, horizon=4,
                          num_constraints=2)
    policy, slack = oj.safest_policy(cmdp)
    agent = oj.optaug(num_episodes=100, safe_policy=policy, pretrain_episodes=4,
                      slack=slack, eta=10.0, bonus_scale=0.1,
                      inner=oj.inner.frank_wolfe(num_iters=8))
    keys = jax.random.split(jax.random.PRNGKey(1), 10)  # not a multiple of 4: padded
    state, log = jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=12))(keys)
    st, lg = oj.run_sharded(agent, keys, cmdp, num_episodes=12, batch_size=2)
    assert lg.cost_value.shape == (10, 12)
    jax.tree.map(np.testing.assert_array_equal, st, state)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14),
                 lg, log)
    # The inputs really are spread over the 4 devices.
    mesh = jax.make_mesh((4,), ("seeds",))  # explicit axes (the default) work too
    _, s = oj.run_sharded(agent, keys[:8], cmdp, num_episodes=3, logs="summary", mesh=mesh)
    assert len(s.weak_cost.sharding.device_set) == 4
    assert s.weak_cost.sharding.spec[0] == "seeds"  # stays sharded (8 = 2 x 4 devices)
    _, padded = oj.run_sharded(agent, keys, cmdp, num_episodes=12, mesh=mesh)
    np.testing.assert_allclose(padded.cost_value, log.cost_value, rtol=1e-12)
    print("sharded ok")
""")


@pytest.mark.slow
def test_run_sharded_on_4_cpu_devices_in_a_subprocess():
  assert "sharded ok" in ref.run_on_cpu_devices(_SUBPROCESS, 4, timeout=600)


@pytest.mark.slow  # 12 s; slow suite (default suite under 10 minutes)
def test_progress_reports_once_per_interval_under_vmap_and_changes_nothing(capfd):
  m = oj.random_cmdp(jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=3)
  agent = oj.optdual(20, eta=0.1)
  keys = jax.random.split(jax.random.PRNGKey(1), 4)
  quiet = jax.vmap(lambda k: oj.run(agent, k, m, num_episodes=20))(keys)
  capfd.readouterr()
  loud = jax.vmap(lambda k: oj.run(agent, k, m, num_episodes=20, progress=5))(keys)
  jax.effects_barrier()
  lines = [x for x in capfd.readouterr().out.splitlines() if x.startswith("run:")]
  assert lines == [f"run: {k}/20 episodes" for k in (5, 10, 15, 20)]
  chex.assert_trees_all_equal(quiet, loud)
  with pytest.raises(ValueError, match="progress"):
    oj.run(agent, keys[0], m, num_episodes=5, progress=0)


_SUBPROCESS_BITS = textwrap.dedent("""
    import jax, numpy as np
    import optaug_jax as oj
    assert jax.device_count() == 4, jax.devices()
    cmdp = oj.random_cmdp(jax.random.PRNGKey(0), num_states=4, num_actions=3, horizon=4)
    policy, slack = oj.safest_policy(cmdp)
    agent = oj.optaug(num_episodes=100, safe_policy=policy, pretrain_episodes=4,
                      slack=slack, eta=10.0, bonus_scale=0.1)  # float32, exact solver
    evaluations = ("cost_value", "constraint_values")
    for seeds, batch_size in ((3, None), (8, 1), (10, 3), (8, None)):
        keys = jax.random.split(jax.random.PRNGKey(1), seeds)
        state, log = jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=30))(keys)
        st, lg = oj.run_sharded(agent, keys, cmdp, num_episodes=30, batch_size=batch_size)
        jax.tree.map(np.testing.assert_array_equal, st, state)
        for name in log._fields:
            if name not in evaluations:
                jax.tree.map(np.testing.assert_array_equal, getattr(lg, name), getattr(log, name))
        for name in evaluations:  # the exact evaluation of pi_k, for the log: float rounding
            np.testing.assert_allclose(getattr(lg, name), getattr(log, name), rtol=2e-6)
    print("bits ok")
""")


@pytest.mark.slow
def test_run_sharded_plays_the_vmapped_run_bit_for_bit_on_4_cpu_devices():
  """What the README promises of `run_sharded` against `jax.vmap(run)`, whatever the seeds
  per device and `batch_size` (one seed per device, remainders): every state and the
  agent's whole log bit for bit; the exact evaluations of the played policies (for the log
  only) to float rounding (the README's one exception)."""
  assert "bits ok" in ref.run_on_cpu_devices(_SUBPROCESS_BITS, 4, timeout=600)
