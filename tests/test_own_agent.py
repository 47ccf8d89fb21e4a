"""Your own agent in the experiment scripts: `--agents path/to/file.py:FACTORY`, what it
receives (`arguments.AGENT_RULE`), its label in the files, one-line errors, and the example
agent of `experiments/own_agent/`.

In-process runs share the test session's float64; the example's end-to-end runs are slow.
"""

import json
import pathlib
import textwrap

import pytest

import optaug_jax as oj
from optaug_jax import experiment
from optaug_jax.experiment import arguments, cli, headline, problems, runs

ROOT = pathlib.Path(__file__).parent.parent
EXAMPLE = ROOT / "experiments" / "own_agent" / "regularised_primal_dual.py"


@pytest.fixture(autouse=True, scope="module")
def _registry_as_it_was():
  """The `--agents module:function` specs below register into the global registry (once
  per session, as their file is loaded once); this module leaves it as it found it (a
  later test that builds every registered agent would otherwise meet the broken one)."""
  saved = dict(oj.agents.AGENTS)
  yield
  oj.agents.AGENTS.clear()
  oj.agents.AGENTS.update(saved)


# Factories of the test files: each records the options it was called with.
FACTORIES = """
import optaug_jax as oj

CALLS = []


def recording(num_episodes, eta=None, pretrain_episodes=None, *, setting=None, slack=None):
  CALLS.append(dict(eta=eta, pretrain_episodes=pretrain_episodes, slack=slack))
  return oj.optdual(num_episodes=num_episodes, eta=1.0, setting=setting, slack=slack)


def dual_kwargs(num_episodes, **options):
  CALLS.append(options)
  return oj.optdual(num_episodes=num_episodes, eta=1.0, setting=options.get("setting"))


dual_kwargs.agent_kind = "dual"


def shared_only(num_episodes, setting=None):
  return oj.optdual(num_episodes=num_episodes, eta=1.0, setting=setting)


def raising(num_episodes, **options):
  raise RuntimeError("my factory is broken")


def optdual(num_episodes):  # its label collides with the built-in agent's name
  return oj.optdual(num_episodes=num_episodes, eta=1.0)


def labelled(num_episodes, **options):
  return oj.optdual(num_episodes=num_episodes, eta=1.0, setting=options.get("setting"))


labelled.label = "my_agent"
"""


@pytest.fixture(scope="module")
def factories(tmp_path_factory):
  """The path of a file of factories (loaded once per session: `problems.load_function`)."""
  path = tmp_path_factory.mktemp("own") / "my_agents.py"
  path.write_text(textwrap.dedent(FACTORIES))
  return str(path)


def _tiny(out, agents, *extra):
  return [
    "--benchmark", "factored", "--seeds", "2", "--episodes", "20", "--chunk", "10",
    "--trace-points", "5", "--tail", "5", "--agents", agents, "--out", str(out), *extra,
  ]  # fmt: skip


def _calls(spec):
  return problems.load_function(spec, "--agents").__globals__["CALLS"]


def test_eta_and_pretrain_reach_your_agent_of_optaugs_kind(factories, tmp_path):
  args = arguments.resolve_defaults(
    headline.parse_args(
      _tiny(tmp_path, f"optdual,{factories}:recording", "--eta", "7", "--pretrain", "3")
    )
  )
  assert args.agents == ["optdual", "recording"]
  assert args.agent_specs == {"recording": f"{factories}:recording"}
  bench = oj.benchmarks.make_benchmark("factored")
  calls = _calls(f"{factories}:recording")
  calls.clear()
  agents = runs.make_agents(
    args.agents, bench, num_episodes=20, options=arguments.agent_options(args)
  )
  assert set(agents) == {"optdual", "recording"}
  assert calls == [dict(eta=7.0, pretrain_episodes=3, slack=pytest.approx(bench.slack))]
  resolved = arguments.resolved_agent_options(args, bench)
  assert resolved["recording"]["eta"] == 7.0 and resolved["optdual"]["eta"] == "paper"
  assert arguments.options_line("recording", resolved["recording"]).startswith(
    "recording: num_episodes=20, slack=2.4, setting=paper"
  )


def test_dual_eta_and_the_shared_options_reach_a_dual_agent_with_kwargs(factories, tmp_path):
  args = arguments.resolve_defaults(
    headline.parse_args(
      _tiny(tmp_path, f"optaug,{factories}:dual_kwargs", "--dual-eta", "0.5", "--pretrain", "3")
    )
  )
  options = arguments.resolved_agent_options(args)["dual_kwargs"]
  assert options["eta"] == 0.5  # --dual-eta, not --eta
  assert "pretrain_episodes" not in options and "inner" not in options  # OptAug's kind only
  for shared in ("setting", "delta", "bonus_scale", "nu", "unreached", "num_episodes"):
    assert shared in options


