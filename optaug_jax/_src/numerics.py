"""Numerics at the bottom of the package: the int32 episode limit, compensated sums and
products at the dtype's full precision.

Nothing here knows about CMDPs; the counts (`estimates`), the run summaries (`metrics`)
and the PID integral (`multiplier_updates`) build on it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

# The most episodes a run may hold: the episode counter and the visit counts are int32
# (each episode adds at most one visit to an `(h, s, a)`), so `run` refuses longer runs.
MAX_EPISODES = 2**31 - 1


def two_sum(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
  """`(s, e)` with `s = fl(a + b)` and `e = a + b - s` exactly (Knuth's TwoSum, branch-free).

  XLA keeps the order of floating-point additions (no reassociation), so the error term
  survives `jit` on CPU and GPU (tested under `jit`).
  """
  s = a + b
  b_virtual = s - a
  e = (a - (s - b_virtual)) + (b - b_virtual)
  return s, e


def compensated_add(
  total: jax.Array,
  compensation: jax.Array,
  value: jax.Array,
  value_compensation: jax.typing.ArrayLike = 0.0,
) -> tuple[jax.Array, jax.Array]:
  """Adds `value (+ value_compensation)` to the compensated sum `(total, compensation)`.

  A double-word sum (Neumaier's compensation, renormalised): the rounding error of every
  addition goes into `compensation`, which is folded back so that `total` stays the sum
  rounded to its dtype and `compensation` the (small) remainder. Exact integer sums below
  2^24 (float32) keep `compensation == 0` and `total` equal to a plain sum, bit for bit.

  Returns:
    `(total, compensation)` after the addition.
  """
  s, e = two_sum(total, value)
  return two_sum(s, compensation + value_compensation + e)


# Every product of the package (`dot_general`: einsum, matmul, dot, tensordot) asks for the
# dtype's full precision. At the default precision XLA:GPU on Ampere and later (an H100,
# an H200) multiplies float32 in TensorFloat-32, 10 mantissa bits (a relative error near
# 5e-4), and a TPU in bfloat16: far above the inner solve's certificate (1e-4 relative) and
# the float32 stopping tests (5e-6). On an H200 the two-constraint reservoir's solves
# stopped certifying (13% of them, 22 DPs per episode against 5.6 on CPU) until they were
# all full precision. On a CPU the precision changes nothing. Tested on every agent's
# episode (`tests/test_numerics.py`: no product below HIGHEST in its program).
HIGHEST = lax.Precision.HIGHEST


def einsum(subscripts: str, *operands) -> jax.Array:
  """`jnp.einsum` at full precision."""
  return jnp.einsum(subscripts, *operands, precision=HIGHEST)


def matmul(a, b) -> jax.Array:
  """`a @ b` at full precision."""
  return jnp.matmul(a, b, precision=HIGHEST)


def dot(a, b) -> jax.Array:
  """`jnp.dot` at full precision."""
  return jnp.dot(a, b, precision=HIGHEST)


def tensordot(a, b, axes=2) -> jax.Array:
  """`jnp.tensordot` at full precision."""
  return jnp.tensordot(a, b, axes, precision=HIGHEST)
