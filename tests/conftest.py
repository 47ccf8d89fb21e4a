"""Test configuration: float64 everywhere (reference comparisons), float32 where a test asks.

Each test module's compiled executables are dropped when the module ends
(`jax.clear_caches`): a pytest-xdist worker otherwise keeps every executable of every module
it ran loaded in XLA's CPU JIT for the whole session. The native faults seen in long
sessions (a segmentation fault in `backend_compile_and_load`, "Failed to materialize
symbols") came late in such workers; see `.ci/run`.

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
