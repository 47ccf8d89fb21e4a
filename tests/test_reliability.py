"""Nothing lost, nothing silently wrong: checkpoints that carry their run's identity,
counts that never saturate, and every bad argument named (one test per reported case)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax import experiment
from optaug_jax.experiment import result_files


def _args(out, *extra):
  return [
    "--benchmark",
    "factored",
    "--seeds",
    "2",
    "--episodes",
    "20",
    "--chunk",
    "10",
    "--agents",
    "optdual",
    "--out",
    str(out),
    *extra,
  ]


@pytest.fixture(scope="module")
def cancellation():
  return experiment.cancellation


def _results(out):
  with np.load(out / "results.npz") as f:
    return {k: f[k] for k in f.files}


def _rewrite(path, edit):
  """Rewrites a checkpoint with `edit(arrays)` applied and a matching digest (a forged but
  well-formed file: only the content checks can catch it)."""
  with np.load(path) as ck:
    arrays = {k: ck[k] for k in ck.files}
  meta = json.loads(str(arrays.pop("meta")))
  edit(arrays)
  meta["digest"] = result_files.digest(arrays)
  np.savez(path, meta=np.asarray(json.dumps(meta, sort_keys=True)), **arrays)


@pytest.mark.slow
def test_resume_never_mixes_in_another_run(tmp_path, cancellation):
  """Case 1: a run with --dual-eta 5, then a fresh default run stopped after one chunk,
  then --resume: the result is the default run's, bit for bit."""
  reference = tmp_path / "reference"
  cancellation.main(_args(reference))
  out = tmp_path / "out"
  cancellation.main(_args(out, "--dual-eta", "5"))
  assert cancellation.main(_args(out, "--max-chunks", "1")) is None  # clears old checkpoints
  cancellation.main(_args(out, "--resume"))
  want, got = _results(reference), _results(out)
  for k in want:
    np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_resume_refuses_a_checkpoint_of_other_settings(tmp_path, cancellation):
  out = tmp_path / "out"
  assert cancellation.main(_args(out, "--dual-eta", "5", "--max-chunks", "1")) is None
  with pytest.raises(ValueError, match=r"belongs to another run.*dual_eta"):
    cancellation.main(_args(out, "--resume"))


@pytest.mark.slow
def test_moved_output_directory_resumes(tmp_path, cancellation):
  first = tmp_path / "first"
  assert cancellation.main(_args(first, "--max-chunks", "1")) is None
  moved = tmp_path / "moved"
  first.rename(moved)
  cancellation.main(_args(moved, "--resume"))
  reference = tmp_path / "reference"
  cancellation.main(_args(reference))
  for k, v in _results(reference).items():
    np.testing.assert_array_equal(_results(moved)[k], v)


@pytest.mark.slow
@pytest.mark.parametrize(
  "case", ["done_1000", "done_edited_in_place", "done_15", "nan_state", "truncated", "empty"]
)
def test_damaged_checkpoints_are_refused_with_the_file_named(tmp_path, cancellation, case):
  """Case 2: edited episode counts, garbage state, truncated and empty files."""
  out = tmp_path / "out"
  assert cancellation.main(_args(out, "--max-chunks", "1")) is None
  path = out / "checkpoint_optdual.npz"
  if case == "done_1000":
    _rewrite(path, lambda a: a.update(done=np.asarray(1000)))
    match = "outside"
  elif case == "done_edited_in_place":  # the digest no longer matches
    with np.load(path) as ck:
      arrays = {k: ck[k] for k in ck.files}
    arrays["done"] = np.asarray(15)
    np.savez(path, **arrays)
    match = "digest"
  elif case == "done_15":
    _rewrite(path, lambda a: a.update(done=np.asarray(15)))
    match = "log"
  elif case == "nan_state":

    def poison(a):
      for k in a:
        if k.startswith("state_") and np.issubdtype(a[k].dtype, np.floating):
          a[k] = np.full_like(a[k], np.nan)

    _rewrite(path, poison)
    match = "NaN"
  elif case == "truncated":
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    match = "unreadable"
  else:
    path.write_bytes(b"")
    match = "unreadable"
  with pytest.raises(ValueError, match=match) as info:
    cancellation.main(_args(out, "--resume"))
  assert str(path) in str(info.value) and "delete it" in str(info.value)


