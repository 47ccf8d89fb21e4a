"""Counts, the paper's confidence radii and the optimistic model; sampling."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref

import optaug_jax as oj


def _counts_from(trajectories, s, a, h, i):
  visits = np.zeros((h, s, a))
  trans = np.zeros((h, s, a, s))
  csum = np.zeros((h, s, a))
  dsum = np.zeros((i, h, s, a))
  for tr in trajectories:
    for t in range(h):
      st, ac, nx = int(tr.states[t]), int(tr.actions[t]), int(tr.states[t + 1])
      visits[t, st, ac] += 1
      trans[t, st, ac, nx] += 1
      csum[t, st, ac] += float(tr.costs[t])
      dsum[:, t, st, ac] += np.asarray(tr.constraint_costs[:, t])
  return visits, trans, csum, dsum


def test_update_counts_matches_loop():
  m = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=4, num_constraints=2
  )
  pi = jnp.full((4, 3, 2), 0.5)
  counts = oj.init_counts(
    num_states=3, num_actions=2, horizon=4, num_constraints=2, dtype=jnp.float64
  )
  sample = jax.jit(lambda k: oj.sample_episode(k, m, pi))
  update = jax.jit(oj.update_counts)
  trajs = []
  for k in range(30):
    tr = sample(jax.random.PRNGKey(k))
    trajs.append(tr)
    counts = update(counts, tr)
  for got, want in zip(counts, _counts_from(trajs, 3, 2, 4, 2)):
    np.testing.assert_allclose(got, want)


def test_optimistic_model_formulas():
  rng = np.random.default_rng(0)
  h, s, a, i, k_total, delta = 3, 4, 2, 2, 100, 0.05
  visits = rng.integers(0, 6, size=(h, s, a)).astype(float)
  trans = np.zeros((h, s, a, s))
  for idx in np.ndindex(h, s, a):
    trans[idx] = rng.multinomial(int(visits[idx]), np.ones(s) / s)
  csum = visits * rng.uniform(size=visits.shape)
  dsum = visits[None] * rng.uniform(size=(i, h, s, a))
  counts = oj.Counts(*(jnp.asarray(x) for x in (visits, trans, csum, dsum)))
  model = oj.optimistic_model(counts, num_episodes=k_total, delta=delta, bonus_scale=0.7)
  n = np.maximum(visits, 1)
  lp = np.log(6 * s * a * h * k_total / delta)
  lc = np.log(6 * s * a * h * (i + 1) * k_total / delta)
  pbar = trans / n[..., None]
  beta_p = 0.7 * (2 * np.sqrt(pbar * (1 - pbar) * lp / n[..., None]) + 14 * lp / (3 * n[..., None]))
  beta_c = 0.7 * np.sqrt(lc / n)
  np.testing.assert_allclose(model.cost, np.maximum(csum / n - beta_c, 0), rtol=1e-12)
  np.testing.assert_allclose(model.constraint_costs, np.maximum(dsum / n - beta_c, 0), rtol=1e-12)
  visited = visits[..., None] > 0
  np.testing.assert_allclose(model.lower, np.where(visited, np.clip(pbar - beta_p, 0, 1), 0))
  np.testing.assert_allclose(model.upper, np.where(visited, np.clip(pbar + beta_p, 0, 1), 1))


def test_box_without_bonus_is_the_empirical_model():
  """bonus_scale=0: visited rows collapse to the empirical transition frequencies (counted
  here by hand from the trajectories), unvisited rows are the whole simplex."""
  m = oj.random_cmdp(jax.random.PRNGKey(7), num_states=3, num_actions=2, horizon=3)
  pi = np.full((3, 3, 2), 0.5)
  keys = jax.random.split(jax.random.PRNGKey(8), 12)
  trajs = jax.vmap(lambda k: oj.sample_episode(k, m, jnp.asarray(pi)))(keys)
  counts = oj.init_counts(
    num_states=3, num_actions=2, horizon=3, num_constraints=1, dtype=jnp.float64
  )
  for j in range(12):
    counts = oj.update_counts(counts, jax.tree.map(lambda x: x[j], trajs))
  model = oj.optimistic_model(counts, num_episodes=12, delta=0.1, bonus_scale=0.0)
  n = np.zeros((3, 3, 2))
  nt = np.zeros((3, 3, 2, 3))
  states, actions = np.asarray(trajs.states), np.asarray(trajs.actions)
  for j in range(12):
    for h in range(3):
      n[h, states[j, h], actions[j, h]] += 1
      nt[h, states[j, h], actions[j, h], states[j, h + 1]] += 1
  visited = n > 0
  assert 0 < visited.sum() < visited.size  # both kinds of rows occur
  freq = nt / np.maximum(n, 1)[..., None]
  np.testing.assert_allclose(np.asarray(model.lower)[visited], freq[visited], atol=1e-15)
  np.testing.assert_allclose(np.asarray(model.upper)[visited], freq[visited], atol=1e-15)
  np.testing.assert_array_equal(np.asarray(model.lower)[~visited], 0.0)
  np.testing.assert_array_equal(np.asarray(model.upper)[~visited], 1.0)


def test_true_model_in_confidence_set_for_most_seeds():
  """The success event G (paper's Lemma "G w.h.p."): p in B^p, c~ <= c, d~ <= d at the
  end of a run, in at least (1 - delta) of the seeds."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(4), num_states=3, num_actions=2, horizon=3, num_constraints=1
  )
  k_total, delta, num_seeds = 2000, 0.1, 64
  pi = jnp.full((3, 3, 2), 0.5)

  def one_seed(key):
    counts = oj.init_counts(
      num_states=3, num_actions=2, horizon=3, num_constraints=1, dtype=jnp.float64
    )

    def step(c, k):
      return oj.update_counts(c, oj.sample_episode(k, m, pi)), None

    counts, _ = jax.lax.scan(step, counts, jax.random.split(key, k_total))
    model = oj.optimistic_model(counts, num_episodes=k_total, delta=delta)
    inside = (
      jnp.all(model.lower <= m.transitions + 1e-12)
      & jnp.all(m.transitions <= model.upper + 1e-12)
      & jnp.all(model.cost <= m.cost)
      & jnp.all(model.constraint_costs <= m.constraint_costs)
    )
    return inside, jnp.min(model.upper - model.lower)

  inside, min_width = jax.jit(jax.vmap(one_seed))(
    jax.random.split(jax.random.PRNGKey(0), num_seeds)
  )
  assert float(jnp.mean(inside)) >= 1 - delta
  # The test is not vacuous: in every seed the box is narrower than [0, 1] somewhere.
  assert float(min_width.max()) < 0.6


