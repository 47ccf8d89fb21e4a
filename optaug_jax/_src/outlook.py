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

Why one file: the perfect-model runs, the pilots, the bias fit, the prediction and the
measured separation are the parts of one estimate, and the prediction and the measurement
must apply the same two criteria (`MIN_POSITIVE`, `SHARE_MARGIN`, `_holds_from`); apart,
a change of either would have to be made in two modules at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import layouts, policies
from . import setting as setting_lib
from .agents import registry
from .agents.base import Agent, init_agent
from .cmdp import CMDP, to_dense
from .estimates import Counts
from .metrics import EpisodeLog

# The Lagrangian agents of the registry: their swing is measured on the exact model.
LAGRANGIAN = ("optdual", "optdual_optimistic", "pid_lagrangian", "nupi_lagrangian", "optprimaldual")
# A difference in the mean positive violation counts from this Lagrangian value on.
MIN_POSITIVE = 0.01
# ... and in the share of violating episodes when OptAug's is this much lower.
SHARE_MARGIN = 0.1


def exact_counts(agent: Agent, cmdp: CMDP) -> Counts:
  """Counts in `agent`'s layout whose empirical means are `cmdp`'s model.

  Every `(h, s, a)` has `m` visits (a power of two, so the cost sums `c m` are exact), and
  each row's transition counts are `p m` (`p H m` when the setting pools over h) rounded,
  with the remainder on the row's largest entry: `p_bar` equals `p` to `1 / (H m)` (float32
  counts stay exact: `H m <= 2^24`). A pooled (stationary) setting gets `p` averaged over h,
  a sparse support `p` at its slots.
  """
  counts = init_agent(agent, cmdp).counts
  horizon = cmdp.horizon
  steps = counts.transitions.shape[0]
  pooled = steps == 1 and horizon > 1
  m = 2 ** int(np.floor(np.log2(2**24 / horizon)))
  total = m * (horizon if pooled else 1)
  p = np.asarray(to_dense(cmdp).transitions, np.float64)  # [H, S, A, S]
  if pooled:
    p = p.mean(axis=0, keepdims=True)
  setting = getattr(agent.assumptions, "setting", None)
  p = layouts.of(setting_lib.resolve(setting).next_states()).entries(p)
  n = np.floor(p * total).astype(np.int64)
  rest = total - n.sum(-1)
  np.put_along_axis(
    n,
    np.argmax(p, -1)[..., None],
    np.take_along_axis(n, np.argmax(p, -1)[..., None], -1) + rest[..., None],
    -1,
  )
  dtype = counts.cost_sums.dtype
  zeros = lambda x: None if x is None else jnp.zeros_like(x)
  return counts._replace(
    visits=jnp.full(counts.visits.shape, m, jnp.int32),
    transitions=jnp.asarray(n, jnp.int32),
    cost_sums=jnp.asarray(np.asarray(cmdp.cost, np.float64) * m, dtype),
    constraint_cost_sums=jnp.asarray(np.asarray(cmdp.constraint_costs, np.float64) * m, dtype),
    cost_compensation=zeros(counts.cost_compensation),
    constraint_cost_compensation=zeros(counts.constraint_cost_compensation),
    off_support=zeros(counts.off_support),
  )


def expected_counts(
  counts: Counts, cmdp: CMDP, setting: setting_lib.Setting | None
) -> Callable[[jax.Array], Counts]:
  """`n -> Counts`: counts in the layout of `counts` (a template of the agent's `setting`,
  `init_agent(agent, cmdp).counts`) with the float visits `n [H, S, A]` and every other
  statistic at its expectation under `cmdp` (`p n` transitions, pooled over h when the
  setting pools; `c n` and `d n` cost sums): the empirical model of such counts is `cmdp`,
  its radii those of `n` visits. A pair with less than one visit (one some seeds of a pilot
  saw) counts one (the means divide by `n v 1`). Traceable in `n`."""
  dtype = counts.cost_sums.dtype
  rows = jnp.asarray(
    layouts.of(setting_lib.resolve(setting).next_states()).entries(
      np.asarray(to_dense(cmdp).transitions, np.float64)
    ),
    dtype,
  )  # [H, S, A, S' or N]
  pooled = counts.transitions.shape[0] == 1 and cmdp.horizon > 1
  cost, constraint_costs = (jnp.asarray(x, dtype) for x in (cmdp.cost, cmdp.constraint_costs))
  zeros = lambda x: None if x is None else jnp.zeros_like(x)

  def of(n: jax.Array) -> Counts:
    n = jnp.asarray(n, dtype)
    n = jnp.where(n > 0, jnp.maximum(n, 1.0), 0.0)
    transitions = rows * n[..., None]
    if pooled:
      transitions = jnp.sum(transitions, axis=0, keepdims=True)
    return counts._replace(
      visits=n,
      transitions=transitions,
      cost_sums=cost * n,
      constraint_cost_sums=constraint_costs * n,
      cost_compensation=zeros(counts.cost_compensation),
      constraint_cost_compensation=zeros(counts.constraint_cost_compensation),
      off_support=zeros(counts.off_support),
    )

  return of


