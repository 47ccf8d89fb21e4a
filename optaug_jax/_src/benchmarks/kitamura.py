"""The three benchmarks of Kitamura et al. (NeurIPS 2025) in the registry: instance `seed`
of `oj.linear.kitamura_*` as a `Benchmark` carrying its features, so that `--benchmark`
takes them, the tabular agents run on the CMDP and the linear agents (`oj.linear`) on its
features. Their baseline is the deterministic utility maximiser, with the slack
`max_pi V_u - b` of their threshold `b` (`oj.linear.LinearBenchmark`)."""

from __future__ import annotations

import jax.numpy as jnp

from ..linear import benchmarks as linear
from ._common import Benchmark


def _registered(bench: linear.LinearBenchmark) -> Benchmark:
  policy = jnp.asarray(bench.safe_policy)
  return Benchmark(bench.model.cmdp, policy, float(bench.slack), bench.model.features)


def kitamura_random(*, seed: int = 0, dtype=None) -> Benchmark:
  """Kitamura et al.'s random CMDP (`S = 5, A = 3, H = 4`, one-hot features), instance
  `seed` (`oj.linear.kitamura_random`)."""
  return _registered(linear.kitamura_random(seed, dtype))


def kitamura_streaming(*, seed: int = 0, dtype=None) -> Benchmark:
  """Kitamura et al.'s media-streaming CMDP (`S = 6, A = 2, H = 4`, one-hot features),
  instance `seed` (`oj.linear.kitamura_streaming`)."""
  return _registered(linear.kitamura_streaming(seed, dtype))


def kitamura_linear(*, seed: int = 0, dtype=None) -> Benchmark:
  """Kitamura et al.'s exact linear CMDP (`S = 100, A = 3, d = 5, H = 4`), instance `seed`
  (`oj.linear.kitamura_linear`)."""
  return _registered(linear.kitamura_linear(seed, dtype))
