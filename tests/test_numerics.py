"""Every product in every agent's episode runs at the dtype's full precision.

At the default precision XLA:GPU on Ampere and later multiplies float32 in TensorFloat-32
(10 mantissa bits) and a TPU in bfloat16. On an H200 that left 13% of the two-constraint
reservoir's OptAug solves uncertified (their 1e-4 certificate never closed; the CPU
certified all of them). A CPU computes every precision alike, so the check is on the
programs: every `dot_general` of the traced episode asks for `HIGHEST`, as it would on a
GPU (the traced program is the same on every backend).
"""

import jax
import pytest
from jax.extend import core as jex_core

import optaug_jax as oj
from optaug_jax._src import numerics

# Agents that take one constraint only, and agents that solve LPs in the dense layout only,
# are traced on the problems they take.
ONE_CONSTRAINT = ("optaug_linear", "opse", "ghosh_softmax")
DENSE_ONLY = ("optcmdp", "dope", "optpess_lp")


def _jaxprs(eqn):
  for value in eqn.params.values():
    for item in value if isinstance(value, (list, tuple)) else (value,):
      if isinstance(item, jex_core.ClosedJaxpr):
        yield item.jaxpr
      elif isinstance(item, jex_core.Jaxpr):
        yield item


def products_below_highest(fn, *args) -> list[str]:
  """Where (file:line) `fn(*args)`'s program multiplies below full precision."""
  found = []

  def walk(jaxpr):
    for eqn in jaxpr.eqns:
      if eqn.primitive.name == "dot_general":
        precision = eqn.params["precision"]
        if precision is None or any(p != numerics.HIGHEST for p in precision):
          found.append(jax._src.source_info_util.summarize(eqn.source_info))
      for sub in _jaxprs(eqn):
        walk(sub)

  walk(jax.make_jaxpr(fn)(*args).jaxpr)
  return found


@pytest.fixture(scope="module")
def problems():
  sparse = oj.benchmarks.make_benchmark("queue")  # I = 1, the sparse layout
  small = dict(seed=1, num_states=6, num_actions=3, horizon=4)
  return {
    "sparse, I = 1": sparse,
    "dense, I = 1": oj.benchmarks.random_family(**small, num_constraints=1),
    "dense, I = 2": oj.benchmarks.random_family(**small, num_constraints=2),
  }


@pytest.mark.parametrize("name", list(oj.agents.AGENTS))
def test_every_product_of_every_agents_episode_is_full_precision(problems, name):
  key = jax.random.PRNGKey(0)
  for label, bench in problems.items():
    if (name in ONE_CONSTRAINT and "I = 2" in label) or (name in DENSE_ONLY and "sparse" in label):
      continue
    accepts = oj.agents.agent_options(name)
    options = {"eta": 10.0, "setting": oj.named_setting("bura2022", bench)}
    options = {k: v for k, v in options.items() if k in accepts}
    agent = oj.agents.make_agent(name, bench, num_episodes=20, **options)
    run = lambda k, agent=agent, bench=bench: oj.run(agent, k, bench.cmdp, num_episodes=3)
    assert products_below_highest(run, key) == [], (name, label)


@pytest.mark.parametrize("inner", ["exact", "frank_wolfe"])
def test_every_product_of_the_inner_solves_and_their_gradients_is_full_precision(problems, inner):
  bench = problems["dense, I = 2"]
  solver = getattr(oj.inner, inner)()
  agent = oj.agents.make_agent("optaug", bench, num_episodes=20, eta=10.0, inner=solver)
  run = lambda k: oj.run(agent, k, bench.cmdp, num_episodes=3)
  assert products_below_highest(run, jax.random.PRNGKey(0)) == []


def test_the_check_finds_a_default_precision_product():
  a = jax.numpy.ones((3, 3))
  assert len(products_below_highest(lambda x: x @ x, a)) == 1
  assert products_below_highest(lambda x: numerics.matmul(x, x), a) == []
  assert products_below_highest(lambda x: numerics.einsum("ij,jk->ik", x, x), a) == []


@pytest.mark.parametrize("gradient", ["envelope", "unrolled"])
def test_every_product_of_the_sensitivities_and_known_model_methods_is_full_precision(
  problems, gradient
):
  cmdp = problems["dense, I = 2"].cmdp
  problem = oj.inner.InnerProblem.of_cmdp(cmdp)
  lam = jax.numpy.asarray([0.3, 0.0])
  sens = lambda eta: oj.analysis.inner_sensitivities(problem, lam, eta, gradient=gradient)
  assert products_below_highest(sens, 10.0) == []
  alm = lambda c: oj.analysis.alm_known_model(c, 10.0, num_iters=3, gradient=gradient)
  assert products_below_highest(alm, cmdp) == []
  dual = lambda c: oj.analysis.dual_descent_known_model(c, 1.0, num_iters=3)
  assert products_below_highest(dual, cmdp) == []