class FluidRun(NamedTuple):
  """An agent's run in expectation (`fluid_run`)."""

  episodes: np.ndarray  # [G + 1] the intervals' ends (the first: where the run starts)
  violations: np.ndarray  # [G, M] the true violation of each plan in each interval
  visits: np.ndarray  # [H, S, A] the visits at the run's end

  def positive(self, smooth: int = 2) -> Curve:
    """The mean positive violation per interval (at its geometric centre), averaged over
    `2 smooth + 1` neighbouring intervals (a mixed policy's plans jitter)."""
    kernel = np.ones(2 * smooth + 1)
    per = np.maximum(self.violations, 0.0).mean(axis=1)
    level = np.convolve(per, kernel, "same") / np.convolve(np.ones_like(per), kernel, "same")
    return Curve(np.sqrt(self.episodes[:-1] * self.episodes[1:]), level)


def fluid_run(
  agent: Agent,
  cmdp: CMDP,
  visits: np.ndarray,
  first_episode: int,
  horizon: int,
  *,
  num_points: int = 100,
  plans: int = 4,
  burn_in: int = 100,
) -> FluidRun:
  """`agent`'s run from episode `first_episode` to `horizon` in expectation: its plans on
  counts whose statistics are their expectations under `cmdp` (`expected_counts`, in the
  agent's setting), the visits growing by each plan's occupancy in the true CMDP.

  It starts from `visits [H, S, A]` (a pilot's mean visits at `first_episode`); `burn_in`
  plans at those counts settle the multipliers and the warm start; then each of
  `num_points - 1` log-spaced intervals `[k_j, k_{j+1})` is `plans` plans, each adding
  `(k_{j+1} - k_j) / plans` times its occupancy to the visits, at the episode index it
  stands for. No sampling: the empirical means are the true ones, so the violation left is
  the radii's bias at the visits the agent itself makes (optimism sends it to the pairs it
  knows least, which the optimal policy's visits do not show). Where the radii use the
  empirical variance (Bernstein), a rarely visited row's radius is wider with the true
  means than with a run's (whose few draws make a degenerate row): the fluid run then
  overstates the bias (docs/results/outlook/). One jitted call; `plans x (num_points - 1) +
  burn_in` plans in all.
  """
  state = init_agent(agent, cmdp)
  counts_of = expected_counts(state.counts, cmdp, getattr(agent.assumptions, "setting", None))
  dtype = state.counts.cost_sums.dtype
  ends = np.geomspace(first_episode, max(horizon, first_episode + 1), num_points)
  n0 = jnp.asarray(visits, dtype)
  start = jnp.asarray(first_episode, jnp.int32)
  kernel = cmdp.transition_set()

  @jax.jit
  def run(state, ends):
    def settle(st, _):
      _, st, _ = agent.plan(st)
      return st._replace(episode=start), None

    state = state._replace(counts=counts_of(n0), episode=start)
    state, _ = lax.scan(settle, state, None, length=burn_in)

    def interval(carry, bounds):
      def one(carry, i):
        st, n = carry
        step = (bounds[1] - bounds[0]) / plans
        episode = jnp.floor(bounds[0] + i * step).astype(jnp.int32)
        policy, st, _ = agent.plan(st._replace(episode=episode))
        n = n + step * kernel.occupancy(policy, cmdp.initial_state).astype(dtype)
        _, values = policies.policy_values(cmdp, policy)
        return (st._replace(counts=counts_of(n)), n), jnp.max(values - cmdp.thresholds)

      return lax.scan(one, carry, jnp.arange(plans, dtype=dtype))

    pairs = jnp.stack([ends[:-1], ends[1:]], axis=1)
    (_, n), violations = lax.scan(interval, (state, n0), pairs)
    return violations, n

  violations, n = run(state, jnp.asarray(ends, dtype))
  return FluidRun(ends, np.asarray(violations, np.float64), np.asarray(n, np.float64))


