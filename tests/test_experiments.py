"""Smoke runs of the experiment scripts at tiny sizes, so that they never rot."""

import importlib.util
import json
import pathlib

import pytest

EXPERIMENTS = pathlib.Path(__file__).parent.parent / "experiments"


def _load(name):
  spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_quickstart_runs_and_saves(tmp_path):
  summary = _load("quickstart").main(["--episodes", "60", "--pretrain", "10", "--seeds", "2",
                                      "--fw-iters", "5", "--out", str(tmp_path)])
  assert set(summary) == {"optaug", "optdual"}
  for name in ["config.json", "summary.json", "results.npz"]:
    assert (tmp_path / name).exists()
  assert json.loads((tmp_path / "config.json").read_text())["episodes"] == 60


def test_step_benchmark_quick(tmp_path):
  out = tmp_path / "bench.json"
  result = _load("step_benchmark").main(["--quick", "--out", str(out)])
  assert result["jax_step_1_seed_s"] > 0 and out.exists()


def test_sensitivity_quick(tmp_path):
  pytest.importorskip("matplotlib")
  results = _load("sensitivity").main(["--quick", "--out", str(tmp_path)])
  assert (tmp_path / "sensitivity.png").exists()
  ident = results["agreement_and_cost"]["identities"]["envelope"]
  assert ident["rel_err_d_alpha"] < 1e-12 and ident["rel_err_d_cost"] < 1e-12
