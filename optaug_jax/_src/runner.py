"""Running an agent in a CMDP: one pure episode step, `lax.scan` over episodes."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from . import memory, policies
from . import run_checks as runs
from .agents.base import Agent, AgentState, init_agent, plan_with
from .checking import arguments
from .cmdp import CMDP
from .cmdp_checks import assert_cmdp_shapes, check_cmdp
from .env import sample_episode
from .errors import ArgumentError
from .metrics import EpisodeLog, RunSummary, summarize_episode

_LOGS = ("full", "summary")


def episode_step(
  agent: Agent, cmdp: CMDP, state: AgentState, key: jax.Array, *, check: bool = False
) -> tuple[AgentState, EpisodeLog]:
  """One episode: plan (optimistic model, inner solve, dual step), play, update, evaluate.

  The agent sees only the trajectory; the exact evaluation of `pi_k` in the true CMDP is
  for the log.

  Called with a concrete CMDP, it checks it (`validate_cmdp`) and the agent's assumptions
  (`Agent.assumptions`: a strictly feasible baseline, a stated slack at most the true one;
  a warning for a sparse CMDP met by a dense agent). Called outside `jit` with a concrete
  `state`, it refuses a state already at `MAX_EPISODES` (inside `jit` the counter
  saturates there instead; `run` refuses runs that would reach it). `check=True` makes the
  same checks inside `jit` (see `run`).
  """
  _check_entry("episode_step", agent, key, cmdp, 1, state, "full")
  if check:
    runs.check_in_program(agent, cmdp, "episode_step")
  return _episode(agent, cmdp, state, key, check)


def _episode(agent, cmdp, state, key, check=False):
  """`episode_step` without its host checks (the body of a run's scan); `check`: the
  plan's in-program checks (`plan_with`)."""
  # The named scopes name the episode's phases in the compiled program's metadata (what
  # `optaug_jax.experiment.phases` attributes op time to); they change no operation.
  with jax.named_scope("plan"):
    policy, state, info = plan_with(agent, state, check)
  with jax.named_scope("play"):
    trajectory = sample_episode(key, cmdp, policy)
  with jax.named_scope("update"):
    state = agent.update(state, trajectory)
  with jax.named_scope("evaluate"):
    cost_value, constraint_values = policies.policy_values(cmdp, policy)
  log = EpisodeLog(
    cost_value=cost_value,
    constraint_values=constraint_values,
    optimistic_cost_value=info.optimistic_cost_value,
    optimistic_constraint_values=info.optimistic_constraint_values,
    multipliers=state.multipliers,
    inner_gap=jnp.asarray(info.inner_gap, jnp.result_type(info.optimistic_cost_value)),
    pretraining=jnp.asarray(info.pretraining, bool),
    sampled_cost=jnp.sum(trajectory.costs),
    sampled_constraint_costs=jnp.sum(trajectory.constraint_costs, axis=-1),
    extras=info.extras,
    certified=jnp.asarray(info.certified, bool),
    off_support_transitions=jnp.asarray(info.off_support_transitions, jnp.int32),
  )
  return state, log


def _report(done, total):
  print(f"run: {int(done)}/{total} episodes", flush=True)


def _run(agent, key, cmdp, state, optimal_value, *, num_episodes, logs, check=False, progress=None):
  """Unjitted body of `run` (shared with `run_sharded`)."""
  runs.run_length(num_episodes)  # static: also under an outer jit or vmap
  assert_cmdp_shapes(cmdp)
  if check:
    runs.check_in_program(agent, cmdp, "run")
  return _scan(agent, key, cmdp, state, optimal_value, num_episodes, logs, progress, check)


def _scan(agent, key, cmdp, state, optimal_value, num_episodes, logs, progress, check):
  """The episodes of `_run`, a `lax.scan`."""
  if state is None:
    state = init_agent(agent, cmdp)

  def step(st, i):
    # Episode k's key is fold_in(key, k), made here: no [K] array of keys in memory.
    out = _episode(agent, cmdp, st, jax.random.fold_in(key, st.episode), check)
    if progress:  # `i` counts this call's episodes: never batched, so one line per report
      lax.cond(
        (i + 1) % progress == 0,
        lambda: jax.debug.callback(_report, i + 1, num_episodes),
        lambda: None,
      )
    return out

  episodes = jnp.arange(num_episodes)
  if logs == "full":
    return lax.scan(step, state, episodes)

  def accumulate(carry, i):
    st, summary = carry
    st, log = step(st, i)
    return (st, summary.merge(summarize_episode(log, optimal_value, cmdp.thresholds))), None

  dtype = state.multipliers.dtype
  summary = RunSummary.zeros(cmdp.num_constraints, dtype)
  (state, summary), _ = lax.scan(accumulate, (state, summary), episodes)
  return state, summary


def _check_logs(logs):
  arguments.check_choice("logs", logs, _LOGS)


@functools.partial(jax.jit, static_argnames=("agent", "num_episodes", "logs", "check", "progress"))
def _run_jit(agent, key, cmdp, *, num_episodes, state, logs, optimal_value, check, progress):
  return _run(
    agent,
    key,
    cmdp,
    state,
    optimal_value,
    num_episodes=num_episodes,
    logs=logs,
    check=check,
    progress=progress,
  )


def run(
  agent: Agent,
  key: jax.Array,
  cmdp: CMDP,
  *,
  num_episodes: int,
  state: AgentState | None = None,
  logs: str = "full",
  optimal_value: jax.typing.ArrayLike = 0.0,
  check: bool = False,
  progress: int | None = None,
) -> tuple[AgentState, EpisodeLog | RunSummary]:
  """Runs `agent` for `num_episodes` episodes in `cmdp` (jitted `lax.scan`).

  Episode `k` (0-based, counted from the start of learning) uses the key
  `random.fold_in(key, k)`, so a run continued from its returned `state` gives the same
  numbers as one uninterrupted run.

  What the run finds about itself is in its log: `EpisodeLog.certified` flags inner
  solves that did not prove their accuracy, `off_support_transitions` counts observed
  `(h, s, a, s')` outside the declared support (`support_violations` names them).

  Args:
    agent: an `Agent` (static: hashable by identity).
    key: PRNG key.
    cmdp: an unbatched `CMDP` (vmap for batches).
    num_episodes: episodes to run now (static).
    state: optional state to continue from; `None` starts afresh.
    logs: `"full"`: an `EpisodeLog` with every field stacked over the episodes (memory
      grows with `num_episodes`); `"summary"`: a `RunSummary` of running totals (final
      regrets, violations, last multipliers), whose memory does not depend on
      `num_episodes`. Summaries of consecutive chunks combine with `RunSummary.merge`.
    optimal_value: `V*` for the summary's cost regrets (ignored with `logs="full"`;
      the default 0 makes them plain sums of `V^{pi_k}(c)`).
    check: check the CMDP inside the compiled run (transition rows, initial state) through
      `checkify`: call it as `oj.checked(lambda key, m: oj.run(agent, key, m,
      num_episodes=K, check=True))(key, cmdp)` to get a `ValueError` (host-side
      `validate_cmdp` checks more, for free).
    progress: print `run: k/K episodes` every `progress` episodes from inside the compiled
      run (`jax.debug.callback`; static). Under `vmap` one line per report, counted in
      this call's episodes. `None` (default): silent.

  Returns:
    `(final state, EpisodeLog or RunSummary)`.

  Raises:
    ValueError: a concrete `cmdp` that `validate_cmdp` refuses (named: `run: cost: expected
      shape ...`, a threshold outside `[0, H]`, ...); `check=True` outside `oj.checked`;
      `num_episodes` beyond `MAX_EPISODES = 2^31 - 1`, or, for a concrete `state`
      (not under an outer `jit`/`vmap`; reading it waits for the run that produced it),
      `state.episode + num_episodes` beyond it: the int32 episode counter and visit counts
      hold no more.
  """
  _check_entry("run", agent, key, cmdp, num_episodes, state, logs)
  if progress is not None:
    arguments.check_int("progress", progress, low=1)
  try:
    return _run_jit(
      agent,
      key,
      cmdp,
      num_episodes=num_episodes,
      state=state,
      logs=logs,
      optimal_value=optimal_value,
      check=check,
      progress=progress,
    )
  except Exception as e:
    if check and "functionalized" in str(e):
      raise ValueError(_CHECK_OUTSIDE_CHECKED.format(where="run")) from None
    raise


_CHECK_OUTSIDE_CHECKED = (
  "{where}(check=True): the in-program checks need checkify around the call:"
  " oj.checked(lambda key, m: oj.{where}(agent, key, m, num_episodes=K, check=True))(key,"
  " cmdp); a concrete CMDP is checked on the host without it"
)


run._cache_size = _run_jit._cache_size  # type: ignore[attr-defined]  # compiled-program cache (retracing tests)


def run_sharded(
  agent: Agent,
  keys: jax.Array,
  cmdp: CMDP,
  *,
  num_episodes: int,
  state: AgentState | None = None,
  logs: str = "full",
  optimal_value: jax.typing.ArrayLike = 0.0,
  batched_cmdp: bool = False,
  batch_size: int | str | None = None,
  mesh: jax.sharding.Mesh | None = None,
  donate_state: bool = False,
  memory_budget: int | None = None,
):
  """`run` for a batch of seeds, sharded over devices, in bounded memory.

  Equivalent to `jax.vmap(lambda k: run(agent, k, cmdp, ...))(keys)`, but the seeds are
  split over the devices of a 1-D mesh (axis `"seeds"`, outputs sharded along it), each
  device running the same single-device program on its seeds, `batch_size` at a time
  (`lax.map` over vmapped chunks: the intermediates' memory is that of `batch_size`
  seeds; with `logs="summary"` the outputs are `O(num seeds)`). A number of seeds that is
  not a multiple of the device count is padded, and the results come back replicated.

  A seed's final state and log are the same, bit for bit, whatever the seeds beside it,
  `batch_size`, the number of devices and of processes (but the log's exact evaluations of
  the played policies, to a few ulps): the guide "Reproducibility" says how and why.

  Multi-host: call `jax.distributed.initialize()` on every process first (the default mesh
  then spans every host's devices; `keys` the same global array on every process).

  Args:
    agent: an `Agent`.
    keys: `[N]` PRNG keys (one run per key).
    cmdp: a `CMDP`, shared by every seed, or with a leading `[N]` axis if `batched_cmdp`.
    num_episodes: episodes per run (static).
    state: optional `[N]`-batched state to continue from.
    logs: `"full"` or `"summary"` (see `run`).
    optimal_value: `V*` for summaries: a scalar, or `[N]` (one per run).
    batched_cmdp: `cmdp` has a leading `[N]` axis (one CMDP per run).
    batch_size: seeds processed at a time on each device (`None`: all at once); at least
      two (`1` runs in pairs). `"auto"`: all at once if the compiled program fits
      `memory_budget`, else the largest power of two that does, and on CPU at most 16
      (`memory.fitting`, `memory.CPU_BATCH`).
    memory_budget: bytes per device for `"auto"` (default: 80% of an accelerator's free
      memory; on CPU half the system's available memory over its CPU devices).
    mesh: a 1-D `Mesh` with axis name `"seeds"` (default: every device).
    donate_state: let XLA reuse the buffers of `state` (it is invalid afterwards).

  Returns:
    `(final states, logs)`, each with a leading `[N]` axis.
  """
  _check_entry("run_sharded", agent, keys, cmdp, num_episodes, state, logs, batched_cmdp)
  mesh = _seeds_mesh(mesh)
  auto = batch_size == "auto"
  if batch_size is not None and not auto:
    arguments.check_int("batch_size", batch_size, low=1)
  keys = jnp.asarray(keys)
  num_seeds = keys.shape[0]
  num_devices = mesh.devices.size
  padded = -(-num_seeds // num_devices) * num_devices
  per_device = padded // num_devices
  optimal_value = jnp.broadcast_to(jnp.asarray(optimal_value), (num_seeds,))
  pad = functools.partial(_pad, padded=padded)
  batched = jax.tree.map(pad, (keys, optimal_value) + ((cmdp,) if batched_cmdp else ()))
  shared = () if batched_cmdp else (cmdp,)
  fn_for = lambda size: _device_fn(agent, num_episodes, logs, batched_cmdp, size, donate_state)
  fn = fn_for(None if batch_size is None or auto else min(int(batch_size), per_device))
  inputs = (batched, jax.tree.map(pad, state), shared)
  out = _on_devices(mesh, fn, fn_for, inputs, per_device, (auto, memory_budget))
  if padded != num_seeds:
    if jax.sharding.AxisType.Explicit in mesh.axis_types:
      # An explicit axis cannot hold a batch that is not a multiple of its size: the
      # unpadded outputs are replicated (pass a multiple to keep them sharded).
      out = jax.device_put(out, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))
    out = jax.jit(lambda t: jax.tree.map(lambda x: x[:num_seeds], t))(out)
  return out


def _check_entry(where, agent, key, cmdp, num_episodes, state, logs, batched_cmdp=None):
  """The door's checks of `run` (`batched_cmdp=None`) and `run_sharded` (a batch of keys
  and states; `batched_cmdp`: one CMDP per seed)."""
  sharded = batched_cmdp is not None
  _check_logs(logs)
  runs.run_length(num_episodes, state, where=where)
  check_cmdp(cmdp, where)
  runs.key(key, where, batched=sharded)
  runs.check_state(agent, cmdp, state, where, batched=sharded, batched_cmdp=bool(batched_cmdp))
  runs.check_agent(agent, cmdp, where, batched=bool(batched_cmdp))
  runs.warn_past_horizon(agent, num_episodes, state, where)


def _seeds_mesh(mesh):
  """`mesh`, or a 1-D mesh over every device; its one axis must be `"seeds"`."""
  if mesh is None:
    mesh = jax.make_mesh(
      (jax.device_count(),), ("seeds",), axis_types=(jax.sharding.AxisType.Auto,)
    )
  if mesh.axis_names != ("seeds",):
    raise ArgumentError("mesh", f"expected a 1-D mesh with axis 'seeds', got {mesh.axis_names}")
  return mesh


def _pad(x, padded: int):
  """`x` padded to `padded` rows by repeating its last one."""
  extra = padded - x.shape[0]
  if extra == 0:
    return x
  return jnp.concatenate([x, jnp.repeat(x[-1:], extra, axis=0)], axis=0)


def _on_devices(mesh, fn, fn_for, inputs, per_device: int, auto_budget):
  """`fn` on each device of this process, on its seeds of `inputs` (`(batched, state,
  shared)`), assembled into arrays sharded over the mesh; `auto_budget`: `(auto,
  memory_budget)` (`"auto"` picks the batch size with `memory.fitting`)."""
  batched, state, shared = inputs
  auto, memory_budget = auto_budget
  padded = per_device * mesh.devices.size
  on_seeds = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("seeds"))
  everywhere = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  # One program per device, the same whatever the mesh: each device of this process runs
  # `fn` on its own seeds (dispatched asynchronously, so the devices run together), and the
  # outputs are assembled into arrays sharded over the mesh. A `shard_map` over the mesh
  # compiled another program per device count, which rounded differently (OptDual's
  # multipliers 1e-8 apart on 1 device and on 2; OptAug's exact search then took another
  # path): here a seed's numbers are those of `jax.jit(jax.vmap(run))` over the seeds
  # beside it on its device.
  position = {d: i for i, d in enumerate(mesh.devices.reshape(-1))}
  devices = [d for d in position if d.process_index == jax.process_index()]
  seeds_of = lambda tree: _per_device(tree, devices, position, per_device, on_seeds)
  inputs = (
    seeds_of(batched),
    seeds_of(state),
    _per_device(shared, devices, None, per_device, everywhere),
  )
  if auto:
    cap = memory.CPU_BATCH if devices[0].platform == "cpu" else None
    first = tuple(x[devices[0]] for x in inputs)
    fn, _ = memory.fitting(fn_for, first, per_device, memory_budget, cap)
  parts = [fn(*(x[d] for x in inputs)) for d in devices]
  return jax.tree.map(
    lambda *xs: jax.make_array_from_single_device_arrays(
      (padded,) + xs[0].shape[1:], on_seeds, list(xs)
    ),
    *parts,
  )