def test_counts_never_saturate_in_low_precision():
  """Case 3: visits are integers and cost sums >= float32 whatever dtype is asked; 16-bit
  CMDPs are refused."""
  counts = oj.init_counts(
    num_states=2, num_actions=1, horizon=1, num_constraints=1, dtype=jnp.bfloat16
  )
  assert counts.visits.dtype == jnp.int32 and counts.cost_sums.dtype == jnp.float32
  trajectory = oj.Trajectory(
    states=jnp.asarray([0, 1]),
    actions=jnp.asarray([0]),
    costs=jnp.ones(1),
    constraint_costs=jnp.ones((1, 1)),
  )
  counts = jax.lax.fori_loop(0, 3000, lambda _, c: oj.update_counts(c, trajectory), counts)
  assert float(counts.visits[0, 0, 0]) == 3000.0  # bfloat16 stops at 256, float16 at 2048
  m = oj.random_cmdp(jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=3)
  for dtype in (jnp.float16, jnp.bfloat16):
    low = jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, m)
    with pytest.raises(ValueError, match="dtype .* is not supported"):
      oj.validate_cmdp(low)


def _cmdp():
  return oj.random_cmdp(jax.random.PRNGKey(0), num_states=3, num_actions=2, horizon=3)


@pytest.mark.parametrize(
  "build, match",
  [
    (lambda pi: oj.optaug(10, pi, 2, eta=1.0, bonus_scale=float("nan")), "bonus_scale"),
    (lambda pi: oj.optaug(10, pi, 2, eta=1.0, delta=1e-40), "delta"),
    (lambda pi: oj.optdual(10, eta=1.0, bonus_scale=-1.0), "bonus_scale"),
    (lambda pi: oj.agents.optcmdp(10, bonus_scale=-1.0), "bonus_scale"),
    (lambda pi: oj.optaug(10, pi, 2, eta=1.0, inner=oj.inner.frank_wolfe(tol=float("nan"))), "tol"),
    (lambda pi: oj.optaug(10, pi, 2, eta=1.0, nu=float("inf")), "nu"),
    (lambda pi: oj.optaug(10, pi, 2, eta=float("nan")), "eta"),
    (lambda pi: oj.agents.optprimaldual(10, policy_step=0.0), "policy_step"),
  ],
)
def test_factories_name_every_bad_argument(build, match):
  """Case 4: each hole reported in the factories' checks."""
  pi, _ = oj.safest_policy(_cmdp())
  with pytest.raises(ValueError, match=match):
    build(pi)


def test_check_safe_policy_and_run_arguments():
  m = _cmdp()
  pi, _ = oj.safest_policy(m)
  with pytest.raises(ValueError, match="slack"):
    oj.check_safe_policy(m, pi, float("nan"))
  agent = oj.optdual(10, eta=1.0)
  for bad in (2.5, -1, "3"):
    with pytest.raises(ValueError, match="num_episodes"):
      oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=bad)


def test_validate_cmdp_refuses_what_run_cannot_use():
  """Case 5: integer costs, a safe policy of the wrong shape."""
  m = _cmdp()
  with pytest.raises(ValueError, match="cost: dtype int"):
    oj.validate_cmdp(m._replace(cost=jnp.zeros(m.cost.shape, jnp.int32)))
  agent = oj.optaug(10, jnp.full((3, 3, 3), 1 / 3), 2, eta=1.0)  # A = 3, the CMDP has 2
  with pytest.raises(ValueError, match="safe_policy"):
    oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=3)


def _box(m):
  return m.transitions, m.transitions


@pytest.mark.parametrize(
  "case", ["initial_state", "lower_above_upper", "lower_mass", "upper_mass", "thresholds_shape"]
)
def test_kernels_refuse_invalid_arguments(case):
  """Case 6: invalid boxes, initial states and threshold shapes are named, not turned
  into garbage occupancies or negative certificates."""
  m = _cmdp()
  lower, upper = _box(m)
  s1, alpha = 0, m.thresholds
  if case == "initial_state":
    s1, match = 7, "initial_state"
  elif case == "lower_above_upper":
    lower, match = upper + 0.1, "lower"
  elif case == "lower_mass":
    lower, upper, match = jnp.full_like(lower, 0.6), jnp.ones_like(upper), "lower"
  elif case == "upper_mass":
    lower, upper, match = jnp.zeros_like(lower), jnp.full_like(upper, 0.2), "upper"
  else:
    alpha, match = jnp.ones(2), "thresholds"
  with pytest.raises(ValueError, match=match):
    oj.solve_inner(
      oj.inner.InnerProblem(
        cost=m.cost,
        constraint_costs=m.constraint_costs,
        thresholds=alpha,
        transitions=oj.TransitionSet(lower, upper),
        initial_state=s1,
      ),
      jnp.zeros(1),
      1.0,
      solver=oj.inner.frank_wolfe(),
      gradient="unrolled",
    )
  if case != "thresholds_shape":
    with pytest.raises(ValueError, match=match):
      oj.TransitionSet(lower, upper).value_iteration(m.cost, s1)


