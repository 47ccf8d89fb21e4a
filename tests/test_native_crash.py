"""The known cause of the native crash in XLA:CPU's compiler (`.ci/run`, tests/conftest.py):
a process at the kernel's limit on memory mappings. `experiments/map_count_crash.py` takes
all but a few hundred mappings and then compiles: without `jax.clear_caches()` it dies with
a segmentation fault within a few hundred compilations; clearing every 50 compilations lets
it finish. If a jaxlib turns the failure into a Python exception, the first test says so."""

import pathlib
import signal
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).parent.parent / "experiments" / "map_count_crash.py"


def _limit():
  try:
    return int(pathlib.Path("/proc/sys/vm/max_map_count").read_text())
  except (OSError, ValueError):
    return None


pytestmark = [
  pytest.mark.slow,
  pytest.mark.skipif(
    _limit() is None or _limit() > 300_000,
    reason="needs Linux's /proc and a mapping limit that one-page maps fill in seconds",
  ),
]


def _run(*flags):
  command = [sys.executable, "-X", "faulthandler", str(SCRIPT), "--compiles", "250", *flags]
  return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_compiling_at_the_mapping_limit_crashes_the_process():
  done = _run()
  assert done.returncode == -signal.SIGSEGV or done.returncode == -signal.SIGABRT, (
    done.returncode,
    done.stderr[-2000:],
  )
  assert "Cannot allocate memory" in done.stderr or "Unable to allocate" in done.stderr


def test_clearing_the_compiled_executables_avoids_it():
  done = _run("--clear-every", "50")
  assert done.returncode == 0, done.stderr[-2000:]
  assert "all 250 compiled" in done.stdout