def _per_device(tree, devices, position, per_device, sharding) -> dict:
  """`{device: its part of tree}` for `devices` (this process's): the seeds
  `[i * per_device, (i + 1) * per_device)` of the device at mesh position `i`, or, with
  `position=None`, the whole tree (shared). A global array that this process cannot read
  whole (a multi-host run's state) gives its shards."""

  def part(x, d):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      x = jax.device_put(x, sharding)
      return next(s.data for s in x.addressable_shards if s.device == d)
    if position is None:
      return jax.device_put(x, d)
    i = position[d]
    return jax.device_put(x[i * per_device : (i + 1) * per_device], d)

  return {d: jax.tree.map(lambda x, d=d: part(x, d), tree) for d in devices}


@functools.lru_cache(maxsize=64)
def _device_fn(agent, num_episodes, logs, batched_cmdp, batch_size, donate):
  """The jitted per-device function of `run_sharded` (cached per static configuration):
  `jax.vmap(run)` over the device's seeds, or `lax.map` over vmapped chunks of
  `batch_size`."""

  def one(args, shared):
    (key, optimal_value, *maybe_cmdp), state = args
    cmdp = maybe_cmdp[0] if batched_cmdp else shared[0]
    return _run(agent, key, cmdp, state, optimal_value, num_episodes=num_episodes, logs=logs)

  def local(batched, state, shared):
    fn = lambda args: one(args, shared)
    args = (batched, state)
    num = jax.tree.leaves(batched)[0].shape[0]
    # Never a vmapped group of one seed: XLA simplifies a dot whose batched operand has one
    # row (a seed's `D q` against constraint costs the agent holds unbatched, as known
    # costs are) into a multiply and a sum in another order, so a group of one rounded
    # otherwise than any larger group. A lone seed is run beside a copy of itself, and
    # chunks hold at least two seeds (`batch_size=1` runs in pairs).
    size = max(num if batch_size is None else batch_size, 2)
    extra = 1 if num % size == 1 else 0  # a lone seed, or a remainder of one
    if extra:
      args = jax.tree.map(lambda x: jnp.concatenate([x, x[-1:]]), args)
    if size >= num + extra:
      out = jax.vmap(fn)(args)
    else:
      out = lax.map(fn, args, batch_size=size)  # vmapped chunks (and a remainder of >= 2)
    return jax.tree.map(lambda x: x[:num], out) if extra else out

  return jax.jit(local, donate_argnums=(1,) if donate else ())
