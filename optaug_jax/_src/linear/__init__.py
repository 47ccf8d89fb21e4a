"""Linear CMDPs: the model (`model`), the ridge estimates (`ridge`), the composite softmax
backup (`planning`), OptAug and OptDual on them (`agents`) and the benchmarks of Kitamura
et al. 2025 (`benchmarks`). Public names: `optaug_jax.linear`."""
