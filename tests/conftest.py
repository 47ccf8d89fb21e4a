"""Test configuration: float64 everywhere (reference comparisons), float32 where a test asks."""

import jax

jax.config.update("jax_enable_x64", True)
