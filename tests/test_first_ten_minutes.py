"""What a new user meets first: the README's main command and its defaults, errors that name
the fault at every entry point, precision warnings, `--help`, progress lines and figures.

One test per case of the report that opened this work (a fresh clone, README only).
"""

import argparse
import io
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import optaug_jax as oj
from optaug_jax import experiment

ROOT = pathlib.Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


@pytest.fixture(scope="module")
def scripts():
  return {
    "cli": experiment.cli,
    "runs": experiment.runs,
    "cancellation": experiment.cancellation,
    "headline": experiment.headline,
  }


def _cmdp(seed=0):
  return oj.random_cmdp(jax.random.PRNGKey(seed), num_states=4, num_actions=2, horizon=3)


# 1. The first command shows the claim: factored, the paper's own radii, OptAug vs OptDual.
def test_readme_main_command_runs_the_claim_at_the_papers_radii(scripts):
  first = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
  assert "experiments/headline.py" in first and "--bonus-scale" not in first
  args = experiment.arguments.resolve_defaults(scripts["headline"].parse_args([]))
  assert args.benchmark == "factored" and args.setting == "paper"
  assert args.bonus_scale == 1.0  # no tuned bonus
  assert args.agents == ["optaug", "optdual"]
  assert args.episodes == 100_000 and args.seeds == 32
  title = experiment.arguments.run_title(args)
  assert "factored" in title and "bonus scale 1" in title and "32 seeds" in title


# 3. Invalid input is refused, or warned about, in the library's words.
def test_negative_threshold_is_refused_by_run_and_safest_policy():
  m = _cmdp()
  bad = m._replace(thresholds=-jnp.abs(m.thresholds) - 1.0)
  agent = oj.optdual(num_episodes=10, eta=1.0)
  with pytest.raises(ValueError, match=r"run: thresholds: .*outside \[0, H\]|run: thresholds"):
    oj.run(agent, jax.random.PRNGKey(0), bad, num_episodes=2)
  with pytest.raises(ValueError, match="safest_policy: thresholds"):
    oj.safest_policy(bad)
  # Under jit nothing can be read on the host: the in-program path is unchanged.
  policy, slack = jax.jit(oj.safest_policy)(bad)
  assert float(slack) < 0


def test_float64_cmdp_without_x64_is_warned_about():
  m = _cmdp()
  as64 = m._replace(
    transitions=np.asarray(m.transitions, np.float64),
    cost=np.asarray(m.cost, np.float64),
    constraint_costs=np.asarray(m.constraint_costs, np.float64),
    thresholds=np.asarray(m.thresholds, np.float64),
  )
  with jax.enable_x64(False):
    with pytest.warns(UserWarning, match="float64 arrays but JAX's x64 mode is off"):
      oj.safest_policy(as64)


@pytest.mark.slow  # 15-25 s; another default test covers the kernel (default suite under 10 min)
def test_papers_eta_in_float32_is_warned_about_and_refused_by_the_scripts(scripts):
  m = oj.random_cmdp(
    jax.random.PRNGKey(0), num_states=4, num_actions=2, horizon=3, dtype=jnp.float32
  )
  pi, slack = oj.safest_policy(m)
  agent = oj.optaug(num_episodes=10, safe_policy=pi, pretrain_episodes=0, slack=slack)
  with pytest.warns(UserWarning, match="float32"):
    oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=1)
  for script in ("cancellation", "headline"):
    with pytest.raises(SystemExit):
      scripts[script].parse_args(["--eta", "paper"])
    assert scripts[script].parse_args(["--eta", "paper", "--x64"]).eta is None


# 4. Errors name the fault.
def test_wrong_cost_shape_in_run_names_the_field():
  m = _cmdp()
  agent = oj.optdual(num_episodes=10, eta=1.0)
  with pytest.raises(ValueError, match=r"run: cost: expected shape \(3, 4, 2\)"):
    oj.run(agent, jax.random.PRNGKey(0), m._replace(cost=m.cost[..., :1]), num_episodes=2)


