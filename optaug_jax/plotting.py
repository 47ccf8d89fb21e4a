"""Figures (matplotlib, imported when called; needs the `experiments` extra)."""

from optaug_jax._src.plotting import plot_gridworld

__all__ = ("plot_gridworld",)
