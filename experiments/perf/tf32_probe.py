"""OptAug's solves under TensorFloat-32 products, emulated on a CPU.

At the default precision an Ampere or Hopper GPU (an H100, an H200) multiplies float32 in
TensorFloat-32: each operand of a product rounded to 10 mantissa bits. With `--tf32` this
probe rounds the float32 operands of every `dot_general` that does not ask for `HIGHEST`
the same way (to nearest, ties to even) before the CPU multiplies them, so a CPU shows what
such a GPU computes. Then it runs OptAug as `episode_cost.py` does (`--eta`, the exact
inner solve, the problem's setting and bonus; one chunk of `--chunk` episodes of
pre-training) for `--seeds` seeds vmapped, and prints, for the next `--windows` chunks, the
extended DPs per episode (mean, the vmapped batch's maximum, the largest) and the share of
certified solves. Once every product of the library asked for `HIGHEST`
(`optaug_jax._src.numerics`), `--tf32` changes nothing.

  PYTHONPATH=. python experiments/perf/tf32_probe.py --problem reservoir --tf32
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.lax import lax as lax_impl  # where jnp's products call dot_general

import optaug_jax as oj
from optaug_jax.experiment import cost_table, timing

_dot_general = lax_impl.dot_general


def tf32(x):
  """float32 `x` rounded to TensorFloat-32's 10 mantissa bits (nearest, ties to even)."""
  if x.dtype != jnp.float32:
    return x
  bits = lax.bitcast_convert_type(x, jnp.uint32)
  half, odd = jnp.uint32(0x0FFF), (bits >> 13) & jnp.uint32(1)
  return lax.bitcast_convert_type((bits + half + odd) & jnp.uint32(0xFFFFE000), jnp.float32)


def _full(precision) -> bool:
  if isinstance(precision, (tuple, list)):
    return all(p == lax.Precision.HIGHEST for p in precision)
  return precision == lax.Precision.HIGHEST


def _tf32_dot_general(lhs, rhs, dimension_numbers, precision=None, *args, **kwargs):
  if not _full(precision):
    lhs, rhs = tf32(lhs), tf32(rhs)
  return _dot_general(lhs, rhs, dimension_numbers, precision, *args, **kwargs)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument(
    "--problem", default="reservoir", help="episode_cost.py's table (default: %(default)s)"
  )
  p.add_argument("--seeds", type=int, default=16, help="(default: %(default)s)")
  p.add_argument("--chunk", type=int, default=100, help="episodes per chunk (default: %(default)s)")
  p.add_argument(
    "--windows", type=int, default=2, help="chunks after pre-training (default: %(default)s)"
  )
  p.add_argument("--eta", type=float, default=20.0, help="(default: %(default)s)")
  p.add_argument("--tf32", action="store_true", help="emulate TensorFloat-32 products")
  args = p.parse_args(argv)
  if args.tf32:
    lax_impl.dot_general = _tf32_dot_general
  name, kwargs, setting, bonus = cost_table.entry(args.problem)
  bench = cost_table.benchmark(name, kwargs)
  episodes = args.chunk * (1 + args.windows)
  agent = cost_table.agents(
    bench, oj.named_setting(setting, bench.cmdp), bonus, episodes, args.chunk, args.eta,
    ["optaug"], 0.0,
  )["optaug"]  # fmt: skip
  fn = cost_table.chunk(agent, bench.cmdp, args.chunk)
  state = timing.batch(oj.agents.init_agent(agent, bench.cmdp), args.seeds)
  start = time.perf_counter()
  state, _ = jax.block_until_ready(fn(cost_table.keys(args.seeds, 0), state))
  windows = []
  for stage in range(1, 1 + args.windows):
    state, log = jax.block_until_ready(fn(cost_table.keys(args.seeds, stage), state))
    dp, certified = np.asarray(log.extras["dp_calls"]), np.asarray(log.certified)
    windows.append(
      {
        "dp_mean": float(dp.mean()),
        "dp_batch_max_mean": float(dp.max(axis=0).mean()),
        "dp_max": int(dp.max()),
        "certified": float(certified.mean()),
      }
    )
  row = {**vars(args), "seconds": time.perf_counter() - start, "windows": windows}
  row["optaug_jax"] = oj.__file__
  print(json.dumps(row), flush=True)
  return row


if __name__ == "__main__":
  main()
