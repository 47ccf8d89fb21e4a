"""Test configuration: float64 everywhere (reference comparisons), float32 where a test asks.

Compiled executables are dropped when a test module ends (`jax.clear_caches`), and after
any test that leaves the process holding more than half of the kernel's limit on memory
mappings (`vm.max_map_count`, 65,530 by default). Every XLA:CPU executable that stays
loaded holds about 3 mappings; at the limit the next compilation or cache load fails in
LLVM ("Cannot allocate memory") and the process dies with a segmentation fault in
`backend_compile_and_load` (or aborts): the native crash that `.ci/run` describes,
reproduced by `experiments/map_count_crash.py`. A session that kept every module's
executables loaded got there; one module holds at most about 12,400 mappings here.

The suite's time is mostly XLA compilation, and many tests compile the same programs (the
same agents on the same small CMDPs, in several modules and in both xdist workers): JAX's
persistent compilation cache (`jax_compilation_cache_dir`, keyed by the program, the
flags and the versions) keeps them in `OPTAUG_TEST_CACHE` (default: a folder of the
system's temporary directory; `OPTAUG_TEST_CACHE=off` turns it off). A fresh cache (CI)
saves about a fifth of the time; a warm one much more.
"""

import getpass
import os
import tempfile

import jax
import pytest

jax.config.update("jax_enable_x64", True)

_CACHE = os.environ.get("OPTAUG_TEST_CACHE") or os.path.join(
  tempfile.gettempdir(), f"optaug-jax-tests-{getpass.getuser()}", "jax-cache"
)
if _CACHE != "off":
  jax.config.update("jax_compilation_cache_dir", _CACHE)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_executables_after_the_module():
  yield
  jax.clear_caches()


def _map_limit():
  """`(limit, count)` of this process's memory mappings, or None where /proc has neither."""
  try:
    with open("/proc/sys/vm/max_map_count") as f:
      limit = int(f.read())
    with open("/proc/self/maps") as f:
      return limit, sum(1 for _ in f)
  except (OSError, ValueError):
    return None


@pytest.fixture(autouse=True)
def _stay_far_from_the_mapping_limit():
  yield
  maps = _map_limit()
  if maps is not None and maps[1] > maps[0] // 2:
    jax.clear_caches()