class PerfectModelLog(NamedTuple):
  """Per episode of a perfect-model run (stacked over N)."""

  violation: jax.Array  # [N] max_i V^{pi_k}(d_i) - alpha_i in the true CMDP
  cost_value: jax.Array  # [N] V^{pi_k}(c)
  multipliers: jax.Array  # [N, I] lambda after episode k's dual step


def perfect_model_run(agent: Agent, cmdp: CMDP, num_episodes: int) -> PerfectModelLog:
  """`agent` planning `num_episodes` episodes with the exact model: no sampling, no count
  updates (`exact_counts`), the episode index advancing as in a run. Build the agent with
  `bonus_scale=0` so that its model is the true CMDP (up to `1 / (H m)`)."""
  state = init_agent(agent, cmdp)
  state = state._replace(counts=exact_counts(agent, cmdp))

  @jax.jit
  def scan(state):
    def step(st, _):
      policy, st, _ = agent.plan(st)
      cost_value, constraint_values = policies.policy_values(cmdp, policy)
      st = st._replace(episode=st.episode + 1)
      viol = jnp.max(constraint_values - cmdp.thresholds)
      return st, PerfectModelLog(viol, cost_value, st.multipliers)

    return lax.scan(step, state, None, length=num_episodes)[1]

  return jax.device_get(scan(state))


class Pilot(NamedTuple):
  """A short run of one agent, vmapped over a few seeds."""

  violations: np.ndarray  # [seeds, P] max_i V^{pi_k}(d_i) - alpha_i per episode
  pretraining: np.ndarray  # [P] bool: every seed played its baseline
  seconds_per_seed_episode: float  # the last chunk's wall time / (seeds x its episodes)
  compile_seconds: float  # the first chunk's wall time less its share at that rate
  state: Any  # the final states, [seeds, ...]
  visits: np.ndarray  # [H, S, A] the mean visits over the seeds at the pilot's end