@pytest.mark.slow  # 15-25 s; another default test covers the kernel (default suite under 10 min)
def test_occupancy_agrees_with_monte_carlo():
  """Empirical visit frequencies from sample_episode vs the exact occupancy: with N = 20000
  episodes each frequency has std <= 0.5/sqrt(N) = 0.0035; tolerance 5 std = 0.018."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(8), num_states=4, num_actions=3, horizon=5, num_constraints=2
  )
  pi = jax.random.dirichlet(jax.random.PRNGKey(9), jnp.ones(3), shape=(5, 4))
  n = 20000
  trajs = jax.jit(jax.vmap(lambda k: oj.sample_episode(k, m, pi)))(
    jax.random.split(jax.random.PRNGKey(1), n)
  )
  freq = np.zeros((5, 4, 3))
  for h in range(5):
    np.add.at(freq[h], (np.asarray(trajs.states[:, h]), np.asarray(trajs.actions[:, h])), 1)
  freq /= n
  q = ref.occupancy_loop(m.transitions, pi, 0)
  np.testing.assert_allclose(freq, q, atol=0.018)
  v, vd = oj.policy_values(m, pi)
  # Sampled costs are Bernoulli with the right means: sum of H terms, std <= sqrt(H)/2/sqrt(n).
  tol = 5 * np.sqrt(5) / 2 / np.sqrt(n)
  assert float(trajs.costs.sum(-1).mean()) == pytest.approx(float(v), abs=tol)
  np.testing.assert_allclose(trajs.constraint_costs.sum(-1).mean(0), vd, atol=tol)
  assert set(np.unique(trajs.costs)) <= {0.0, 1.0}


def test_sample_episode_jit_vmap_parity():
  m = oj.random_cmdp(jax.random.PRNGKey(8), num_states=4, num_actions=3, horizon=5)
  pi = jnp.full((5, 4, 3), 1 / 3)
  keys = jax.random.split(jax.random.PRNGKey(2), 4)
  batched = jax.jit(jax.vmap(lambda k: oj.sample_episode(k, m, pi)))(keys)
  for j in range(4):
    chex.assert_trees_all_equal(
      oj.sample_episode(keys[j], m, pi), jax.tree.map(lambda x: x[j], batched)
    )


def test_estimates_kernels_jit_vmap_parity():
  m = oj.random_cmdp(jax.random.PRNGKey(8), num_states=3, num_actions=2, horizon=3)
  pi = jnp.full((3, 3, 2), 0.5)
  c0 = oj.init_counts(num_states=3, num_actions=2, horizon=3, num_constraints=1, dtype=jnp.float64)
  trajs = jax.vmap(lambda k: oj.sample_episode(k, m, pi))(
    jax.random.split(jax.random.PRNGKey(0), 3)
  )
  upd = jax.vmap(oj.update_counts, in_axes=(None, 0))(c0, trajs)
  mod = jax.jit(jax.vmap(lambda c: oj.optimistic_model(c, num_episodes=10, delta=0.1)))(upd)
  for j in range(3):
    single = oj.update_counts(c0, jax.tree.map(lambda x: x[j], trajs))
    chex.assert_trees_all_close(single, jax.tree.map(lambda x: x[j], upd))
    chex.assert_trees_all_close(
      oj.optimistic_model(single, num_episodes=10, delta=0.1),
      jax.tree.map(lambda x: x[j], mod),
      rtol=1e-12,
    )


def test_jitted_box_has_exact_zero_lower_ends_where_the_radius_is_capped():
  """p-bar = 3 * (1/3) may round to 1 + 3e-8 under jit (XLA fuses the division into an
  FMA); a capped radius (>= 1) must still give the lower end 0 exactly, as unjitted."""
  h, s, a = 2, 3, 2
  visits = np.full((h, s, a), 3.0)
  trans = np.zeros((h, s, a, s))
  trans[..., 1] = 3.0  # every observed transition went to state 1: p-bar = 1 there
  counts = oj.Counts(
    jnp.asarray(visits, jnp.float32),
    jnp.asarray(trans, jnp.float32),
    jnp.zeros((h, s, a), jnp.float32),
    jnp.zeros((1, h, s, a), jnp.float32),
  )
  eager = oj.optimistic_model(counts, num_episodes=100, bonus_scale=0.1)
  jitted = jax.jit(lambda c: oj.optimistic_model(c, num_episodes=100, bonus_scale=0.1))(counts)
  radius_capped = 14 * 0.1 * np.log(6 * s * a * h * 100 / 0.1) / (3 * 3) >= 1
  assert radius_capped
  np.testing.assert_array_equal(np.asarray(jitted.lower), 0.0)
  chex.assert_trees_all_equal(eager, jitted)


def test_radius_is_finite_when_the_division_rounds_a_full_row_above_one(monkeypatch):
  """On XLA:GPU in float32, `n / n` can round to 1 + ulp: `p (1 - p)` is then negative and
  its square root a NaN box (OptDual's multipliers NaN from episode 63 on the delivery
  robot, an H200). The radius at such a p is the one at p = 1 (its variance term is 0)."""
  from optaug_jax._src import estimates

  visits = jnp.full((2, 3, 2), 7.0, jnp.float32)
  trans = jnp.zeros((2, 3, 2, 3), jnp.float32).at[..., 1].set(7.0)  # every row: all mass on 1
  counts = oj.Counts(visits, trans, 0.5 * visits, 0.25 * visits[None])
  exact = oj.optimistic_model(counts, num_episodes=50, bonus_scale=1.0)
  means = estimates.empirical_means

  def rounded_up(c):  # the device's rounding: every full row's mean one ulp above 1
    cost, constraint, p = means(c)
    return cost, constraint, jnp.where(p == 1.0, jnp.nextafter(p, 2.0), p)

  monkeypatch.setattr(estimates, "empirical_means", rounded_up)
  model = oj.optimistic_model(counts, num_episodes=50, bonus_scale=1.0)
  for name in ("lower", "upper"):
    got = np.asarray(getattr(model, name))
    assert np.all(np.isfinite(got)), name
    np.testing.assert_allclose(got, np.asarray(getattr(exact, name)), atol=1e-6, err_msg=name)