@pytest.mark.parametrize(
  "flags, message",
  [
    (["--eta", "5"], "--eta 5.0: none of --agents optdual,shared_only takes it"),
    (["--pretrain", "3"], "--pretrain 3: none of --agents optdual,shared_only takes it"),
    (["--nu", "0.3"], "--nu 0.3: none of --agents optdual,shared_only takes it"),
  ],
)
def test_a_flag_no_listed_agent_takes_is_refused_naming_it(factories, tmp_path, flags, message):
  with pytest.raises(cli.UsageError, match="^" + message.replace(".", r"\.")) as info:
    headline.main(_tiny(tmp_path, f"optdual,{factories}:shared_only", *flags))
  assert info.value.usage.startswith("usage: headline.py")


def test_a_flag_left_at_its_default_is_never_refused(factories, tmp_path):
  args = headline.parse_args(_tiny(tmp_path, f"optdual,{factories}:shared_only"))
  assert args.agents == ["optdual", "shared_only"]


@pytest.mark.parametrize(
  "spec, message",
  [
    ("missing.py:f", "--agents missing.py:f: no file missing.py"),
    ("{file}:nothing", "--agents {file}:nothing: {file} has no nothing (it defines: "),
    ("{file}:optdual", "its label 'optdual' is a registered agent's name"),
    ("{file}:raising", "--agents {file}:raising: raising(...) raised RuntimeError: my factory"),
  ],
  ids=["no file", "no function", "label collides", "factory raises"],
)
def test_a_bad_agent_spec_is_one_line_exit_2(factories, tmp_path, capsys, spec, message):
  spec, message = spec.format(file=factories), message.format(file=factories)
  argv = _tiny(tmp_path / "run", f"optdual,{spec}")
  status = cli.run_guarded("headline", headline.main, argv)
  err = capsys.readouterr().err
  assert status == 2 and "Traceback" not in err
  last = err.strip().splitlines()[-1]
  assert last.startswith("headline.py: error: ") and message in last
  with pytest.raises(cli.UsageError, match="^--agents "):  # the same error from Python
    headline.main(argv)


def test_main_raises_the_usage_error_the_command_line_prints(capsys):
  with pytest.raises(cli.UsageError, match="argument --seeds: expected a positive integer"):
    headline.main(["--seeds", "0"])
  assert cli.run_guarded("headline", headline.main, ["--seeds", "0"]) == 2
  err = capsys.readouterr().err
  assert err.startswith("usage: headline.py") and err.strip().splitlines()[-1] == (
    "headline.py: error: argument --seeds: expected a positive integer, got 0"
  )


@pytest.mark.slow  # 12 s: a whole headline.py run (compile, figures)
def test_your_agents_label_is_in_the_files(factories, tmp_path, capsys):
  out = tmp_path / "run"
  argv = _tiny(out, f"{factories}:labelled", "--episodes", "10", "--trace-points", "3")
  headline.main(argv)
  printed = capsys.readouterr().out
  assert "my_agent: num_episodes=10, safe_policy=the benchmark's, slack=2.4," in printed
  summary = json.loads((out / "summary.json").read_text())
  assert set(summary["agents"]) == {"my_agent"}
  assert summary["agent_options"]["my_agent"]["setting"] == "paper"
  config = json.loads((out / "config.json").read_text())
  assert config["arguments"]["agents"] == f"{factories}:labelled"


@pytest.mark.slow
def test_the_example_agent_runs_in_headline_and_outlook(tmp_path, capsys):
  spec = f"{EXAMPLE}:regularised_primal_dual"
  out = tmp_path / "headline"
  summaries = headline.main(_tiny(out, f"optaug,optdual,{spec}", "--pretrain", "5"))
  assert set(summaries) == {"optaug", "optdual", "regularised_primal_dual"}
  summary = json.loads((out / "summary.json").read_text())
  assert summary["agent_options"]["regularised_primal_dual"]["eta"] == "paper"  # --dual-eta
  outlook = experiment.outlook
  outlook.main(
    [
      "--benchmark",
      "factored",
      "--seeds",
      "2",
      "--episodes",
      "200",
      "--pilot-episodes",
      "40",
      "--pilot-seeds",
      "2",
      "--perfect-episodes",
      "40",
      "--up-to",
      "1000",
      "--pretrain",
      "5",
      "--agents",
      f"optaug,optdual,{spec}",
      "--out",
      str(tmp_path / "ol"),
    ]  # fmt: skip
  )
  saved = json.loads((tmp_path / "ol" / "outlook.json").read_text())
  assert "regularised_primal_dual" in saved["agent_options"]
  assert "no prediction" in capsys.readouterr().out