def test_check_true_outside_checked_says_what_to_do():
  m = _cmdp()
  agent = oj.optdual(num_episodes=10, eta=1.0)
  with pytest.raises(ValueError, match=r"oj\.checked"):
    oj.run(agent, jax.random.PRNGKey(0), m, num_episodes=2, check=True)
  # ... and inside oj.checked it works.
  oj.checked(lambda key, c: oj.run(agent, key, c, num_episodes=2, check=True))(
    jax.random.PRNGKey(0), m
  )


@pytest.mark.parametrize("flag", [["--seeds", "-3"], ["--episodes", "0"], ["--chunk", "x"]])
def test_bad_counts_are_refused_by_the_parser(scripts, flag, capsys):
  with pytest.raises(SystemExit):
    scripts["cancellation"].parse_args(flag)
  assert "expected a positive integer" in capsys.readouterr().err


# 5. API defaults, --help, progress and figures.
def test_make_agent_optaug_needs_no_pretraining_length():
  bench = oj.benchmarks.make_benchmark("factored")
  agent = oj.agents.make_agent("optaug", bench, num_episodes=100)
  _, log = oj.run(agent, jax.random.PRNGKey(0), bench.cmdp, num_episodes=12)
  # min(300, K // 10) = 10 pre-training episodes.
  np.testing.assert_array_equal(np.asarray(log.pretraining), [True] * 10 + [False] * 2)
  with pytest.raises(ValueError, match="benchmark: expected a Benchmark"):
    oj.agents.make_agent("optaug", bench.cmdp, num_episodes=100)


def test_named_setting_accepts_a_benchmark_or_a_cmdp():
  bench = oj.benchmarks.make_benchmark("factored")
  a = oj.named_setting("bura2022", bench)
  b = oj.named_setting("bura2022", bench.cmdp)
  np.testing.assert_array_equal(a.support, b.support)
  with pytest.raises(ValueError, match="expected a CMDP or a Benchmark"):
    oj.named_setting("bura2022", 3)


@pytest.mark.parametrize("script", ["cancellation", "headline"])
def test_every_option_has_help_and_default(scripts, script, monkeypatch):
  module = scripts[script]
  captured = {}  # both scripts build their parser inside parse_args
  original = argparse.ArgumentParser.parse_args
  monkeypatch.setattr(
    argparse.ArgumentParser,
    "parse_args",
    lambda self, argv=None: captured.setdefault("p", self) and original(self, argv),
  )
  module.parse_args([])
  parser = captured["p"]
  for action in parser._actions:
    if action.dest != "help":
      assert action.help, f"{script}: {action.option_strings} has no help"
  monkeypatch.setenv("COLUMNS", "80")
  text = parser.format_help()
  assert "(default:" in text
  flat = " ".join(text.split())
  built_in = [
    n for n, spec in oj.agents.AGENTS.items() if spec.factory.__module__.startswith("optaug_jax")
  ]
  for name in built_in:  # the agent list is never broken inside a name (agents that other
    assert re.search(rf"\b{name}\b", flat), name  # tests loaded from files are not listed)


def test_progress_is_one_line_per_report_off_a_terminal(scripts):
  out = io.StringIO()
  for done in (1, 2, 3):
    scripts["cli"].progress("optaug", done, 3, 0.0, 4, stream=out)
  text = out.getvalue()
  assert "\r" not in text and text.count("\n") == 3


def test_figures_carry_the_runs_identity_and_share_axes(scripts, tmp_path):
  cancellation = scripts["cancellation"]
  figures = {}

  class RunDir:
    def save_figure(self, fig, name, **_):
      figures[name] = fig

  rng = np.random.default_rng(0)
  curves = {
    n: {
      f: rng.uniform(size=(3, 5)).cumsum(1)
      for f in ("strong_cost", "weak_cost", "strong_constraint", "weak_constraint")
    }
    for n in ("optaug", "optdual")
  }
  logs = {
    n: {
      "constraint_values": rng.uniform(size=(3, 5, 1)),
      "multipliers": rng.uniform(size=(3, 5, 1)),
    }
    for n in ("optaug", "optdual")
  }
  cancellation.plot(curves, logs, np.asarray([0.5]), RunDir(), "factored, 3 seeds")
  for fig in figures.values():
    assert fig._suptitle is not None and "factored" in fig._suptitle.get_text()
  axes = figures["oscillation.png"].axes
  assert axes[0].get_shared_y_axes().joined(axes[0], axes[1])
