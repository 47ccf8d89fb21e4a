"""Test configuration: float64 everywhere (reference comparisons), float32 where a test asks.

Each test module's compiled executables are dropped when the module ends
(`jax.clear_caches`): a pytest-xdist worker otherwise keeps every executable of every module
it ran loaded in XLA's CPU JIT for the whole session. The native faults seen in long
sessions (a segmentation fault in `backend_compile_and_load`, "Failed to materialize
symbols") came late in such workers; see `.ci/run`.
"""

import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_executables_after_the_module():
  yield
  jax.clear_caches()
