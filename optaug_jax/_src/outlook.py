"""An outlook before a long run: whether, and when, OptAug's per-episode advantage shows.

OptAug-CMDP plays one mixed policy whose violation is the optimistic model's estimation
bias; a Lagrangian agent alternates between deterministic best responses whose violations
swing around that bias and cancel only on average. Two cheap measurements predict when the
difference shows in a run:

- **The swing** a Lagrangian agent keeps with a perfect model: the agent as configured (its
  own step, schedule and multiplier update), built with `bonus_scale=0` and handed counts
  that reproduce the true CMDP (`exact_counts`), planned episode after episode with no
  sampling (`perfect_model_run`). Its per-episode violations `v_k` are the swing alone.
- **The bias** of the optimistic model as the run goes on: from a short pilot run of OptAug
  (its positive violation per window, after pre-training), fitted as `a / sqrt(k)` on the
  pilot's last third (`fit_bias`; the radii shrink like `1/sqrt(visits)`), and after the
  pilot the lower of that and OptAug's **fluid run** (`fluid_run`): OptAug planning on
  counts at their expectations, the visits growing by its plans' occupancies, from the
  pilot's visits to `horizon` in a few hundred plans. The fluid run follows the radii's
  `1/n` transient that the `1/sqrt(k)` extrapolation misses; it overstates the bias
  where the radii use the empirical variance of rows seen a few times.

In a run, OptAug's violation at episode `k` is modelled as `b(k) z` (`z`: the pilot's late
violations over their mean positive part, the spread over seeds and episodes) and a
Lagrangian agent's as `v + b(k)` over its perfect-model swing `v` (its average violation is
the same bias: measured in every run so far). The difference shows in

- the mean positive violation once OptAug's is at most half the Lagrangian's (and the
  Lagrangian's is at least `MIN_POSITIVE`), and
- the share of episodes violating by more than `threshold` once OptAug's is at least
  `SHARE_MARGIN` below the Lagrangian's,

from the predicted episode on. `measured_separation` applies the same two criteria to the
windows of a finished run (`headline.py`'s `summary.json`), for validation
(docs/results/outlook/).

The prediction and the measured separation share a file to apply the same two criteria;
the runs measured (perfect-model runs, pilots, the fluid run) are in `outlook_runs.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from .agents import registry
from .errors import ArgumentError
from .outlook_runs import (
  TIMING_EPISODES,
  Curve,
  FluidRun,
  Pilot,
  fluid_run,
  perfect_model_run,
  pilot_length,
  pilot_run,
  seconds_per_seed_episode,
  timing_compiles,
)

# The Lagrangian agents of the registry: their swing is measured on the exact model.
LAGRANGIAN = ("optdual", "optdual_optimistic", "pid_lagrangian", "nupi_lagrangian", "optprimaldual")
# A difference in the mean positive violation counts from this Lagrangian value on.
MIN_POSITIVE = 0.01
# ... and in the share of violating episodes when OptAug's is this much lower.
SHARE_MARGIN = 0.1


class BiasFit(NamedTuple):
  """OptAug's positive violation `b(k)` as the run goes on, from a pilot (see `fit_bias`):
  `a / sqrt(k) + c / k` (`c = 0` but in the form "bernstein"), and in the form "fluid"
  (default) the lower of `a / sqrt(k)` and OptAug's fluid run (`curve`, scaled by `join`)
  after the pilot."""

  a: float  # the 1/sqrt(k) term's coefficient (k the 1-based episode)
  c: float  # the 1/k term's
  windows: np.ndarray  # [W] window ends of the pilot after pre-training
  positive: np.ndarray  # [W] mean positive violation over the seeds and the window
  share: np.ndarray  # [W] share of (seed, episode) above the threshold
  spread: np.ndarray  # [n] late violations / their mean positive part (the shape z)
  from_episode: int  # first episode of the fit
  free_exponent: float = float("nan")  # a free power-law fit on the same windows (diagnostic)
  curve: Curve | None = None  # form "fluid": the fluid run's mean positive violation
  form: str = "sqrt"

  def at(self, k) -> np.ndarray:
    """`b(k)`."""
    k = np.asarray(k, np.float64)
    fit = self.a / np.sqrt(k) + self.c / k
    if self.curve is None:
      return fit
    k0 = self.curve.episodes[0]
    return np.where(k < k0, fit, np.minimum(fit, self.join() * self.curve.at(k)))

  def join(self) -> float:
    """The factor (at least 1) that carries the pilot's level into the fluid run: where the
    run starts below the fit at its first point, it is scaled up to meet it there (the bias
    does not drop at the pilot's end; the run gives its shape from there on)."""
    if self.curve is None:
      return 1.0
    k0 = float(self.curve.episodes[0])
    start = float(self.curve.at(k0))
    fit = self.a / np.sqrt(k0) + self.c / k0
    return max(1.0, fit / start) if start > 0 else 1.0

  def decay(self, k, k_ref: float) -> np.ndarray:
    """How much of the estimation error at episode `k_ref` is left at `k` (at most 1):
    `b(k) / b(k_ref)` (`sqrt(k_ref / k)` where `b(k_ref) = 0`)."""
    k = np.asarray(k, np.float64)
    ref = float(self.at(k_ref))
    if ref > 0:
      return np.minimum(1.0, self.at(k) / ref)
    return np.minimum(1.0, np.sqrt(k_ref / k))

  def describe(self) -> str:
    fit = f"{self.a:.3g}/sqrt(k)" + (f" + {self.c:.3g}/k" if self.c else "")
    if self.curve is not None:
      join = self.join()
      scaled = f"{join:.3g} x " if join > 1.0 else ""
      return f"min({fit}, {scaled}OptAug's fluid run) after the pilot"
    return fit


def _windows(first: int, last: int, num: int = 14) -> np.ndarray:
  edges = np.unique(np.round(np.geomspace(first, last, num)).astype(int))
  return edges[edges > first] if len(edges) > 1 else np.array([last])


BIAS_FORMS = ("fluid", "sqrt", "bernstein")


def _window_levels(violations: np.ndarray, starts, ends, threshold: float):
  """`(mean positive violation, share above threshold)` of `violations [seeds, P]` over
  each window `[start, end)` (0-based episodes)."""
  pos = np.array([np.maximum(violations[:, a:b], 0).mean() for a, b in zip(starts, ends)])
  share = np.array([(violations[:, a:b] > threshold).mean() for a, b in zip(starts, ends)])
  return pos, share


def fit_bias(
  violations: np.ndarray,
  pretraining: np.ndarray,
  threshold: float,
  form: str = "sqrt",
  curve: Curve | None = None,
) -> BiasFit:
  """`BiasFit` of OptAug's pilot `violations [seeds, P]`, over log-spaced windows after
  pre-training.

  `form="sqrt"`: `b(k) = a / sqrt(k)`, `a` the mean of `b sqrt(k)` over the windows ending
  in the pilot's last third (the latest bias anchors the extrapolation).
  `form="fluid"` (`outlook`'s default): the same `a / sqrt(k)` up to the start of `curve`
  (OptAug's fluid run from the pilot's end, `fluid_run` and `FluidRun.positive`), then the
  lower of the two, the run scaled up to meet the fit at its start where it starts below
  (`BiasFit.join`: without it the bias dropped at the pilot's end, and `factored`'s
  predictions sat at the first point after it, 0.50-0.54 of the measured). Each errs high
  in a regime of its own: the `1/sqrt(k)` extrapolation where the pilot ends in the
  transient of the whole-simplex boxes (the radii's `1/n` term still falls faster:
  media_streaming, paper setting, bonus 0.1), the fluid run where the radii use the
  empirical variance of rows visited a few times (the gridworlds, bura2022).
  `form="bernstein"`: `b(k) = a / sqrt(k) + c / k` with `a, c >= 0` (the form of the
  Bernstein radius `2 sqrt(p (1 - p) L / n) + 14 L / (3 n)` in the visits), by
  non-negative least squares in relative error on the windows of the pilot's second half;
  it predicted too early wherever the pilot ends in a steep transient (it then fits
  `a = 0`, a bias falling like `1/k` for good).
  Measured against recorded runs: docs/results/outlook/.
  """
  from scipy.optimize import nnls

  if form not in BIAS_FORMS:
    raise ArgumentError("form", f"expected one of {BIAS_FORMS}, got {form!r}")
  if (form == "fluid") != (curve is not None):
    raise ArgumentError("curve", f"the form 'fluid' takes the fluid run's curve, got form {form!r}")
  num_episodes = violations.shape[1]
  first = int(np.argmin(pretraining)) if not pretraining.all() else num_episodes - 1
  ends = _windows(first, num_episodes)
  starts = np.concatenate([[first], ends[:-1]])
  pos, share = _window_levels(violations, starts, ends, threshold)
  mid = np.sqrt((starts + 1.0) * ends)  # geometric centre of each window (1-based)
  a, c = 0.0, 0.0
  if form == "bernstein":
    good = (ends > first + (num_episodes - first) // 2) & (pos > 0)
    if good.sum() >= 2:
      basis = np.stack([mid[good] ** -0.5, 1.0 / mid[good]], 1) / pos[good, None]
      (a, c), _ = nnls(basis, np.ones(good.sum()))
  else:
    use = ends > first + 2 * (num_episodes - first) // 3
    use = use if use.any() else np.ones_like(use)
    a = float(np.mean(pos[use] * np.sqrt(mid[use])))
    good = use & (pos > 0)
  free = (
    float(np.polyfit(np.log(mid[good]), np.log(pos[good]), 1)[0]) if good.sum() >= 2 else np.nan
  )
  late = violations[:, first + 3 * (num_episodes - first) // 4 :].ravel()
  scale = np.maximum(late, 0).mean()
  spread = late / scale if scale > 0 else np.zeros_like(late)
  return BiasFit(float(a), float(c), ends, pos, share, spread, first + 1, free, curve, form)


class Prediction(NamedTuple):
  """When one Lagrangian agent and OptAug separate, by each measure."""

  agent: str
  swing_low: float  # the perfect-model violations' 5% and 95% quantiles (late half)
  swing_high: float
  swing_share: float  # share of late perfect-model episodes above the threshold
  swing_positive: float  # their mean positive violation
  pilot_positive: float  # the agent's mean positive violation in its pilot's last third
  pilot_share: float  # ... and its share above the threshold
  positive_episode: int | None  # predicted separation in the mean positive violation
  share_episode: int | None  # ... in the share of violating episodes (None: not within)
  verdict: str


def late_level(violations: np.ndarray, threshold: float, first: int = 0):
  """`(mean positive violation, share above threshold, episode)` over the last third of a
  pilot's `violations [seeds, P]` after episode `first` (0-based); `episode` is the
  geometric centre of that range (1-based)."""
  num_episodes = violations.shape[1]
  lo = first + 2 * (num_episodes - first) // 3
  late = violations[:, lo:]
  return (
    float(np.maximum(late, 0).mean()),
    float((late > threshold).mean()),
    float(np.sqrt((lo + 1.0) * num_episodes)),
  )


def predict(
  name: str,
  swing: np.ndarray,
  bias: BiasFit,
  pilot: np.ndarray,
  *,
  threshold: float,
  horizon: int,
) -> Prediction:
  """When OptAug and the Lagrangian agent `name` separate (the criteria of the module
  docstring), from its perfect-model violations `swing [N]`, OptAug's `bias` and the
  agent's own pilot violations `pilot [seeds, P]`.

  The Lagrangian agent's level (mean positive violation, share above `threshold`) is its
  pilot's over the pilot's last third, at episode `k_p`; from there it moves to its
  perfect-model level (the late half of `swing`) as the estimation error shrinks: `L(k) =
  L_pm + (L_pilot - L_pm) D(k)`, `D = bias.decay(k, k_p)` (as OptAug's bias falls). OptAug's
  violation is `b(k) z`. Up to the pilot's end both agents' levels are their pilots' own
  (OptAug's windows, `BiasFit.positive` and `.share`, and the agent's over the same
  windows): measured where measured, the model beyond. The predicted episode is the first
  on a log grid (from the end of pre-training to `horizon`) from which a criterion holds
  for the rest of the grid (`None`: not at `horizon`).
  """
  grid = np.unique(np.round(np.geomspace(max(bias.from_episode, 1), horizon, 400)).astype(int))
  z = bias.spread if bias.spread.size else np.zeros(1)
  late = swing[len(swing) // 2 :]
  pos_pm, share_pm = float(np.maximum(late, 0).mean()), float((late > threshold).mean())
  pos_p, share_p, k_p = late_level(pilot, threshold)
  decay = bias.decay(grid, k_p)
  pos_l = pos_pm + (pos_p - pos_pm) * decay
  share_l = share_pm + (share_p - share_pm) * decay
  b = bias.at(grid)
  pos_a = np.array([np.maximum(x * z, 0).mean() for x in b])
  share_a = np.array([(x * z > threshold).mean() for x in b])
  ends = np.asarray(bias.windows)
  if ends.size and pilot.shape[1] >= ends[-1]:  # within the pilot: its windows
    starts = np.concatenate([[bias.from_episode - 1], ends[:-1]])
    lag_pos, lag_share = _window_levels(pilot, starts, ends, threshold)
    inside = grid <= ends[-1]
    i = np.searchsorted(ends, grid[inside])  # the window of k: start < k <= end (1-based k)
    pos_a[inside], share_a[inside] = bias.positive[i], bias.share[i]
    pos_l[inside], share_l[inside] = lag_pos[i], lag_share[i]
  pos_ok = (pos_l >= MIN_POSITIVE) & (pos_a <= 0.5 * pos_l)
  share_ok = share_a <= share_l - SHARE_MARGIN
  low, high = (float(x) for x in np.quantile(late, [0.05, 0.95]))
  pos_k, share_k = _holds_from(grid, pos_ok), _holds_from(grid, share_ok)
  return Prediction(
    name,
    low,
    high,
    share_pm,
    pos_pm,
    pos_p,
    share_p,
    pos_k,
    share_k,
    _verdict(name, pos_k, share_k, share_pm, high, threshold, horizon),
  )


def _verdict(name, pos_k, share_k, swing_share, high, threshold, horizon) -> str:
  if share_k is not None:
    out = (
      f"the share of episodes violating by more than {threshold:g} separates by about"
      f" episode {share_k:,}"
    )
    if pos_k is not None and pos_k < share_k:
      out += f" (the mean positive violation by about {pos_k:,})"
    return out
  if swing_share < SHARE_MARGIN:
    out = (
      f"{name}'s swing on the exact model stays below the threshold {threshold:g} in"
      f" {1 - swing_share:.0%} of its episodes (95% quantile {high:+.3g}): the share of"
      " violating episodes will not separate"
    )
  else:
    out = f"the share of violating episodes does not separate within {horizon:,} episodes"
  if pos_k is not None:
    return out + f"; the mean positive violation will, by about episode {pos_k:,}"
  return out + f"; the mean positive violation does not within {horizon:,} episodes at this bonus"


# What an outlook may change when it reuses another's measurements.
_REFIT = ("horizon", "bias_form")


class Measurements(NamedTuple):
  """What `outlook` measures before it fits and predicts (its runs; see `Outlook`)."""

  pilots: dict[str, Pilot]  # per agent (`Pilot.state` may be None: read back from files)
  swings: dict[str, np.ndarray]  # per Lagrangian agent: perfect-model violations [N]
  seconds_per_seed_episode: dict[str, float]  # per agent
  config: dict[str, Any]  # the `Outlook.config` they were made with


class Outlook(NamedTuple):
  """What `outlook` measured and predicts (see the module docstring)."""

  bias: BiasFit
  swings: dict[str, np.ndarray]  # per agent: perfect-model violations [N]
  predictions: dict[str, Prediction]  # per Lagrangian agent
  seconds_per_seed_episode: dict[str, float]  # per agent, late in its pilot (see `outlook`)
  pilots: dict[str, Pilot]
  config: dict[str, Any]
  fluid: FluidRun | None = None  # OptAug's, in the form "fluid"

  def measurements(self) -> Measurements:
    """The runs this outlook made, to fit and predict again (`outlook(measurements=...)`)."""
    return Measurements(self.pilots, self.swings, self.seconds_per_seed_episode, self.config)

  def wall_seconds(self, agent: str, episodes: int, seeds: int) -> float:
    """Predicted wall time of `episodes` episodes of `seeds` seeds of `agent`, here (its
    pilot's cost per seed-episode, which is late-run cost: OptAug's falls as it learns)."""
    return self.seconds_per_seed_episode[agent] * episodes * seeds

  def summary(self) -> dict:
    """A JSON-ready summary."""
    return {
      "config": self.config,
      "bias": {
        "a": self.bias.a,
        "c": self.bias.c,
        "free_exponent": self.bias.free_exponent,
        "from_episode": self.bias.from_episode,
        "form": self.bias.form,
        "curve": None
        if self.bias.curve is None
        else {
          "episodes": self.bias.curve.episodes.tolist(),
          "values": self.bias.curve.values.tolist(),
        },
        "windows": self.bias.windows.tolist(),
        "positive": self.bias.positive.tolist(),
        "share": self.bias.share.tolist(),
      },
      "predictions": {n: p._asdict() for n, p in self.predictions.items()},
      "fluid": None
      if self.fluid is None
      else {
        "episodes": self.fluid.episodes.tolist(),
        "violations": self.fluid.violations.tolist(),
      },
      "seconds_per_seed_episode": self.seconds_per_seed_episode,
    }


def outlook(
  benchmark,
  agents: Sequence[str] = ("optaug", "optdual"),
  *,
  key: jax.Array,
  num_episodes: int,
  options: Mapping[str, Any] | None = None,
  pilot_episodes: int = 2000,
  pilot_seeds: int = 4,
  perfect_episodes: int | None = None,
  threshold: float = 0.05,
  horizon: int = 10**6,
  chunk: int = 250,
  num_seeds: int | None = None,
  bias_form: str = "fluid",
  measurements: Measurements | None = None,
  progress: Callable[[str, int, int], None] | None = None,
) -> Outlook:
  """Predicts whether, and when, OptAug and each Lagrangian agent separate on `benchmark`.

  Args:
    benchmark: a `Benchmark` (its CMDP's true model is read: this is simulation).
    agents: registry names, OptAug and the Lagrangian ones to predict (`LAGRANGIAN`).
    key: PRNG key of the pilot runs.
    num_episodes: `K` of the planned run.
    options: agent options, as `oj.agents.make_agents` takes them.
    pilot_episodes: the pilots' length (whole chunks: `pilot_length`).
    pilot_seeds: the pilots' seeds (vmapped).
    perfect_episodes: the perfect-model runs' length (default `min(K, 10^4)`).
    threshold: the violation that counts an episode as violating.
    horizon: the last episode a prediction looks at.
    chunk: episodes per jitted call of the pilots.
    num_seeds: the planned run's seeds: each agent's cost per seed-episode is timed at
      that many (at most 256); `None`: the pilot's last chunk's cost.
    bias_form: OptAug's bias (`fit_bias`): "fluid" (default), "sqrt" or "bernstein".
    measurements: an earlier outlook's (`Outlook.measurements()`): only the bias fit and
      the predictions are made again; refused when its configuration differs otherwise.
    progress: `progress(phase, done, total)` as the measurements advance; `None`: silent.

  Returns: an `Outlook`.
  """
  lagrangian = _lagrangian_agents(agents)
  cmdp = benchmark.cmdp
  options = dict(options or {})
  perfect_episodes = perfect_episodes or min(num_episodes, 10_000)
  pilot_episodes = pilot_length(pilot_episodes, chunk)  # what runs: `config` records it
  config = {
    "agents": list(agents),
    "num_episodes": num_episodes,
    "pilot_episodes": pilot_episodes,
    "pilot_seeds": pilot_seeds,
    "perfect_episodes": perfect_episodes,
    "threshold": threshold,
    "horizon": horizon,
    "timing_seeds": None if num_seeds is None else min(num_seeds, 256),
    "bias_form": bias_form,
  }
  built = registry.make_agents(agents, benchmark, num_episodes=num_episodes, options=options)
  if measurements is None:
    exact = registry.make_agents(
      lagrangian, benchmark, num_episodes=num_episodes, options={**options, "bonus_scale": 0.0}
    )
    swings, pilots, costs = _measure(built, exact, cmdp, key, config, chunk, progress)
  else:
    swings, pilots, costs = _reuse(measurements, config)
  run = (built["optaug"], cmdp, pilots["optaug"], threshold, bias_form, horizon, progress)
  bias, fluid = _bias(*run)
  predict_one = functools.partial(predict, threshold=threshold, horizon=horizon)
  predictions = {
    n: predict_one(n, np.asarray(swings[n]), bias, pilots[n].violations) for n in lagrangian
  }
  return Outlook(
    bias=bias,
    swings=swings,
    predictions=predictions,
    seconds_per_seed_episode=costs,
    pilots=pilots,
    config=config,
    fluid=fluid,
  )


def _lagrangian_agents(agents) -> list[str]:
  """The Lagrangian agents among `agents`, which must hold OptAug and one of them."""
  if "optaug" not in agents:
    raise ArgumentError("agents", f"the outlook compares OptAug with a Lagrangian; got {agents}")
  lagrangian = [a for a in agents if a in LAGRANGIAN]
  if not lagrangian:
    raise ArgumentError("agents", f"no Lagrangian agent among {agents} (one of {LAGRANGIAN})")
  return lagrangian


def _bias(optaug_agent, cmdp, pilot, threshold, bias_form: str, horizon: int, progress):
  """OptAug's bias (`fit_bias`) of its pilot, with its fluid run (`bias_form="fluid"`;
  `progress(phase, done, total)` at its start and end)."""
  curve, fluid = None, None
  if bias_form == "fluid":
    report = progress and functools.partial(progress, "fluid run of optaug")
    first = pilot.violations.shape[1]
    fluid = fluid_run(optaug_agent, cmdp, pilot.visits, first, horizon, progress=report)
    curve = fluid.positive()
  bias = fit_bias(pilot.violations, pilot.pretraining, threshold, form=bias_form, curve=curve)
  return bias, fluid


def _measure(built, exact, cmdp, key, config, chunk: int, progress):
  """The outlook's measurements: the perfect-model runs of the Lagrangian agents (`exact`:
  no bonus), every agent's pilot, and the cost per seed-episode (`(swings, pilots,
  costs)`)."""
  perfect_episodes, num_seeds = config["perfect_episodes"], config["timing_seeds"]
  report = progress or (lambda phase, done, total: None)
  timing_key, timing_seeds = jax.random.fold_in(key, 1), min(num_seeds or 1, 256)
  timing_keys = jax.random.split(timing_key, timing_seeds)
  compiling, pool = timing_compiles(built, cmdp, timing_keys) if num_seeds else ({}, None)
  swings = {}
  for n, a in exact.items():
    report(f"perfect-model run of {n}", 0, perfect_episodes)  # starts its clock
    swings[n] = np.asarray(perfect_model_run(a, cmdp, perfect_episodes).violation)
    report(f"perfect-model run of {n}", perfect_episodes, perfect_episodes)
  keys = jax.random.split(key, config["pilot_seeds"])
  pilots = {
    n: pilot_run(
      a, cmdp, keys, config["pilot_episodes"], chunk, functools.partial(report, f"pilot of {n}")
    )
    for n, a in built.items()
  }
  costs = {n: p.seconds_per_seed_episode for n, p in pilots.items()}
  for n in compiling:  # compiled in the background since the start: a phase of its own
    report(phase := f"cost of {n} at {timing_seeds} seeds", 0, 2 * TIMING_EPISODES)
    program = compiling[n].result()
    run = (built[n], cmdp, pilots[n], timing_key, timing_seeds)
    costs[n] = seconds_per_seed_episode(*run, compiled=program)
    report(phase, 2 * TIMING_EPISODES, 2 * TIMING_EPISODES)
  if pool is not None:
    pool.shutdown()
  return swings, pilots, costs


def _reuse(measurements: Measurements, config):
  """An earlier outlook's measurements, refused where its configuration differs in more
  than what is refitted."""
  differ = sorted(k for k in config if k not in _REFIT and measurements.config.get(k) != config[k])
  if differ:
    details = {k: (measurements.config.get(k), config[k]) for k in differ}
    raise ArgumentError("measurements", f"another outlook's; differing (theirs, now): {details}")
  return (
    dict(measurements.swings),
    dict(measurements.pilots),
    dict(measurements.seconds_per_seed_episode),
  )


def measured_separation(
  summary: Mapping[str, Any],
  optaug: str,
  lagrangian: str,
  threshold: float = 0.05,
  windows: Sequence[int] | None = None,
) -> dict[str, int | None]:
  """The separation episodes of a finished run (a `headline.py` `summary.json`'s "agents"):
  the first trace episode from which each criterion holds in every later window (`None`:
  not by the run's end, or only in its last tenth: too few episodes to tell it from
  noise). `windows`: the trace episodes that end a window (`None`: every one); the windows
  between are merged into the next, their means weighted by their episodes. A run's log
  grid (`experiment.reductions.log_grid`) leaves out K/2 and 9K/10, which split a window
  of the grid in two (on the 30,000-episode gridworld run, 86 episodes between windows of
  2,391 and 2,761)."""
  a, lag = summary[optaug], summary[lagrangian]
  t = np.asarray(a["episodes"])
  merge = _window_merger(t, windows)
  t = t if windows is None else np.asarray(windows)
  pos_a = merge(a["window_positive_violation"]["mean"])
  pos_l = merge(lag["window_positive_violation"]["mean"])
  share_a = merge(a["window_unsafe"][str(threshold)])
  share_l = merge(lag["window_unsafe"][str(threshold)])
  pos_ok = (pos_l >= MIN_POSITIVE) & (pos_a <= 0.5 * pos_l)
  share_ok = share_a <= share_l - SHARE_MARGIN
  established = lambda k: None if k is None or k > 0.9 * t[-1] else k
  return {
    "positive": established(_holds_from(t, pos_ok)),
    "share": established(_holds_from(t, share_ok)),
  }


def _window_merger(t: np.ndarray, windows: Sequence[int] | None):
  """Window means over `t`'s windows -> over the windows that end at `windows`."""
  if windows is None:
    return np.asarray
  ends = np.searchsorted(t, windows)
  if not (np.all(t[np.minimum(ends, len(t) - 1)] == windows) and windows[-1] == t[-1]):
    raise ArgumentError("windows", f"must be trace episodes ending at the last, {t[-1]}")
  width = np.diff(t, prepend=0)
  cum = lambda x: np.concatenate([[0.0], np.cumsum(np.asarray(x) * width)])
  return lambda x: np.diff(cum(x)[ends + 1], prepend=0.0) / np.diff(t[ends], prepend=0)


def _holds_from(episodes: np.ndarray, ok) -> int | None:
  """The first of `episodes` from which `ok` holds to the end (`None`: not at the end)."""
  ok = np.asarray(ok, bool)
  if not ok[-1]:
    return None
  bad = np.nonzero(~ok)[0]
  return int(episodes[0 if bad.size == 0 else bad[-1] + 1])
