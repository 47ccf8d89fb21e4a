"""The linear track in the registries and the scripts: Kitamura et al.'s benchmarks under
`--benchmark` (with their features), the linear agents under `--agents` with their
options (`--eta`, `--dual-eta`, `--pretrain`, `--temperature`, `--linear-bonus`; the
published constants as defaults on the published benchmarks), and where the constraint
binds, instance by instance, against HiGHS."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax import experiment, linear
from optaug_jax.experiment import arguments, cli, headline, runs

LINEAR = ("optaug_linear", "optdual_linear", "opse", "ghosh_softmax")


@pytest.mark.parametrize("name", sorted(linear.BENCHMARKS))
def test_the_registered_benchmark_is_the_linear_one_with_its_features(name):
  registered = oj.benchmarks.make_benchmark(name, seed=3)
  mine = linear.BENCHMARKS[name](3)
  for field in ("transitions", "cost", "constraint_costs", "thresholds", "initial_state"):
    np.testing.assert_array_equal(
      getattr(registered.cmdp, field), getattr(mine.model.cmdp, field), err_msg=field
    )
  np.testing.assert_array_equal(registered.features, mine.model.features)
  np.testing.assert_array_equal(registered.safe_policy, mine.safe_policy)
  assert registered.slack == pytest.approx(mine.slack)
  assert oj.check_safe_policy(registered.cmdp, registered.safe_policy) > 0


# Instances 0-9 whose constraint binds (the LP optimum above the unconstrained one): the
# module docstring of oj.linear's benchmarks says so.
BINDING = {
  "kitamura_random": {1, 3, 6, 7, 8},
  "kitamura_streaming": set(range(10)),
  "kitamura_linear": set(),
}


@pytest.mark.parametrize("name", sorted(BINDING))
def test_where_the_constraint_binds_instance_by_instance(name):
  binds = set()
  for seed in range(10):
    cmdp = linear.BENCHMARKS[name](seed, dtype=jnp.float64).model.cmdp
    free = cmdp._replace(thresholds=jnp.full_like(cmdp.thresholds, cmdp.horizon))
    gap = oj.solve_lp(cmdp).value - oj.solve_lp(free).value
    assert gap >= -1e-9
    if gap > 1e-6:
      binds.add(seed)
  assert binds == BINDING[name]


@pytest.mark.parametrize("bench_name", ["kitamura_streaming", "factored"])
@pytest.mark.parametrize("name", LINEAR)
def test_each_linear_agent_is_built_by_the_registry_on_linear_and_tabular_benchmarks(
  name, bench_name
):
  """On a tabular benchmark the linear agents learn through one-hot features (`d = S A`);
  the first plan, jitted, is a policy (rows on the simplex) and its multiplier is 0."""
  bench = oj.benchmarks.make_benchmark(bench_name)
  options = {"eta": 1.0} if name in ("optaug_linear", "optdual_linear") else {}
  agent = oj.agents.make_agent(name, bench, num_episodes=10, **options)
  cmdp = bench.cmdp
  state, logs = jax.jit(lambda k: oj.run(agent, k, cmdp, num_episodes=3))(jax.random.PRNGKey(0))
  policy, _, _ = jax.jit(agent.plan)(state)
  np.testing.assert_allclose(np.asarray(policy).sum(-1), 1.0, atol=1e-5)
  d = cmdp.num_states * cmdp.num_actions if bench.features is None else bench.features.shape[-1]
  assert state.ridge.targets.shape[-1] == d
  assert int(state.episode) == 3 and logs.constraint_values.shape == (3, 1)


def _args(tmp_path, *extra):
  argv = ["--benchmark", "kitamura_random", "--seeds", "2", "--episodes", "400", "--chunk", "10"]
  argv += ["--trace-points", "5", "--tail", "5", "--out", str(tmp_path)]
  return headline.parse_args(argv + list(extra))


def test_the_published_constants_are_the_defaults_on_the_published_benchmarks(tmp_path):
  args = arguments.resolve_defaults(
    _args(
      tmp_path, "--benchmark", "kitamura_linear", "--agents", ",".join(LINEAR), "--dual-eta", "1"
    )
  )
  resolved = arguments.resolved_agent_options(args)
  for name in LINEAR:
    assert resolved[name]["temperature"] == 0.01 and resolved[name]["cost_bonus"] == 5.0
  assert resolved["opse"]["compensation_bonus"] == 5.0
  assert resolved["optaug_linear"]["eta"] == 100.0  # --eta's default
  assert resolved["optaug_linear"]["pretrain_episodes"] == 300  # --pretrain's
  given = arguments.resolve_defaults(
    _args(tmp_path, "--agents", "opse", "--temperature", "0.5", "--linear-bonus", "0")
  )
  assert arguments.resolved_agent_options(given)["opse"]["temperature"] == 0.5
  assert arguments.resolved_agent_options(given)["opse"]["constraint_bonus"] == 0.0
  # Elsewhere the agents' own defaults: no option is passed.
  tabular = arguments.resolve_defaults(
    _args(tmp_path, "--benchmark", "factored", "--agents", "opse")
  )
  assert "temperature" not in arguments.resolved_agent_options(tabular)["opse"]
  bench = oj.benchmarks.make_benchmark("factored")
  line = arguments.options_line("opse", arguments.resolved_agent_options(tabular, bench)["opse"])
  assert "model=LinearCMDP(one-hot features, d=6)" in line


@pytest.mark.parametrize(
  "flags, message",
  [
    (
      ["--agents", "optaug_linear", "--eta", "paper", "--x64"],
      "--eta paper: optaug_linear takes a constant step",
    ),
    (["--agents", "opse,optdual_linear"], "--dual-eta paper (its default): optdual_linear takes"),
    (["--agents", "optaug,optdual", "--temperature", "0.2"], "--temperature 0.2: none of"),
    (["--agents", "optdual", "--linear-bonus", "2"], "--linear-bonus 2.0: none of"),
    (["--benchmark", "factored", "--problem-seed", "2"], "--problem-seed: it describes"),
  ],
)
def test_flags_that_cannot_reach_a_linear_run_are_refused(tmp_path, capsys, flags, message):
  with pytest.raises(SystemExit) as info:
    _args(tmp_path, *flags)
  assert info.value.code == 2
  assert message in capsys.readouterr().err


def test_headline_runs_the_linear_agents_on_an_instance(tmp_path, capsys):
  """`headline.py --benchmark kitamura_random --problem-seed 1 --agents opse,optaug_linear`:
  the instance is the one asked for (its threshold), OPSE never violates (exact values),
  both agents are in the summary."""
  argv = ["--benchmark", "kitamura_random", "--problem-seed", "1", "--agents", "opse,optaug_linear"]
  argv += ["--seeds", "2", "--episodes", "20", "--chunk", "10", "--pretrain", "1", "--eta", "1"]
  argv += ["--trace-points", "5", "--tail", "5", "--out", str(tmp_path)]
  headline.main(argv)
  out = capsys.readouterr().out
  optimum = [oj.solve_lp(linear.kitamura_random(i).model.cmdp).value for i in (0, 1)]
  assert f"V* = {optimum[1]:.4f}" in out and f"V* = {optimum[0]:.4f}" not in out
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert set(summary["agents"]) == {"opse", "optaug_linear"}
  assert summary["agents"]["opse"]["final"]["strong_constraint"]["mean"] == 0.0
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["arguments"]["problem_seed"] == 1
  assert config["arguments"]["temperature"] is None  # the published 0.1: agent_options


def test_a_library_refusal_of_a_linear_option_names_its_flag():
  """The library's own refusal (an `oj.ArgumentError` naming `temperature`) reaches the
  command line as the flag that set it; no message is parsed."""
  bench = linear.kitamura_random(0)
  with pytest.raises(oj.ArgumentError) as error:
    linear.opse(bench.model, bench.safe_policy, temperature=0.0)
  refused = runs._library_refused("opse", error.value)
  assert "--temperature" in str(refused) and "expected a positive number" in str(refused)
  assert isinstance(refused, cli.UsageError)


@pytest.mark.slow  # 20-60 s: the outlook's pilots and perfect-model runs
def test_the_outlook_takes_a_kitamura_benchmark_and_refuses_linear_agents(tmp_path, capsys):
  """The outlook's predictions rest on the tabular agents (their perfect-model runs): it
  runs them on Kitamura et al.'s streaming CMDP, and refuses a list of linear agents in one
  line naming --agents."""
  argv = ["--benchmark", "kitamura_streaming", "--problem-seed", "2", "--seeds", "2"]
  argv += ["--episodes", "200", "--pilot-episodes", "40", "--pilot-seeds", "2"]
  argv += ["--perfect-episodes", "40", "--up-to", "1000", "--pretrain", "5"]
  experiment.outlook.main([*argv, "--agents", "optaug,optdual", "--out", str(tmp_path / "a")])
  saved = json.loads((tmp_path / "a" / "outlook.json").read_text())
  assert set(saved["agent_options"]) == {"optaug", "optdual"}
  assert "kitamura_streaming" in capsys.readouterr().out
  with pytest.raises(cli.UsageError, match="--agents optaug_linear,optdual_linear: the outlook"):
    experiment.outlook.main(
      [*argv, "--agents", "optaug_linear,optdual_linear", "--dual-eta", "1"]
      + ["--out", str(tmp_path / "b")]
    )


def _small(name):  # one-hot features have d = S A: the gram is O(H S A d^2) per plan
  cmdp = oj.benchmarks.make_benchmark(name).cmdp
  return cmdp.num_states * cmdp.num_actions <= 300


@pytest.mark.parametrize("bench_name", [n for n in oj.benchmarks.BENCHMARKS if _small(n)])
def test_optdual_linear_runs_on_every_registered_benchmark_of_up_to_300_pairs(bench_name):
  """The README's promise, on each registered benchmark where one-hot features are small
  enough (all but queue and lost_sales, d = 600 and 800): the registry builds the agent,
  three episodes run under jit (sparse layouts included), the policies are distributions
  and the exact values are finite."""
  bench = oj.benchmarks.make_benchmark(bench_name)
  agent = oj.agents.make_agent("optdual_linear", bench, num_episodes=10)
  run = jax.jit(lambda k: oj.run(agent, k, bench.cmdp, num_episodes=3))
  state, logs = run(jax.random.PRNGKey(0))
  policy, _, _ = jax.jit(agent.plan)(state)
  np.testing.assert_allclose(np.asarray(policy).sum(-1), 1.0, atol=1e-5)
  assert np.all(np.isfinite(np.asarray(logs.cost_value)))


@pytest.mark.slow  # 20-30 s: four compilations
def test_the_speed_benchmark_runs_and_records_both_windows(tmp_path):
  """experiments/linear_speed.py at a tiny size: a row per agent and window, with the
  passes per plan (OPSE searches its multiplier in the later window) and the config."""
  import pathlib
  import subprocess
  import sys

  script = pathlib.Path(__file__).parent.parent / "experiments" / "linear_speed.py"
  argv = [sys.executable, str(script), "--out", str(tmp_path), "--agents", "opse,optdual_linear"]
  argv += ["--seeds", "2", "--episodes", "5", "--reps", "1", "--warm", "0,300"]
  argv += ["--states", "", "--features", ""]
  done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-2000:]
  record = json.loads((tmp_path / "linear_speed.json").read_text())
  rows = {(r["agent"], r["warm"]): r for r in record["per_core"]}
  assert set(rows) == {(a, w) for a in ("opse", "optdual_linear") for w in (0, 300)}
  assert rows[("optdual_linear", 300)]["passes"] == 1.0
  assert 1.0 <= rows[("opse", 300)]["passes"] <= rows[("opse", 300)]["batch_passes"] < 21
  assert record["config"]["warm"] == "0,300" and record["latent_factors"] == []
