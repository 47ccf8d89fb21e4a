"""Experiment scripts over several processes (`jax.distributed` on 127.0.0.1, CPU collectives
over gloo): two processes write the files of one, bit for bit (timings aside), also through
an interrupted run resumed from process 0's checkpoints."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).parent.parent
EXPERIMENTS = ROOT / "experiments"
FLAGS = [
  "--benchmark",
  "factored",
  "--seeds",
  "4",
  "--episodes",
  "40",
  "--chunk",
  "20",
  "--pretrain",
  "4",
  "--batch-size",
  "2",
]
HEADLINE = ["--trace-points", "10", "--tail", "10"]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _env():
  return {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    "XLA_FLAGS": "",
    "JAX_PLATFORMS": "cpu",
  }


def _one(script, out, *extra):
  done = subprocess.run(
    [sys.executable, str(EXPERIMENTS / f"{script}.py"), *FLAGS, "--out", str(out), *extra],
    capture_output=True,
    text=True,
    env=_env(),
    timeout=600,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  return done


def _two(script, out, *extra):
  """The script launched as two processes (ids 0 and 1) joined on 127.0.0.1."""
  port = _free_port()
  procs = [
    subprocess.Popen(
      [
        sys.executable,
        str(EXPERIMENTS / f"{script}.py"),
        *FLAGS,
        "--out",
        str(out),
        *extra,
        "--coordinator",
        f"127.0.0.1:{port}",
        "--num-processes",
        "2",
        "--process-id",
        str(i),
      ],
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      env=_env(),
    )
    for i in (0, 1)
  ]
  outs = []
  for p in procs:
    try:
      stdout, stderr = p.communicate(timeout=600)
    except subprocess.TimeoutExpired:
      for q in procs:
        q.kill()
      raise
    outs.append((p.returncode, stdout, stderr))
  for i, (rc, _, stderr) in enumerate(outs):
    assert rc == 0, f"process {i}: {stderr[-3000:]}"
  assert "process 1 of 2" in outs[1][1]
  return outs


def _same_results(one, two, npz):
  a, b = np.load(one / npz), np.load(two / npz)
  assert a.files == b.files
  for k in a.files:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k, strict=True)
  sa, sb = (json.loads((d / "summary.json").read_text()) for d in (one, two))
  for s in (sa, sb):
    for agent in s["agents"].values():
      agent.pop("seconds")
  assert sa == sb
  assert (one / "config.json").read_bytes() == (two / "config.json").read_bytes()
  manifest = json.loads((two / "manifest.json").read_text())
  assert manifest["status"] == "complete"


@pytest.mark.slow  # 4 headline.py runs of a few seconds each, plus their compiles (1-3 min)
def test_two_processes_write_the_files_of_one(tmp_path):
  _one("headline", tmp_path / "one", *HEADLINE)
  _two("headline", tmp_path / "two", *HEADLINE)
  _same_results(tmp_path / "one", tmp_path / "two", "trace.npz")
  # Interrupted after one chunk (process 0 checkpoints), then resumed by two processes.
  _two("headline", tmp_path / "resumed", *HEADLINE, "--max-chunks", "1")
  status = json.loads((tmp_path / "resumed" / "manifest.json").read_text())["status"]
  assert status == "incomplete"
  assert [p.name for p in (tmp_path / "resumed").glob("checkpoint_*.npz")] == [
    "checkpoint_optaug.npz"
  ]
  outs = _two("headline", tmp_path / "resumed", *HEADLINE, "--resume")
  assert all("optaug: resuming at episode 20 of 40" in stdout for _, stdout, _ in outs)
  _same_results(tmp_path / "one", tmp_path / "resumed", "trace.npz")


@pytest.mark.slow  # 2 cancellation.py runs (1-2 min)
def test_two_processes_cancellation(tmp_path):
  flags = ["--agents", "optaug,optdual"]
  _one("cancellation", tmp_path / "one", *flags)
  _two("cancellation", tmp_path / "two", *flags)
  _same_results(tmp_path / "one", tmp_path / "two", "results.npz")
