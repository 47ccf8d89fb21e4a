"""The "blocked" greedy fill (work in proportion to the model) and the "auto" default.

The fill is checked against every other formulation and against independent references
(HiGHS per row and the extended LP), with ties (zero and repeated values, signed zeros),
crossings at block boundaries, under jit and vmap, and in its gradients. Sizes are small;
`_block_size` is also forced small so that several blocks, padding and every crossing
block are exercised at S <= 12.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import references as ref
import scipy.optimize

import optaug_jax as oj
from optaug_jax._src import box, horizon

# 130 cases, ~3.5 min on one core: the slow suite (CI runs it; the default fill below
# 128 next states is "matmul", which the default suite covers).
pytestmark = pytest.mark.slow

OTHERS = [f for f in oj.kernels.FILL_METHODS if f not in ("blocked", "auto")]


@pytest.fixture(params=["default_blocks", "blocks_of_2"])
def block_size(request, monkeypatch):
  """The blocked fill with its own block size (S' = 7..12: two blocks, the last one
  padded), or with blocks of 2 next states (up to 6 blocks, the crossing in any)."""
  if request.param != "default_blocks":
    size = int(request.param[-1])
    monkeypatch.setattr(box, "_block_size", lambda n: min(n, size))
  return request.param


def _values(rng, s, kind):
  if kind == "zeros":
    return np.zeros(s)
  if kind == "repeated":
    return rng.integers(-2, 3, size=s).astype(float) / 2.0
  return rng.normal(size=s)


def _rows(rng, s, rows, kind):
  """Boxes `[rows, s]` around random distributions; some rows are special."""
  p = rng.dirichlet(np.ones(s), size=rows)
  lower, upper = ref.random_box(rng, p, 0.4)
  if kind == "simplex":  # the whole simplex (unvisited pairs)
    lower, upper = np.zeros_like(p), np.ones_like(p)
  elif kind == "point":  # free mass 0
    lower, upper = p, p
  elif kind == "even":  # capacities 1/4: the free mass runs out exactly after 4 states
    lower, upper = np.zeros_like(p), np.full_like(p, 0.25 if s >= 4 else 1.0 / s)
  return lower, upper


def _highs_row(values, lower, upper):
  s = values.shape[0]
  res = scipy.optimize.linprog(
    values, A_eq=np.ones((1, s)), b_eq=[1.0], bounds=list(zip(lower, upper)), method="highs"
  )
  assert res.status == 0, res.message
  return res.fun


@pytest.mark.parametrize("s", [1, 5, 9, 12])
@pytest.mark.parametrize("values_kind", ["normal", "zeros", "repeated"])
@pytest.mark.parametrize("box_kind", ["random", "simplex", "point", "even"])
def test_blocked_box_minimize_matches_other_fills_and_highs(block_size, s, values_kind, box_kind):
  rng = np.random.default_rng(s * 7 + len(values_kind) + len(box_kind))
  values = _values(rng, s, values_kind)
  lower, upper = _rows(rng, s, 4, box_kind)
  args = (jnp.asarray(values), jnp.asarray(lower), jnp.asarray(upper))
  val, arg = oj.kernels.box_minimize(*args, method="blocked")
  for other in OTHERS:
    want_val, want_arg = oj.kernels.box_minimize(*args, method=other)
    np.testing.assert_allclose(val, want_val, atol=1e-12, err_msg=other)
    np.testing.assert_allclose(arg, want_arg, atol=1e-12, err_msg=other)  # same ties
  for row in range(4):
    assert float(val[row]) == pytest.approx(_highs_row(values, lower[row], upper[row]), abs=1e-10)
  arg = np.asarray(arg)
  assert np.all(arg >= lower - 1e-12) and np.all(arg <= upper + 1e-12)
  np.testing.assert_allclose(arg.sum(-1), 1.0, atol=1e-12)
  np.testing.assert_allclose(val, arg @ values, atol=1e-12)


def test_blocked_ties_go_to_the_lowest_index_whatever_the_sign_of_zero(block_size):
  lower, upper = jnp.zeros(4), jnp.full(4, 0.4)
  for values in ([0.0, 0.0, 0.0, 0.0], [0.0, -0.0, 0.0, -0.0], [-0.0, 0.0, -0.0, 0.0]):
    _, p = oj.kernels.box_minimize(jnp.asarray(values), lower, upper, method="blocked")
    np.testing.assert_allclose(p, [0.4, 0.4, 0.2, 0.0])
  _, p = oj.kernels.box_minimize(jnp.asarray([1.0, 0.5, 1.0, 0.5]), lower, upper, method="blocked")
  np.testing.assert_allclose(p, [0.2, 0.4, 0.0, 0.4])


def test_blocked_fill_in_float32_matches_float64(block_size):
  rng = np.random.default_rng(5)
  values = rng.normal(size=11)
  lower, upper = _rows(rng, 11, 6, "random")
  val32, arg32 = oj.kernels.box_minimize(
    *(jnp.asarray(x, jnp.float32) for x in (values, lower, upper)), method="blocked"
  )
  val64, arg64 = oj.kernels.box_minimize(
    *(jnp.asarray(x) for x in (values, lower, upper)), method="blocked"
  )
  assert val32.dtype == jnp.float32 and arg32.dtype == jnp.float32
  np.testing.assert_allclose(val32, val64, atol=1e-6)
  np.testing.assert_allclose(arg32, arg64, atol=1e-6)


def _dp_problem(seed, s, a=3, h=4, reward_kind="normal"):
  rng = np.random.default_rng(seed)
  p = rng.dirichlet(np.ones(s), size=(h, s, a))
  lower, upper = ref.random_box(rng, p, 0.3)
  if reward_kind == "zeros":
    reward = np.zeros((h, s, a))
  elif reward_kind == "repeated":
    reward = rng.integers(0, 2, size=(h, s, a)) / 2.0
  else:
    reward = rng.uniform(-1, 1, size=(h, s, a))
  return reward, lower, upper


def _dp_kernels(fill):
  """The three extended-DP kernels with one fill, in one jitted function."""

  def kernels(reward, lower, upper):
    pi = jax.nn.softmax(reward, axis=-1)
    return (
      oj.TransitionSet(lower, upper, fill=fill).value_iteration(reward, 1),
      oj.TransitionSet(lower, upper, fill=fill).lmo(reward, 1),
      oj.TransitionSet(lower, upper, fill=fill).evaluate(reward, pi),
    )

  return jax.jit(kernels)


@pytest.mark.parametrize("s", [3, 12])
@pytest.mark.parametrize("reward_kind", ["normal", "zeros", "repeated"])
def test_blocked_extended_dp_matches_other_fills_and_the_extended_lp(block_size, s, reward_kind):
  """Against "matmul" and "sort" (the other fills agree with those in test_planning.py)
  and against the extended LP (HiGHS)."""
  reward, lower, upper = _dp_problem(s, s, reward_kind=reward_kind)
  args = tuple(jnp.asarray(x) for x in (reward, lower, upper))
  evi, lmo, _ = got = _dp_kernels("blocked")(*args)
  for other in ("matmul", "sort"):
    chex.assert_trees_all_close(got, _dp_kernels(other)(*args), atol=1e-12)
  lp = ref.extended_lp_value(reward, lower, upper, 1)
  assert float(evi.value) == pytest.approx(lp, abs=1e-9)
  assert float(lmo.value) == pytest.approx(lp, abs=1e-9)
  assert float(jnp.sum(lmo.occupancy * reward)) == pytest.approx(lp, abs=1e-9)
  t = np.asarray(evi.transitions)
  assert np.all(t >= lower - 1e-12) and np.all(t <= upper + 1e-12)
  np.testing.assert_allclose(t.sum(-1), 1.0, atol=1e-12)


def test_blocked_kernels_under_jit_and_vmap_match_the_unbatched_call(block_size):
  problems = [_dp_problem(seed, 10) for seed in range(3)]
  reward, lower, upper = (jnp.asarray(np.stack([x[i] for x in problems])) for i in range(3))
  pi = jax.nn.softmax(reward, axis=-1)

  def kernels(r, lo, up, po):
    return (
      oj.TransitionSet(lo, up, fill="blocked").value_iteration(r, 0),
      oj.TransitionSet(lo, up, fill="blocked").lmo(r, 2),
      oj.TransitionSet(lo, up, fill="blocked").evaluate(r, po),
      oj.kernels.box_minimize(r[0, :, 0], lo[0, 0], up[0, 0], method="blocked"),
    )

  chex.clear_trace_counter()
  traced = chex.assert_max_traces(kernels, n=1)
  batched = jax.jit(jax.vmap(traced))(reward, lower, upper, pi)
  single_jit = jax.jit(kernels)
  eager = kernels(reward[0], lower[0], upper[0], pi[0])
  chex.assert_trees_all_close(eager, single_jit(reward[0], lower[0], upper[0], pi[0]), atol=1e-12)
  for j in range(3):
    single = single_jit(reward[j], lower[j], upper[j], pi[j])
    chex.assert_trees_all_close(single, jax.tree.map(lambda x: x[j], batched), atol=1e-12)


@pytest.mark.parametrize("rolled", [False, True])
def test_blocked_lmo_gradients_match_the_matmul_fill(block_size, rolled, monkeypatch):
  """`jax.grad` of the LMO value through both fills, on the unrolled and the rolled
  horizon scan, at a generic point (no ties): the same piecewise-linear function."""
  if rolled:
    monkeypatch.setattr(horizon, "UNROLL_MAX_ELEMENTS", 0)
  reward, lower, upper = (jnp.asarray(x) for x in _dp_problem(21, 9))
  grad = lambda fill: jax.jit(
    jax.grad(
      lambda r, lo, up: oj.TransitionSet(lo, up, fill=fill).lmo(r, 0).value,
      argnums=(0, 1, 2),
    )
  )(reward, lower, upper)
  blocked, matmul = grad("blocked"), grad("matmul")
  chex.assert_trees_all_close(blocked, matmul, atol=1e-12)
  assert float(jnp.abs(blocked[1]).max()) > 0 and float(jnp.abs(blocked[2]).max()) > 0
  # and through the minimiser: d(min + p . w)/d(values, lower, upper) of 9 boxes
  values = jnp.asarray(np.random.default_rng(2).normal(size=9))
  weights = jnp.linspace(-1.0, 1.0, 9)

  def row_grad(fill):
    def f(v, lo, up):
      minimum, p = oj.kernels.box_minimize(v, lo, up, method=fill)
      return jnp.sum(minimum) + jnp.sum(p @ weights)

    return jax.grad(f, argnums=(0, 1, 2))(values, lower[0, :, 0], upper[0, :, 0])

  chex.assert_trees_all_close(row_grad("blocked"), row_grad("matmul"), atol=1e-12)


@pytest.mark.parametrize("gradient", ["unrolled", "envelope"])
def test_inner_solver_gradients_match_the_matmul_fill(block_size, gradient):
  """`solve_inner`'s derivatives (the Frank-Wolfe output unrolled, or Danskin's envelope)
  with the blocked fill equal those with the matmul fill."""
  m = oj.random_cmdp(
    jax.random.PRNGKey(3), num_states=5, num_actions=2, horizon=3, num_constraints=2
  )
  lower, upper = (
    jnp.asarray(x) for x in ref.random_box(np.random.default_rng(3), np.asarray(m.transitions), 0.2)
  )

  def grads(fill):
    f = lambda c, d, lo, up, lam, eta: (
      oj.solve_inner(
        oj.inner.InnerProblem(
          cost=c,
          constraint_costs=d,
          thresholds=m.thresholds,
          transitions=oj.TransitionSet(lo, up, fill=fill),
          initial_state=0,
        ),
        lam,
        eta,
        solver=oj.inner.frank_wolfe(num_iters=12),
        gradient=gradient,
      ).objective
    )
    return jax.jit(jax.grad(f, argnums=tuple(range(6))))(
      m.cost, m.constraint_costs, lower, upper, jnp.asarray([0.3, 0.0]), 10.0
    )

  chex.assert_trees_all_close(grads("blocked"), grads("matmul"), atol=1e-9)


@pytest.mark.parametrize("gradient", ["unrolled", "envelope"])
def test_blocked_gradients_are_finite_at_ties(block_size, gradient):
  """All costs 0 and whole-simplex boxes: every action and every next state ties."""
  h, s, a = 3, 5, 2
  zeros = jnp.zeros((h, s, a))
  f = lambda c, lo, up: (
    oj.solve_inner(
      oj.inner.InnerProblem(
        cost=c,
        constraint_costs=jnp.zeros((1, h, s, a)),
        thresholds=jnp.zeros(1),
        transitions=oj.TransitionSet(lo, up, fill="blocked"),
        initial_state=0,
      ),
      jnp.zeros(1),
      1.0,
      solver=oj.inner.frank_wolfe(num_iters=10),
      gradient=gradient,
    ).objective
  )
  grads = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(
    zeros, jnp.zeros((h, s, a, s)), jnp.ones((h, s, a, s))
  )
  for g in grads:
    assert np.all(np.isfinite(np.asarray(g)))


def test_auto_resolves_by_the_number_of_next_states():
  assert oj.kernels.DEFAULT_FILL == "auto"
  threshold = oj.kernels.tuning_constants()["auto_blocked_min_states"]
  assert oj.kernels.resolve_fill("auto", threshold - 1) == "matmul"
  assert oj.kernels.resolve_fill("auto", threshold) == "blocked"
  for fill in OTHERS + ["blocked"]:
    assert oj.kernels.resolve_fill(fill, 3) == fill
  with pytest.raises(ValueError, match="fill"):
    oj.kernels.resolve_fill("bubble", 3)
  with pytest.raises(ValueError, match="fill"):
    oj.TransitionSet(jnp.zeros((2, 3, 2, 3)), jnp.ones((2, 3, 2, 3)), fill="bubble").lmo(
      jnp.zeros((2, 3, 2)), 0
    )


@pytest.mark.parametrize("threshold", [1, 10**9])
def test_auto_is_the_fill_it_resolves_to(threshold, monkeypatch):
  monkeypatch.setattr(box, "AUTO_BLOCKED_MIN_STATES", threshold)
  reward, lower, upper = (jnp.asarray(x) for x in _dp_problem(8, 6))
  want = "blocked" if threshold == 1 else "matmul"
  got = jax.jit(lambda r, lo, up: oj.TransitionSet(lo, up).lmo(r, 0))(reward, lower, upper)
  chex.assert_trees_all_close(
    got, oj.TransitionSet(lower, upper, fill=want).lmo(reward, 0), atol=1e-12
  )


def test_rolled_and_unrolled_horizon_scans_agree(monkeypatch):
  """`scan_horizon` rolls above `UNROLL_MAX_ELEMENTS`: the same results either way."""
  reward, lower, upper = (jnp.asarray(x) for x in _dp_problem(9, 7, h=5))

  def lmos():  # a new function each time: jit traces it again
    return jax.jit(
      lambda r, lo, up: (
        oj.TransitionSet(lo, up, fill="blocked").lmo(r, 0),
        oj.TransitionSet(lo, up, fill="matmul").lmo(r, 0),
      )
    )

  unrolled_fn = lmos()
  assert "while" not in unrolled_fn.lower(reward, lower, upper).as_text()
  unrolled = unrolled_fn(reward, lower, upper)
  monkeypatch.setattr(horizon, "UNROLL_MAX_ELEMENTS", 0)
  rolled_fn = lmos()
  assert "while" in rolled_fn.lower(reward, lower, upper).as_text()
  chex.assert_trees_all_close(unrolled, rolled_fn(reward, lower, upper), atol=1e-12)