def test_checked_kernels_under_jit():
  """`check=True` inside a jitted function: `oj.checked` turns a failed check into a
  ValueError naming the argument; valid inputs give the unchecked result."""
  m = _cmdp()

  @oj.checked
  @jax.jit
  def solve(lower, upper, s1):
    return oj.solve_inner(
      oj.inner.InnerProblem(
        cost=m.cost,
        constraint_costs=m.constraint_costs,
        thresholds=m.thresholds,
        transitions=oj.TransitionSet(lower, upper),
        initial_state=s1,
      ),
      jnp.zeros(1),
      1.0,
      solver=oj.inner.exact(tol=None),
      check=True,
      gradient="unrolled",
    ).objective

  value = solve(m.transitions, m.transitions, 0)
  want = oj.solve_inner(
    oj.inner.InnerProblem(
      cost=m.cost,
      constraint_costs=m.constraint_costs,
      thresholds=m.thresholds,
      transitions=oj.TransitionSet(m.transitions, m.transitions),
      initial_state=0,
    ),
    jnp.zeros(1),
    1.0,
    solver=oj.inner.exact(tol=None),
    gradient="unrolled",
  ).objective
  assert float(value) == pytest.approx(float(want), abs=1e-12)
  with pytest.raises(ValueError, match="initial_state"):
    solve(m.transitions, m.transitions, 5)
  with pytest.raises(ValueError, match=r"solve_inner: (lower|upper): row \(h, s, a\)"):
    solve(m.transitions + 0.5, m.transitions + 0.6, 0)


@oj.checked
@jax.jit
def _checked_solve(transitions, cost, constraint_costs, thresholds, multipliers, eta):
  """One compilation for every case below (the checks depend on values, not shapes)."""
  return oj.solve_inner(
    oj.inner.InnerProblem(
      cost=cost,
      constraint_costs=constraint_costs,
      thresholds=thresholds,
      transitions=oj.TransitionSet(transitions, transitions),
      initial_state=0,
    ),
    multipliers,
    eta,
    solver=oj.inner.exact(tol=None),
    check=True,
    gradient="unrolled",
  ).objective


@pytest.mark.parametrize(
  "field,bad",
  [
    ("multipliers", np.nan),
    ("multipliers", -1.0),
    ("eta", np.inf),
    ("eta", -2.0),
    ("eta", 0.0),
    ("cost", np.nan),
    ("cost", -0.5),
    ("constraint_costs", np.inf),
    ("thresholds", np.nan),
  ],
)
def test_checked_inner_solve_refuses_bad_numbers_under_jit(field, bad):
  """Inside jit, NaN/inf or negative multipliers, step sizes and costs once passed into
  `solve_inner` (a NaN objective and certificate); `check=True` now names them."""
  m = _cmdp()
  args = dict(
    cost=m.cost,
    constraint_costs=m.constraint_costs,
    thresholds=m.thresholds,
    multipliers=jnp.zeros(1),
    eta=jnp.asarray(1.0),
  )
  args[field] = (
    jnp.full_like(jnp.asarray(args[field]), bad)
    if field in ("multipliers", "eta", "thresholds")
    else args[field].at[0, 0].set(bad)
    if field == "cost"
    else args[field].at[0, 0, 0].set(bad)
  )

  with pytest.raises(ValueError, match=field):
    _checked_solve(m.transitions, **args)
  # Eagerly (concrete arrays) the same arguments are refused without check=True.
  with pytest.raises(ValueError, match=field):
    oj.solve_inner(
      oj.inner.InnerProblem(
        cost=args["cost"],
        constraint_costs=args["constraint_costs"],
        thresholds=args["thresholds"],
        transitions=oj.TransitionSet(m.transitions, m.transitions),
        initial_state=0,
      ),
      args["multipliers"],
      args["eta"],
      solver=oj.inner.exact(tol=None),
      gradient="unrolled",
    )
