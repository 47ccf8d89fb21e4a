"""The run machinery of the experiment scripts (`optaug_jax.experiment`)."""
