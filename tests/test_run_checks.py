"""The runner's checks of an agent against the true CMDP (`runs.py`), the in-program
checks of `check=True`, and the argument checks of `run`, `regrets`, `dual_step` and
`check_safe_policy`. The unsafe baselines are made independently of the code under test:
the policy that always plays the action of largest constraint cost, evaluated by a NumPy
loop (`_np_constraint_value`)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax._src import run_checks as runs

K = 30


@pytest.fixture(scope="module")
def problem():
  cmdp = oj.random_cmdp(jax.random.PRNGKey(0), num_states=5, num_actions=3, horizon=5)
  safe, slack = oj.safest_policy(cmdp)
  d = np.asarray(cmdp.constraint_costs[0])
  worst = np.eye(cmdp.num_actions)[np.argmax(d, axis=-1)]  # [H, S, A], deterministic
  return cmdp, np.asarray(safe), float(slack), worst


def _np_constraint_value(cmdp, policy):
  """V^pi(d_0) by a forward loop over steps (NumPy, independent of `planning`)."""
  p, d = np.asarray(cmdp.transitions, float), np.asarray(cmdp.constraint_costs[0], float)
  dist = np.zeros(cmdp.num_states)
  dist[int(cmdp.initial_state)] = 1.0
  total = 0.0
  for h in range(cmdp.horizon):
    sa = dist[:, None] * policy[h]
    total += float(np.sum(sa * d[h]))
    dist = np.einsum("sa,sat->t", sa, p[h])
  return total


def _optaug(policy, slack, **kw):
  return oj.optaug(
    num_episodes=K, safe_policy=policy, slack=slack, eta=20.0, pretrain_episodes=5, **kw
  )


def test_the_unsafe_policy_is_unsafe(problem):
  cmdp, safe, slack, worst = problem
  alpha = float(cmdp.thresholds[0])
  assert _np_constraint_value(cmdp, worst) > alpha
  np.testing.assert_allclose(alpha - _np_constraint_value(cmdp, safe), slack, rtol=1e-5)


@pytest.mark.parametrize("where", ["run", "run_sharded", "episode_step", "jit"])
def test_an_unsafe_baseline_is_refused_by_the_runner(problem, where):
  cmdp, safe, slack, worst = problem
  key = jax.random.PRNGKey(1)
  cases = [
    (
      _optaug(worst, 0.5),
      r"safe_policy: not strictly feasible.*constraint values \[.*"
      r"against thresholds \[",
    ),
    (_optaug(safe, 2 * slack), r"slack: .* exceeds the safe policy's true slack"),
    (oj.agents.safe_baseline(K, worst), "safe_policy: not strictly feasible"),
  ]
  for agent, pattern in cases:
    with pytest.raises(ValueError, match=pattern) as info:
      if where == "run":
        oj.run(agent, key, cmdp, num_episodes=2)
      elif where == "run_sharded":
        oj.run_sharded(agent, jax.random.split(key, 2), cmdp, num_episodes=2)
      elif where == "episode_step":
        oj.episode_step(
          agent,
          cmdp,
          agent.init(cmdp.thresholds, cmdp.initial_state, num_states=5, num_actions=3, horizon=5),
          key,
        )
      else:  # the CMDP closed over by an outer jit: still concrete, still checked
        jax.jit(lambda k, a=agent: oj.run(a, k, cmdp, num_episodes=2))(key)
    assert str(info.value).startswith("run" if where == "jit" else where)


def test_a_safe_baseline_with_its_true_slack_runs(problem):
  cmdp, safe, slack, _ = problem
  _, log = oj.run(_optaug(safe, slack), jax.random.PRNGKey(1), cmdp, num_episodes=8)
  assert np.all(np.isfinite(log.cost_value))


def test_a_batch_of_cmdps_is_checked_cmdp_by_cmdp(problem):
  cmdp, safe, slack, _ = problem
  cmdps = jax.tree.map(lambda x: jnp.stack([x, x]), cmdp)
  tight = cmdps._replace(thresholds=cmdps.thresholds.at[1].add(-0.9 * slack))
  keys = jax.random.split(jax.random.PRNGKey(1), 2)
  oj.run_sharded(_optaug(safe, 0.5 * slack), keys, cmdps, num_episodes=2, batched_cmdp=True)
  with pytest.raises(ValueError, match=r"slack: .*\(CMDP \(1,\)\)"):
    oj.run_sharded(_optaug(safe, 0.5 * slack), keys, tight, num_episodes=2, batched_cmdp=True)


def _thinned(cmdp):
  """`cmdp` with each row's two least likely next states dropped (the rest renormalised):
  in the sparse layout, N = 3 slots for S = 5 states."""
  p = np.array(cmdp.transitions)
  np.put_along_axis(p, np.argsort(p, axis=-1)[..., :2], 0.0, axis=-1)
  return cmdp._replace(transitions=jnp.asarray(p / p.sum(-1, keepdims=True)))


@pytest.mark.slow  # 40-110 s idle (default suite time, 2026-11-25)
def test_a_sparse_cmdp_met_by_a_dense_agent_warns_unless_said_on_purpose(problem):
  dense = _thinned(problem[0])
  safe, slack = oj.safest_policy(dense)
  sparse = oj.to_sparse(dense)
  assert sparse.max_next_states == 3 < sparse.num_states
  key = jax.random.PRNGKey(1)
  with pytest.warns(UserWarning, match=r"dense layout.*Setting\(support=cmdp.next_states\)"):
    oj.run(_optaug(safe, slack), key, sparse, num_episodes=2)
  with pytest.warns(UserWarning, match="dense layout"):
    oj.run(oj.optdual(K, eta=0.1, setting=oj.Setting(stationary=True)), key, sparse, num_episodes=2)
  quiet = [
    _optaug(safe, slack, setting=oj.Setting(support=sparse.next_states)),
    _optaug(safe, slack, setting=oj.Setting(all_next_states=True)),
    _optaug(safe, slack, setting=oj.named_setting("paper")),
  ]
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    for agent in quiet:
      oj.run(agent, key, sparse, num_episodes=2)
    oj.run(_optaug(safe, slack), key, dense, num_episodes=2)  # dense CMDP: nothing to say
    # Sparse with as many slots as states: the dense layout costs no more.
    cmdp, full_safe, full_slack, _ = problem
    assert oj.to_sparse(cmdp).max_next_states == cmdp.num_states
    oj.run(_optaug(full_safe, full_slack), key, oj.to_sparse(cmdp), num_episodes=2)
  with pytest.raises(ValueError, match="all_next_states"):
    oj.Setting(all_next_states=True, support=sparse.next_states)


def _checked_run(agent_fn):
  """`(cmdp, eta) -> run` under `checkify`: one compiled program for every CMDP and eta."""
  run = jax.jit(lambda key, m, eta: oj.run(agent_fn(eta), key, m, num_episodes=12, check=True))
  checked = oj.checked(run)
  return lambda cmdp, eta=20.0: checked(jax.random.PRNGKey(1), cmdp, eta)


BAD_CMDPS = [
  (lambda m: m._replace(cost=m.cost.at[0, 0, 0].set(jnp.nan)), r"cmdp.cost must be finite"),
  (lambda m: m._replace(cost=m.cost.at[0, 0, 0].set(-0.5)), r"cmdp.cost .* in \[0, 1\]"),
  (
    lambda m: m._replace(constraint_costs=m.constraint_costs.at[0, 1, 1, 1].set(jnp.inf)),
    "cmdp.constraint_costs must be finite",
  ),
  (lambda m: m._replace(thresholds=m.thresholds + 10.0), r"cmdp.thresholds .* \[0, 5\]"),
]


def test_check_true_refuses_a_bad_cmdp_passed_as_a_jit_argument(problem):
  """Each fault of `BAD_CMDPS` refused by the one compiled program (the CMDP is traced)."""
  cmdp, safe, slack, _ = problem
  run = _checked_run(lambda eta: _optaug(safe, slack))
  for change, pattern in BAD_CMDPS:
    with pytest.raises(ValueError, match=pattern):
      run(change(cmdp))
  run(cmdp)  # the valid CMDP passes every check


@pytest.mark.parametrize("agent", ["optaug", "optdual", "optdual_sgd"])
def test_check_true_refuses_a_traced_eta_that_is_not_positive(problem, agent):
  import optax

  cmdp, safe, slack, _ = problem
  build = {
    "optaug": lambda e: oj.optaug(
      num_episodes=K, safe_policy=safe, slack=slack, eta=e, pretrain_episodes=5
    ),
    "optdual": lambda e: oj.optdual(K, eta=e),
    "optdual_sgd": lambda e: oj.optdual(K, eta=e, dual_optimizer=optax.sgd),
  }[agent]
  run = _checked_run(build)
  for eta in [-1.0, 0.0, np.nan]:
    with pytest.raises(ValueError, match="eta must be finite and > 0"):
      run(cmdp, eta)
  run(cmdp, 0.5)  # a valid eta passes every check


def test_check_true_refuses_a_traced_unsafe_baseline_or_slack(problem):
  cmdp, safe, slack, worst = problem
  checked = oj.checked(
    jax.jit(
      lambda key, pi, s: oj.run(
        oj.optaug(num_episodes=K, safe_policy=pi, slack=s, eta=20.0, pretrain_episodes=5),
        key,
        cmdp,
        num_episodes=4,
        check=True,
      )
    )
  )  # one program: the policy and slack are traced
  dtype = cmdp.cost.dtype
  run = lambda pi, s: checked(jax.random.PRNGKey(1), jnp.asarray(pi, dtype), jnp.asarray(s, dtype))
  with pytest.raises(ValueError, match="safe_policy: not strictly feasible"):
    run(worst, 0.5)
  with pytest.raises(ValueError, match="slack: .* at most the safe policy's true slack"):
    run(jnp.asarray(safe), 2 * slack)
  run(jnp.asarray(safe), slack)


def test_an_invalid_solve_is_never_certified_without_check(problem):
  cmdp, safe, slack, _ = problem
  run = jax.jit(
    lambda key, eta: oj.run(
      oj.optaug(num_episodes=K, safe_policy=safe, slack=slack, eta=eta, pretrain_episodes=5),
      key,
      cmdp,
      num_episodes=12,
    )
  )
  _, good = run(jax.random.PRNGKey(1), 20.0)
  assert bool(np.all(good.certified))
  for eta in (-1.0, 0.0, np.nan):
    _, bad = run(jax.random.PRNGKey(1), eta)
    assert not np.any(np.asarray(bad.certified)[5:]), eta
  problem_ = oj.inner.InnerProblem.of_cmdp(cmdp)
  solve = jax.jit(lambda lam, eta: oj.solve_inner(problem_, lam, eta))
  assert bool(solve(jnp.zeros(1), 20.0).certified)
  assert not bool(solve(jnp.full((1,), -1.0), 20.0).certified)
  assert not bool(solve(jnp.full((1,), jnp.nan), 20.0).certified)
  assert not bool(solve(jnp.zeros(1), -1.0).certified)


def test_dual_step_checks_its_inputs(problem):
  cmdp, safe, _, _ = problem
  q = oj.TransitionSet.point(cmdp.transitions).occupancy(jnp.asarray(safe), cmdp.initial_state)
  d, alpha = cmdp.constraint_costs, cmdp.thresholds
  np.testing.assert_allclose(
    oj.dual_step(q, d, alpha, jnp.zeros(1), 1.0),
    np.maximum(np.einsum("ihsa,hsa->i", d, q) - alpha, 0.0),
    rtol=1e-6,
  )
  with pytest.raises(ValueError, match="dual_step: multipliers must be finite and >= 0"):
    oj.dual_step(q, d, alpha, jnp.full((1,), -1.0), 1.0)
  with pytest.raises(ValueError, match="dual_step: multipliers must be finite"):
    oj.dual_step(q, d, alpha, jnp.full((1,), jnp.nan), 1.0)
  with pytest.raises(ValueError, match="dual_step: eta must be finite and > 0"):
    oj.dual_step(q, d, alpha, jnp.zeros(1), -1.0)
  traced = oj.checked(jax.jit(lambda lam, eta: oj.dual_step(q, d, alpha, lam, eta, check=True)))
  with pytest.raises(ValueError, match="dual_step: multipliers"):
    traced(jnp.full((1,), -1.0), 1.0)
  with pytest.raises(ValueError, match="dual_step: eta"):
    traced(jnp.zeros(1), jnp.nan)
  np.testing.assert_array_equal(
    traced(jnp.zeros(1), 1.0), oj.dual_step(q, d, alpha, jnp.zeros(1), 1.0)
  )


def test_run_names_a_key_that_is_not_a_prng_key(problem):
  cmdp, safe, slack, _ = problem
  agent = _optaug(safe, slack)
  with pytest.raises(
    ValueError,
    match=r"run: key: expected a PRNG key, got int 1; make one"
    r" with jax.random.key",
  ):
    oj.run(agent, 1, cmdp, num_episodes=2)
  with pytest.raises(ValueError, match="run_sharded: key: expected an \\[N\\] array"):
    oj.run_sharded(agent, jax.random.PRNGKey(0), cmdp, num_episodes=2)
  oj.run(agent, jax.random.key(1), cmdp, num_episodes=2)  # a typed key works too


def test_regrets_refuses_thresholds_that_do_not_fit_the_log(problem):
  cmdp, safe, slack, _ = problem
  _, log = oj.run(_optaug(safe, slack), jax.random.PRNGKey(1), cmdp, num_episodes=4)
  with pytest.raises(
    ValueError,
    match=r"thresholds: expected 1 threshold\(s\).*got shape"
    r" \(2,\)",
  ):
    oj.regrets(log, 1.0, jnp.array([1.0, 2.0]))
  with pytest.raises(ValueError, match="thresholds"):
    oj.regrets(log, 1.0, 1.0)
  oj.regrets(log, 1.0, cmdp.thresholds)


def test_check_safe_policy_names_the_rows_that_are_not_distributions(problem):
  cmdp, safe, _, _ = problem
  half = safe.copy()
  half[2, 3] *= 0.5
  half[4, 0] *= 0.5
  with pytest.raises(
    ValueError,
    match=r"safe_policy: rows \(h, s\) \(2, 3\), \(4, 0\) are not"
    r" probability vectors.*sums to 0.5",
  ):
    oj.check_safe_policy(cmdp, half)
  with pytest.raises(ValueError, match=r"safe_policy: rows \(h, s\) \(2, 3\)"):
    oj.optaug(num_episodes=K, safe_policy=half, slack=0.1, eta=1.0)


# --- A resumed state carries what it was made for --------------------------------------


@pytest.fixture(scope="module")
def factored():
  return oj.benchmarks.make_benchmark("factored")


def _fresh_state(agent, cmdp):
  return oj.agents.init_agent(agent, cmdp)


@pytest.mark.parametrize("name", oj.agents.AGENTS)
def test_every_agent_refuses_to_resume_on_other_thresholds_or_initial_state(factored, name):
  """The issue's probe: a state made for alpha = 3 was accepted on a CMDP with alpha = 3.5
  and the agent kept aiming at 3 (its own copy). Now `run`, `run_sharded` and
  `episode_step` refuse it, naming the field; the thresholds replaced on purpose pass."""
  cmdp = factored.cmdp
  agent = oj.agents.make_agent(name, factored, num_episodes=100)
  state = _fresh_state(agent, cmdp)
  raised = cmdp._replace(thresholds=cmdp.thresholds + 0.5)
  key = jax.random.PRNGKey(0)
  with pytest.raises(ValueError, match=r"run: state\.thresholds: .*\[3\.0\].* \[3\.5\]"):
    oj.run(agent, key, raised, num_episodes=1, state=state)
  with pytest.raises(ValueError, match=r"episode_step: state\.thresholds"):
    oj.episode_step(agent, raised, state, key)
  batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
  with pytest.raises(ValueError, match=r"run_sharded: state\.thresholds"):
    oj.run_sharded(agent, jax.random.split(key, 2), raised, num_episodes=1, state=batch)
  moved = cmdp._replace(initial_state=jnp.asarray(1, jnp.int32))
  with pytest.raises(ValueError, match=r"run: state\.initial_state: .* 0, the CMDP has 1"):
    oj.run(agent, key, moved, num_episodes=1, state=state)
  # On purpose: the state's copy replaced (written through a composed state).
  replaced = state._replace(thresholds=raised.thresholds)
  assert np.array_equal(np.asarray(replaced.thresholds), np.asarray(raised.thresholds))
  runs.check_state(agent, raised, replaced, "run")  # accepted (the runner's check)


def test_another_agents_state_is_refused_naming_its_type(factored):
  cmdp = factored.cmdp
  optaug = oj.agents.make_agent("optaug", factored, num_episodes=100)
  optdual = oj.agents.make_agent("optdual", factored, num_episodes=100)
  dual_state = _fresh_state(optdual, cmdp)
  with pytest.raises(ValueError, match=r"run: state: of type AgentState, not the OptAugState"):
    oj.run(optaug, jax.random.PRNGKey(0), cmdp, num_episodes=1, state=dual_state)
  with pytest.raises(ValueError, match=r"episode_step: state: of type AgentState"):
    oj.episode_step(optaug, cmdp, dual_state, jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match=r"run: state: of type OptAugState"):
    oj.run(optdual, jax.random.PRNGKey(0), cmdp, num_episodes=1, state=_fresh_state(optaug, cmdp))


def test_a_state_of_other_sizes_is_refused_also_under_jit_and_vmap(problem, factored):
  """Sizes are static: checked on traced states too (the experiment scripts' chunks run
  `jit(vmap(run))`, where the values are not readable)."""
  cmdp = factored.cmdp
  agent = oj.optdual(num_episodes=100, eta=1.0)
  small = _fresh_state(agent, cmdp)
  other = problem[0]  # S = 5, A = 3, H = 5
  with pytest.raises(ValueError, match=r"run: state\.counts\.visits: int32\[6, 3, 2\] where"):
    oj.run(agent, jax.random.PRNGKey(0), other, num_episodes=1, state=small)
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  batch = jax.tree.map(lambda x: jnp.stack([x, x]), small)
  vmapped = jax.jit(jax.vmap(lambda k, s: oj.run(agent, k, other, num_episodes=1, state=s)))
  with pytest.raises(ValueError, match=r"state\.counts\.visits"):
    vmapped(keys, batch)
  ok = jax.jit(jax.vmap(lambda k, s: oj.run(agent, k, cmdp, num_episodes=1, state=s)))
  ok(keys, batch)  # the CMDP it was made for


def test_a_run_past_the_agents_num_episodes_warns(factored):
  cmdp = factored.cmdp
  agent = oj.optdual(num_episodes=20, eta=1.0)
  state, _ = oj.run(agent, jax.random.PRNGKey(0), cmdp, num_episodes=15)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    oj.run(agent, jax.random.PRNGKey(0), cmdp, num_episodes=5, state=state)  # ends at K
  with pytest.warns(UserWarning, match=r"run: the run ends at episode 21, past the num_episodes"):
    oj.run(agent, jax.random.PRNGKey(0), cmdp, num_episodes=6, state=state)
  with pytest.warns(UserWarning, match=r"run: the run ends at episode 30"):
    oj.run(agent, jax.random.PRNGKey(0), cmdp, num_episodes=30)


@pytest.mark.parametrize(
  "name, made, other, differ",
  [
    ("optaug", {"pretrain_episodes": 5}, {"pretrain_episodes": 20}, "pretrain_episodes 5 -> 20"),
    ("optaug", {"eta": 20.0}, {"eta": 30.0}, "eta 20.0 -> 30.0"),
    ("optdual", {"bonus_scale": 0.1}, {"bonus_scale": 0.2}, "bonus_scale 0.1 -> 0.2"),
  ],
)
def test_a_state_resumed_under_other_options_is_refused_naming_them(
  factored, name, made, other, differ
):
  """The issue's probe: a state made with `pretrain_episodes` 5, resumed under an agent
  built with 20, was accepted and went back into pre-training (likewise another eta). The
  state carries a digest of its factory's arguments; `run`, `run_sharded` and
  `episode_step` refuse another's, naming the options that differ; the same options pass,
  and so does a state whose stamp is cleared on purpose."""
  cmdp, key = factored.cmdp, jax.random.PRNGKey(0)
  build = lambda **o: oj.agents.make_agent(name, factored, num_episodes=100, **o)
  state, _ = oj.run(build(**made), key, cmdp, num_episodes=8)
  assert int(state.options) != 0
  agent = build(**other)
  with pytest.raises(ValueError, match=rf"run: state\.options: .*{differ}"):
    oj.run(agent, key, cmdp, num_episodes=1, state=state)
  with pytest.raises(ValueError, match=r"episode_step: state\.options"):
    oj.episode_step(agent, cmdp, state, key)
  batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
  with pytest.raises(ValueError, match=r"run_sharded: state\.options \(seed 0\)"):
    oj.run_sharded(agent, jax.random.split(key, 2), cmdp, num_episodes=1, state=batch)
  runs.check_state(build(**made), cmdp, state, "run")  # the same options: accepted
  runs.check_state(agent, cmdp, state._replace(options=np.int32(0)), "run")  # on purpose: accepted


def test_an_agent_built_with_traced_options_stamps_no_digest(factored):
  """Options swept under `vmap` have no value on the host: the agent's states are stamped 0
  (unknown) and not compared."""
  cmdp = factored.cmdp

  def episodes(eta):
    agent = oj.agents.make_agent("optdual", factored, num_episodes=100, eta=eta)
    assert agent.assumptions.options_digest == 0
    return oj.run(agent, jax.random.PRNGKey(0), cmdp, num_episodes=3)[0].options

  np.testing.assert_array_equal(jax.vmap(episodes)(jnp.asarray([0.5, 1.0])), 0)
  concrete = oj.agents.make_agent("optdual", factored, num_episodes=100, eta=0.5)
  assert concrete.assumptions.options["eta"] == "0.5"


def test_a_plan_that_takes_check_gets_it_from_run_and_one_that_does_not_is_called_as_always():
  """`run(check=True)` passes `check=True` to a plan with that keyword (an explicit
  argument, no state read while tracing); a plan without it runs as before."""
  cmdp = oj.random_cmdp(jax.random.PRNGKey(3), num_states=3, num_actions=2, horizon=3)
  base = oj.optdual(num_episodes=5, eta=0.1)
  seen = []

  def plan(state, *, check=False):
    seen.append(check)
    return base.plan(state, check=check)

  key = jax.random.PRNGKey(0)
  takes = base._replace(plan=plan)
  oj.checked(jax.jit(lambda k, m: oj.run(takes, k, m, num_episodes=2, check=True)))(key, cmdp)
  assert seen and all(seen)
  seen.clear()
  oj.run(takes, key, cmdp, num_episodes=2)
  assert seen and not any(seen)
  plain = base._replace(plan=lambda state: base.plan(state))
  _, log = oj.checked(jax.jit(lambda k, m: oj.run(plain, k, m, num_episodes=2, check=True)))(
    key, cmdp
  )
  assert log.cost_value.shape == (2,)
  # The traced step size is checked through the explicit argument: a negative eta fails.
  bad = oj.optdual(num_episodes=5, eta=lambda count: -1.0 + 0.0 * count)
  with pytest.raises(ValueError, match="eta"):
    oj.checked(jax.jit(lambda k, m: oj.run(bad, k, m, num_episodes=2, check=True)))(key, cmdp)