def pilot_run(agent: Agent, cmdp: CMDP, keys: jax.Array, num_episodes: int, chunk: int) -> Pilot:
  """`agent` for `num_episodes` episodes over `keys` (vmapped), in jitted chunks of
  `chunk` episodes (one compilation); timed per chunk."""
  run = jax.jit(
    jax.vmap(
      lambda key, st: _run_chunk(agent, key, cmdp, st, chunk),
      in_axes=(0, 0),
    )
  )
  state = jax.vmap(lambda _: init_agent(agent, cmdp))(keys)
  violations, pretraining, times = [], [], []
  for _ in range(-(-num_episodes // chunk)):
    start = time.perf_counter()
    state, (viol, pre) = run(keys, state)
    viol = np.asarray(viol)
    times.append(time.perf_counter() - start)
    violations.append(viol)
    pretraining.append(np.asarray(pre).all(axis=0))
  per = times[-1] / (keys.shape[0] * chunk)
  return Pilot(
    violations=np.concatenate(violations, 1)[:, :num_episodes],
    pretraining=np.concatenate(pretraining)[:num_episodes],
    seconds_per_seed_episode=float(per),
    compile_seconds=float(max(times[0] - per * keys.shape[0] * chunk, 0.0)),
    state=state,
    visits=np.asarray(state.counts.visits, np.float64).mean(axis=0),
  )


def seconds_per_seed_episode(
  agent: Agent, cmdp: CMDP, pilot: Pilot, key: jax.Array, num_seeds: int, episodes: int = 20
) -> float:
  """The cost of one seed-episode in a batch of `num_seeds` vmapped seeds, from the pilot's
  final states (repeated to fill the batch): the second of two calls of `episodes`
  episodes (the first compiles), its wall time / (seeds x episodes)."""
  reps = -(-num_seeds // pilot.violations.shape[0])
  state = jax.tree.map(lambda x: jnp.concatenate([x] * reps)[:num_seeds], pilot.state)
  keys = jax.random.split(key, num_seeds)
  run = jax.jit(jax.vmap(lambda k, st: _run_chunk(agent, k, cmdp, st, episodes)))
  state, out = run(keys, state)
  jax.block_until_ready(out)
  start = time.perf_counter()
  jax.block_until_ready(run(keys, state))
  return (time.perf_counter() - start) / (num_seeds * episodes)


def _run_chunk(agent, key, cmdp, state, chunk):
  from .runner import run  # below the runner in the package: imported when first run

  state, log = run(agent, key, cmdp, num_episodes=chunk, state=state)  # logs="full"
  assert isinstance(log, EpisodeLog)
  return state, (jnp.max(log.constraint_values - cmdp.thresholds, axis=-1), log.pretraining)


class Curve(NamedTuple):
  """A level by episode, read between its points linearly in `log k`
  (`FluidRun.positive`)."""

  episodes: np.ndarray  # [G] 1-based episodes, increasing
  values: np.ndarray  # [G]

  def at(self, k) -> np.ndarray:
    """The level at episodes `k` (constant beyond the first and the last point)."""
    return np.interp(np.log(np.asarray(k, np.float64)), np.log(self.episodes), self.values)


class BiasFit(NamedTuple):
  """OptAug's positive violation `b(k)` as the run goes on, from a pilot (see `fit_bias`):
  `a / sqrt(k) + c / k` (`c = 0` but in the form "bernstein"), and in the form "fluid"
  (default) the lower of `a / sqrt(k)` and OptAug's fluid run (`curve`) after the pilot."""

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
    return np.where(k < self.curve.episodes[0], fit, np.minimum(fit, self.curve.at(k)))

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
      return f"min({fit}, OptAug's fluid run) after the pilot"
    return fit


def _windows(first: int, last: int, num: int = 14) -> np.ndarray:
  edges = np.unique(np.round(np.geomspace(first, last, num)).astype(int))
  return edges[edges > first] if len(edges) > 1 else np.array([last])


BIAS_FORMS = ("fluid", "sqrt", "bernstein")


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
  lower of the two. Each errs high in a regime of its own: the `1/sqrt(k)` extrapolation
  where the pilot ends in the transient of the whole-simplex boxes (the radii's `1/n` term
  still falls faster: media_streaming, paper setting, bonus 0.1), the fluid run where the
  radii use the empirical variance of rows visited a few times (the gridworlds, bura2022).
  `form="bernstein"`: `b(k) = a / sqrt(k) + c / k` with `a, c >= 0` (the form of the
  Bernstein radius `2 sqrt(p (1 - p) L / n) + 14 L / (3 n)` in the visits), by
  non-negative least squares in relative error on the windows of the pilot's second half;
  it predicted too early wherever the pilot ends in a steep transient (it then fits
  `a = 0`, a bias falling like `1/k` for good).
  Measured against recorded runs: docs/results/outlook/.
  """
  from scipy.optimize import nnls

  if form not in BIAS_FORMS:
    raise ValueError(f"form: expected one of {BIAS_FORMS}, got {form!r}")
  if (form == "fluid") != (curve is not None):
    raise ValueError(f"curve: the form 'fluid' takes the fluid run's curve, got form {form!r}")
  num_episodes = violations.shape[1]
  first = int(np.argmin(pretraining)) if not pretraining.all() else num_episodes - 1
  ends = _windows(first, num_episodes)
  starts = np.concatenate([[first], ends[:-1]])
  pos = np.array([np.maximum(violations[:, a:b], 0).mean() for a, b in zip(starts, ends)])
  share = np.array([(violations[:, a:b] > threshold).mean() for a, b in zip(starts, ends)])
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
  violation is `b(k) z`. The predicted episode is the first on a log grid (from the end of
  pre-training to `horizon`) from which a criterion holds for the rest of the grid (`None`:
  not at `horizon`).
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
) -> Outlook:
  """Predicts whether, and when, OptAug and each Lagrangian agent separate on `benchmark`.

  Args:
    benchmark: a `Benchmark` (its CMDP's true model is read: this is simulation).
    agents: registry names (`oj.agents.AGENTS`), OptAug among them; the Lagrangian ones
      (`LAGRANGIAN`) get a prediction.
    key: PRNG key of the pilot runs.
    num_episodes: `K` of the planned run (the agents' radii and default steps use it).
    options: agent options as `oj.experiment.runs.make_agents` takes them (a value for every
      agent that accepts it, or `{agent: value}`), e.g. `{"setting": setting,
      "bonus_scale": 0.1}`.
    pilot_episodes, pilot_seeds: the pilot runs (every agent, vmapped over the seeds).
    perfect_episodes: the perfect-model runs' length (default `min(K, 10^4)`).
    threshold: the violation that counts an episode as violating.
    horizon: the last episode a prediction looks at.
    chunk: episodes per jitted call of the pilots.
    bias_form: the form of OptAug's bias (`fit_bias`): "fluid" (default: the lower of the
      pilot's `a / sqrt(k)` and OptAug's fluid run from the pilot's end, `fluid_run`),
      "sqrt" or "bernstein" (a fit to the pilot alone).
    num_seeds: the planned run's seeds: each agent's cost per seed-episode is timed in a
      batch of that many vmapped seeds (at most 256), from its pilot's final states; `None`:
      the pilot's last chunk's cost.
    measurements: those of an earlier outlook of the same benchmark and options
      (`Outlook.measurements()`, or read back from its files): its perfect-model runs,
      pilots and costs are used instead of being made again, and only the bias fit and the
      predictions are made (with this `bias_form` and `horizon`). Refused when its
      configuration differs in anything else.

  Returns:
    `Outlook`.
  """
  if "optaug" not in agents:
    raise ValueError(f"agents: the outlook compares OptAug with Lagrangian agents; got {agents}")
  lagrangian = [a for a in agents if a in LAGRANGIAN]
  if not lagrangian:
    raise ValueError(f"agents: no Lagrangian agent among {agents} (one of {LAGRANGIAN})")
  cmdp = benchmark.cmdp
  options = dict(options or {})
  perfect_episodes = perfect_episodes or min(num_episodes, 10_000)
  pilot_episodes = max(chunk, pilot_episodes // chunk * chunk)
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
    swings = {
      n: np.asarray(perfect_model_run(a, cmdp, perfect_episodes).violation)
      for n, a in exact.items()
    }
    keys = jax.random.split(key, pilot_seeds)
    pilots = {n: pilot_run(a, cmdp, keys, pilot_episodes, chunk) for n, a in built.items()}
    costs = {n: p.seconds_per_seed_episode for n, p in pilots.items()}
    if num_seeds is not None:
      timing_key = jax.random.fold_in(key, 1)
      costs = {
        n: seconds_per_seed_episode(built[n], cmdp, pilots[n], timing_key, min(num_seeds, 256))
        for n in pilots
      }
  else:
    differ = sorted(
      k for k in config if k not in _REFIT and measurements.config.get(k) != config[k]
    )
    if differ:
      details = {k: (measurements.config.get(k), config[k]) for k in differ}
      raise ValueError(
        f"measurements: made for another outlook; differing (theirs, now): {details}"
      )
    swings, pilots = dict(measurements.swings), dict(measurements.pilots)
    costs = dict(measurements.seconds_per_seed_episode)
  curve, fluid = None, None
  if bias_form == "fluid":
    pilot = pilots["optaug"]
    fluid = fluid_run(built["optaug"], cmdp, pilot.visits, pilot.violations.shape[1], horizon)
    curve = fluid.positive()
  bias = fit_bias(
    pilots["optaug"].violations,
    pilots["optaug"].pretraining,
    threshold,
    form=bias_form,
    curve=curve,
  )
  predictions = {
    n: predict(
      n,
      np.asarray(swings[n]),
      bias,
      pilots[n].violations,
      threshold=threshold,
      horizon=horizon,
    )
    for n in lagrangian
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


def measured_separation(
  summary: Mapping[str, Any], optaug: str, lagrangian: str, threshold: float = 0.05
) -> dict[str, int | None]:
  """The separation episodes of a finished run (a `headline.py` `summary.json`'s "agents"):
  the first trace episode from which each criterion holds in every later window (`None`:
  not by the run's end, or only in its last tenth: too few episodes to tell it from
  noise)."""
  a, lag = summary[optaug], summary[lagrangian]
  t = np.asarray(a["episodes"])
  pos_a = np.asarray(a["window_positive_violation"]["mean"])
  pos_l = np.asarray(lag["window_positive_violation"]["mean"])
  share_a = np.asarray(a["window_unsafe"][str(threshold)])
  share_l = np.asarray(lag["window_unsafe"][str(threshold)])
  pos_ok = (pos_l >= MIN_POSITIVE) & (pos_a <= 0.5 * pos_l)
  share_ok = share_a <= share_l - SHARE_MARGIN
  established = lambda k: None if k is None or k > 0.9 * t[-1] else k
  return {
    "positive": established(_holds_from(t, pos_ok)),
    "share": established(_holds_from(t, share_ok)),
  }


def _holds_from(episodes: np.ndarray, ok) -> int | None:
  """The first of `episodes` from which `ok` holds to the end (`None`: not at the end)."""
  ok = np.asarray(ok, bool)
  if not ok[-1]:
    return None
  bad = np.nonzero(~ok)[0]
  return int(episodes[0 if bad.size == 0 else bad[-1] + 1])
