"""The multiplier searches of the linear peers (OPSE, Ghosh et al.): the bracketing root
finder against SciPy's `brentq`, and the agents' multipliers against a bisection of the same
backups (the peers' own search) and against a search from other starts."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import optaug_jax as oj
from optaug_jax import linear
from optaug_jax._src.linear import roots


def _sigmoid_g(root, width):
  """A decreasing function with its sign change at `root`, flat far from it (as `need -
  V_u(lambda)` of a softmax policy is), as `roots.End` with a payload."""

  def g(x):
    value = jnp.tanh((root - x) / width)
    return roots.End(value, (x * 2.0, jnp.stack([x, -x])))

  return g


def _search(root, width, start, tolerance=1e-6, lower=0.0, upper=300.0):
  g = _sigmoid_g(root, width)
  f = lambda a: jnp.asarray(a, jnp.float64)
  step = 0.005 * (f(start) + tolerance)
  return roots.search_from(g, f(start), f(lower), f(upper), step, f(tolerance), 200)


@pytest.mark.parametrize("seed", range(4))
def test_search_from_brackets_the_brentq_root_to_its_tolerance(seed):
  """Roots, widths and starts drawn at random, far and near: the bracket holds SciPy's
  root, is at most the tolerance wide, and each end carries its own point's payload."""
  rng = np.random.default_rng(seed)
  for _ in range(10):
    root, width = rng.uniform(1, 299), 10 ** rng.uniform(-2, 1)
    start = rng.choice([root * (1 + rng.normal(0, 0.01)), rng.uniform(0, 300), 0.0, 300.0])
    reference = scipy.optimize.brentq(lambda x: np.tanh((root - x) / width), 0, 300)
    out = _search(root, width, start)
    lo, hi = float(out.lo), float(out.hi)
    assert bool(out.has_lo) and bool(out.has_hi)
    assert lo <= reference + 1e-9 and reference <= hi + 1e-9, (lo, reference, hi)
    assert hi - lo <= 1e-6
    assert float(out.end_hi.aux[0]) == 2.0 * hi and float(out.end_lo.aux[0]) == 2.0 * lo
    assert int(out.steps) <= 60


def test_search_from_is_cheap_from_a_near_start_and_stops_at_the_ends():
  """A start within 0.5% of the root: at most 12 evaluations (the bisection of [0, 300] to
  1e-6 takes 29). No sign change: one evaluation where the start is the end that decides
  (g(0) <= 0 from 0, g(300) > 0 from 300), the other end's flag unset."""
  for root, width in ((60.0, 1.0), (150.0, 0.05), (3.0, 0.5)):
    assert int(_search(root, width, root * 1.004).steps) <= 12
  below = _search(-5.0, 1.0, 0.0)
  assert int(below.steps) == 1 and float(below.hi) == 0.0 and not bool(below.has_lo)
  above = _search(400.0, 1.0, 300.0)
  assert int(above.steps) == 1 and float(above.lo) == 300.0 and not bool(above.has_hi)
  far = _search(-5.0, 1.0, 100.0)  # walks down to 0
  assert float(far.hi) == 0.0 and not bool(far.has_lo) and int(far.steps) <= 8


def test_search_from_under_jit_and_vmap_matches_unbatched_calls():
  roots_, starts = jnp.asarray([10.0, 60.0, 200.0, -1.0]), jnp.asarray([11.0, 0.0, 300.0, 5.0])

  def one(root, start):
    out = roots.search_from(
      _sigmoid_g(root, 0.5), start, jnp.float32(0), jnp.float32(300), 0.05, 3e-4, 200
    )
    return out.lo, out.hi, out.steps, out.has_hi

  batched = jax.jit(jax.vmap(one))(roots_, starts)
  for i in range(4):
    single = one(roots_[i], starts[i])
    for a, b in zip(batched, single):
      np.testing.assert_array_equal(a[i], b)


