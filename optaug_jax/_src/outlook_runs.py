"""The runs the outlook measures (`outlook.py`): the Lagrangian agents on the exact model
(`perfect_model_run` on `exact_counts`), the pilots of every agent (`pilot_run`), and
OptAug's fluid run (`fluid_run` on `expected_counts`), each the agent itself, as
configured, in one jitted call or a few."""

from __future__ import annotations

import concurrent.futures
import contextvars
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import policies
from . import setting as setting_lib
from .agents.base import Agent, init_agent
from .cmdp import CMDP, to_dense
from .estimates import Counts
from .metrics import EpisodeLog


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
  p = setting_lib.resolve(setting).layout.entries(p)
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
    setting_lib.resolve(setting).layout.entries(np.asarray(to_dense(cmdp).transitions, np.float64)),
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
  progress: Callable[[int, int], None] | None = None,
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
  burn_in` plans in all. `progress(done, total)`, in plans, at its start and its end.
  """
  total = plans * (num_points - 1) + burn_in
  if progress is not None:
    progress(0, total)
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
  fluid = FluidRun(ends, np.asarray(violations, np.float64), np.asarray(n, np.float64))
  if progress is not None:
    progress(total, total)
  return fluid


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


def pilot_length(pilot_episodes: int, chunk: int) -> int:
  """The episodes of a pilot of `pilot_episodes` in jitted chunks of `chunk`: whole chunks,
  rounded down, at least one (`outlook` runs this many, and records it)."""
  return max(chunk, pilot_episodes // chunk * chunk)


def pilot_run(
  agent: Agent,
  cmdp: CMDP,
  keys: jax.Array,
  num_episodes: int,
  chunk: int,
  progress: Callable[[int, int], None] | None = None,
) -> Pilot:
  """`agent` for `num_episodes` episodes over `keys` (vmapped), in jitted chunks of
  `chunk` episodes (one compilation); timed per chunk. `progress(done, total)` after each
  chunk (episodes)."""
  run = jax.jit(
    jax.vmap(
      lambda key, st: _run_chunk(agent, key, cmdp, st, chunk),
      in_axes=(0, 0),
    )
  )
  state = jax.vmap(lambda _: init_agent(agent, cmdp))(keys)
  violations, pretraining, times = [], [], []
  chunks = -(-num_episodes // chunk)
  if progress is not None:
    progress(0, chunks * chunk)
  for i in range(chunks):
    start = time.perf_counter()
    state, (viol, pre) = run(keys, state)
    viol = np.asarray(viol)
    times.append(time.perf_counter() - start)
    violations.append(viol)
    pretraining.append(np.asarray(pre).all(axis=0))
    if progress is not None:
      progress((i + 1) * chunk, chunks * chunk)
  per = times[-1] / (keys.shape[0] * chunk)
  return Pilot(
    violations=np.concatenate(violations, 1)[:, :num_episodes],
    pretraining=np.concatenate(pretraining)[:num_episodes],
    seconds_per_seed_episode=float(per),
    compile_seconds=float(max(times[0] - per * keys.shape[0] * chunk, 0.0)),
    state=state,
    visits=np.asarray(state.counts.visits, np.float64).mean(axis=0),
  )


TIMING_EPISODES = 20  # each of `seconds_per_seed_episode`'s two calls


def _timing_fn(agent, cmdp, episodes):
  return jax.jit(jax.vmap(lambda k, st: _run_chunk(agent, k, cmdp, st, episodes)))


def timing_compiles(
  agents: dict[str, Agent], cmdp: CMDP, keys: jax.Array, episodes: int = TIMING_EPISODES
) -> tuple[dict[str, concurrent.futures.Future], concurrent.futures.Executor]:
  """`seconds_per_seed_episode`'s programs for the seeds of `keys`, compiled in a background
  thread from each agent's initial state (the shapes of a pilot's final state): `outlook`
  starts them before its pilots, which leave a core idle on CPU (OptAug's chunk compiles
  in about 50 s on the 200-state reservoir). Returns `({name: future of a Compiled},
  executor)`; shut the executor down after."""
  pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="compile")

  def compiled(agent):
    state = jax.vmap(lambda _: init_agent(agent, cmdp))(keys)
    return _timing_fn(agent, cmdp, episodes).lower(keys, state).compile()

  context = contextvars.copy_context  # each job runs in the caller's context (its settings)
  return {n: pool.submit(context().run, compiled, a) for n, a in agents.items()}, pool


def seconds_per_seed_episode(
  agent: Agent,
  cmdp: CMDP,
  pilot: Pilot,
  key: jax.Array,
  num_seeds: int,
  episodes: int = TIMING_EPISODES,
  compiled: Any = None,
) -> float:
  """The cost of one seed-episode in a batch of `num_seeds` vmapped seeds, from the pilot's
  final states (repeated to fill the batch): the second of two calls of `episodes`
  episodes (the first compiles, unless `compiled` is the program `timing_compiles` built
  for these shapes), its wall time / (seeds x episodes)."""
  reps = -(-num_seeds // pilot.violations.shape[0])
  state = jax.tree.map(lambda x: jnp.concatenate([x] * reps)[:num_seeds], pilot.state)
  keys = jax.random.split(key, num_seeds)
  run = compiled or _timing_fn(agent, cmdp, episodes)
  try:
    state, out = run(keys, state)
  except TypeError:  # a Compiled for other input types (a typed key, a pilot's dtypes)
    run = _timing_fn(agent, cmdp, episodes)
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
