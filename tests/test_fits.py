"""The regret fits (`optaug_jax.experiment.fits`: `fit_regret`, `fit_verdict`, as `headline.py`
uses them) on curves with known answers: a fit starts after pre-training, and a run too
short to tell a linear term from a bending one says so instead of printing a c that reads
as growth."""

import numpy as np
import pytest

from optaug_jax.experiment import fits, reductions


def _fit(curve, num_episodes, pretraining=0, seeds=4, noise=0.0):
  trace = reductions.trace_episodes(num_episodes, 60)
  rng = np.random.default_rng(0)
  t = trace.astype(float)
  curves = np.stack([curve(t) + noise * rng.normal(size=t.shape).cumsum() for _ in range(seeds)])
  return fits.fit_regret(curves, trace, num_episodes, np.random.default_rng(1), pretraining)


@pytest.mark.parametrize(
  ("curve", "verdict"),
  [
    (lambda t: 0.3 * t + 2.0 * np.sqrt(t), "linear"),
    (lambda t: 40.0 * np.sqrt(t), "sublinear"),
    (lambda t: 60.0 * np.sqrt(t) - 0.05 * t, "bending"),
  ],
)
def test_verdicts_on_curves_with_known_shape(curve, verdict):
  fit = _fit(curve, 100_000, noise=1.0)
  assert fit["verdict"] == verdict, fit["reading"]


def test_a_short_run_after_pre_training_is_undetermined_not_linear():
  """The issue's case: 2,000 episodes after 200 of pre-training (zero regret), then a
  regret that grows like sqrt. Fitted from K/100, the kink read as a linear term."""
  kinked = lambda t: np.where(t <= 200, 0.0, 30.0 * np.sqrt(np.maximum(t - 200, 0)))
  old = _fit(kinked, 2000)  # pretraining unknown: the fit starts at K/100 = 20
  assert old["fit_from_episode"] < 200 and old["verdict"] == "linear", old  # what misled
  fit = _fit(kinked, 2000, pretraining=200)
  assert fit["fit_from_episode"] > 200
  assert fit["verdict"] == "undetermined"
  assert "too short to tell" in fit["reading"]


def test_the_fit_of_a_long_run_starts_after_pre_training():
  fit = _fit(lambda t: 10.0 * np.sqrt(t), 100_000, pretraining=3000)
  assert fit["fit_from_episode"] > 3000 and fit["pretraining_episodes"] == 3000
  assert abs(fit["c"]) < 1e-12, fit  # no linear term, to rounding
  assert fit["verdict"] == "sublinear", fit["reading"]


def _sqrt_fit(c):  # a fit of 10 sqrt(t) from episode 3625 whose c (and its interval) is c
  return {"fit_from_episode": 3625, "c95": [c, c], "c": c, "b": 10.0}


@pytest.mark.parametrize("c", [-1.5e-16, 1.5e-16, 0.0])
def test_a_c_at_rounding_is_no_linear_term_whatever_its_sign(c):
  """The least squares' c on a curve without a linear term is +-1e-16, its sign the BLAS
  kernel's (it read "bending" on one CPU): zero to rounding, whatever the sign."""
  verdict, reading = fits.fit_verdict(_sqrt_fit(c), 100_000)
  assert verdict == "sublinear" and "zero to rounding" in reading


def test_a_small_real_linear_term_is_not_taken_for_rounding():
  """The rounding guard does not swallow a term: c = -1e-6 on 10 sqrt(t) (a share of
  4e-5) still reads as bending, c = 1e-6 as a small linear part."""
  assert fits.fit_verdict(_sqrt_fit(-1e-6), 100_000)[0] == "bending"
  verdict, reading = fits.fit_verdict(_sqrt_fit(1e-6), 100_000)
  assert verdict == "sublinear" and "mostly sublinear" in reading