def _opse_components(model, scale, tau):
  """OPSE's three components (restated from Kitamura et al.'s definitions), in the CMDP's
  dtype."""
  cmdp = model.cmdp
  dtype = jnp.asarray(cmdp.cost).dtype
  reward, utility = 1.0 - jnp.asarray(cmdp.cost), 1.0 - jnp.asarray(cmdp.constraint_costs[0])
  num_actions = reward.shape[-1]
  parts = linear.Components(
    costs=jnp.stack([reward, jnp.zeros_like(reward), utility]),
    bonus_in=jnp.asarray([scale, scale, -scale]),
    bonus_out=jnp.asarray([0.0, 1.0, 0.0]),
    low=jnp.zeros(3),
    high=jnp.asarray([1.0 + tau * np.log(num_actions), 1.0, 1.0]),
    entropy=jnp.asarray([1.0, 0.0, 0.0]),
  )
  return jax.tree.map(lambda x: x.astype(dtype), parts)


@pytest.mark.parametrize("name", ["kitamura_random", "kitamura_streaming", "kitamura_linear"])
def test_opse_multiplier_is_the_bisections_to_its_precision_from_any_start(name):
  """States of 4 seeds after 150 episodes (multipliers inside `(0, C_lambda)` on these):
  OPSE's multiplier lies within `C_lambda / 2^20` of the peers' bisection of the same
  backups (a Python loop of 20 halvings); the search from the last multiplier, from 0 and
  from `C_lambda` agree to that precision."""
  bench = linear.BENCHMARKS[name](0)
  cmdp = bench.model.cmdp
  agent = linear.opse(bench.model, bench.safe_policy)
  keys = jax.random.split(jax.random.PRNGKey(1), 4)
  states, _ = jax.jit(jax.vmap(lambda k: oj.run(agent, k, cmdp, num_episodes=150)))(keys)
  plan = jax.jit(agent.plan)
  features = jnp.asarray(bench.model.step_features(), jnp.asarray(cmdp.cost).dtype)
  components = _opse_components(bench.model, 1.0, 0.1)
  horizon = cmdp.cost.shape[0]
  tolerance = 300.0 / 2**20
  interior = 0
  for i in range(4):
    state = jax.tree.map(lambda x: x[i], states)
    need = horizon - float(state.thresholds[0])
    est = linear.estimate(state.ridge, features, 1.0)

    @jax.jit
    def safe(lam, est=est):
      out = linear.composite_softmax(
        est,
        features,
        components,
        jnp.stack([jnp.ones_like(lam), jnp.ones_like(lam), lam]),
        0.1,
        sense=-1,
        loose=True,
      )
      return out.values[2, state.initial_state] >= need

    lo, hi = 0.0, 300.0
    for _ in range(20):
      mid = 0.5 * (lo + hi)
      lo, hi = (lo, mid) if bool(safe(jnp.float32(mid))) else (mid, hi)
    found = []
    for start in (state.multipliers, jnp.zeros(1), jnp.full((1,), 300.0)):
      start = start.astype(state.multipliers.dtype)
      _, _, info = plan(state._replace(multipliers=start))
      found.append(float(info.extras["lambda"]))
    if 0 < found[0] < 300:
      interior += 1
      assert abs(found[0] - hi) <= tolerance * 1.01, (found[0], hi)
    np.testing.assert_allclose(found, found[0], atol=tolerance * 1.01)
  assert interior >= 2


@pytest.mark.parametrize("make", [linear.opse, linear.ghosh_softmax])
def test_the_peers_bisection_is_kept_and_agrees_with_the_search(make):
  """`search="bisection"` (their code's 20 halvings, 21 passes per plan) and the default
  search from the last multiplier: the same multipliers to `C_lambda / 2^20` at every
  episode of the same trajectory's states (streaming CMDP, where the constraint binds);
  an unknown search is refused in one line."""
  bench = linear.kitamura_streaming(1)
  cmdp = bench.model.cmdp
  bisect, search = (
    make(bench.model, bench.safe_policy, search="bisection"),
    make(bench.model, bench.safe_policy),
  )
  keys = jax.random.split(jax.random.PRNGKey(2), 2)
  states, logs = jax.jit(jax.vmap(lambda k: oj.run(bisect, k, cmdp, num_episodes=60)))(keys)
  assert np.all(np.asarray(logs.extras["backward_passes"])[:, 1:] == 21)
  _, _, info = jax.jit(jax.vmap(search.plan))(states)
  _, _, ref = jax.jit(jax.vmap(bisect.plan))(states)
  np.testing.assert_allclose(info.extras["lambda"], ref.extras["lambda"], atol=300 / 2**20 * 1.01)
  with pytest.raises(ValueError, match="search must be one of"):
    make(bench.model, bench.safe_policy, search="grid")
