"""The runner's checks: the run's length, the key, and the agent against the true CMDP.

An agent states what it assumes (`Agent.assumptions`: its safe baseline, the slack it was
told, its setting); the agent never reads the true CMDP, the runner does. On the host,
before any episode, `check_agent` refuses a baseline that is not strictly feasible or a
stated slack above the baseline's true slack, and warns when a sparse CMDP meets an agent
that will count and plan densely. Inside a compiled run, `check_in_program` (the
`check=True` of `run` and `episode_step`) checks the CMDP's costs, thresholds and
transitions and the same baseline facts through `checkify`.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from . import policies
from .agents.base import Assumptions, init_agent
from .checking import arguments, kernels
from .cmdp import CMDP
from .cmdp_checks import baseline_fault
from .errors import ArgumentError
from .numerics import MAX_EPISODES

_policy_values = jax.jit(policies.policy_values)


def _first_episode(state) -> int | None:
  """The largest `state.episode` (over a batch) when it is concrete and readable here."""
  if state is None:
    return 0
  episode = getattr(state, "episode", None)
  if episode is None or arguments.traced(episode):
    return None
  if not getattr(episode, "is_fully_addressable", True):  # multi-host: not readable here
    return None
  episode = np.asarray(episode)
  return int(episode.max()) if episode.size else 0


def run_length(num_episodes: int, state=None, *, where: str = "run") -> int:
  """Refuses a run whose episodes would not fit the int32 counters (`MAX_EPISODES`).

  The episode counter and the visit counts are int32, and each episode adds one visit to
  at most one `(s, a)` per step, so a history of `MAX_EPISODES = 2^31 - 1` episodes fits.
  `num_episodes` alone is checked everywhere (it is static); the episode a given `state`
  starts from is checked when it is concrete (outside `jit` and `vmap`).

  Returns:
    `num_episodes` as an int.
  """
  num_episodes = arguments.check_int("num_episodes", num_episodes, low=0)
  start = _first_episode(state)
  if num_episodes > MAX_EPISODES or (start is not None and start + num_episodes > MAX_EPISODES):
    origin = "" if not start else f" from episode {start}"
    raise ArgumentError(
      "num_episodes",
      f"{where} of {num_episodes} episodes{origin} would end at episode"
      f" {(start or 0) + num_episodes}, beyond MAX_EPISODES = {MAX_EPISODES} (2^31 - 1),"
      " the most the int32 episode counter and visit counts hold",
    )
  return num_episodes


def key(key, where: str, *, batched: bool = False) -> None:
  """A PRNG key (`jax.random.key(seed)`, or the raw `uint32[2]` of `jax.random.PRNGKey`);
  with `batched`, a leading axis of them."""
  if arguments.traced(key):
    return
  lead = 1 if batched else 0
  what = "an [N] array of PRNG keys" if batched else "a PRNG key"
  make = (
    "jax.random.split(jax.random.key(0), N)"
    if batched
    else "jax.random.key(0), or jax.random.PRNGKey(0)"
  )
  dtype = getattr(key, "dtype", None)
  if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
    if np.ndim(key) == lead:
      return
  elif dtype is not None and dtype == np.uint32 and np.ndim(key) == lead + 1:
    return
  shown = f"{type(key).__name__} {key!r}" if np.ndim(key) == 0 else f"shape {np.shape(key)}"
  if dtype is not None:
    shown += f" of dtype {dtype}"
  raise ArgumentError("key", f"expected {what}, got {shown}; make one with {make}", where=where)


def _concrete_leaf(x) -> bool:
  """A leaf whose values can be read here: not traced, and whole on this process."""
  return not arguments.traced(x) and getattr(x, "is_fully_addressable", True)


def _shown(x) -> str:
  x = np.asarray(x)
  return str(x.tolist()) if x.size <= 8 else f"an array of shape {x.shape}"


def check_state(
  agent, cmdp: CMDP, state, where: str, *, batched: bool = False, batched_cmdp: bool = False
) -> None:
  """Refuses a `state` that `agent` did not make for `cmdp` (`ValueError` naming the field).

  A state carries what it was made for: its type and fields (the agent's kind and
  configuration), the shapes of its counts (the sizes `H`, `S`, `A`, `I` and the setting's
  layout) and its copies of the thresholds and the initial state, which the agent plans
  with. Each is compared with the state `agent.init` makes for `cmdp`: types and shapes
  always (they are static, also under `jit` and `vmap`), the thresholds and the initial
  state when both sides are concrete. With `batched`, `state` has a leading seed axis (and
  `cmdp` too when `batched_cmdp`). `None` (a fresh start) passes.

  Resuming on a CMDP with other thresholds on purpose: replace them in the state first,
  `state._replace(thresholds=cmdp.thresholds)`.
  """
  if state is None:
    return
  lead = 1 if batched else 0
  if batched_cmdp:
    expected = jax.eval_shape(jax.vmap(lambda c: init_agent(agent, c)), cmdp)
  else:
    expected = jax.eval_shape(lambda c: init_agent(agent, c), cmdp)
  kind = f"{type(expected).__name__} of this agent"
  if type(state) is not type(expected):
    raise ArgumentError(
      "state",
      f"of type {type(state).__name__}, not the {kind}: a state resumes only the"
      " agent (kind and configuration) that made it; start afresh with state=None",
      where=where,
    )
  got_leaves, got_tree = jax.tree_util.tree_flatten_with_path(state)
  want_leaves, want_tree = jax.tree_util.tree_flatten_with_path(expected)
  if str(got_tree) != str(want_tree):
    got_paths = {jax.tree_util.keystr(p) for p, _ in got_leaves}
    want_paths = {jax.tree_util.keystr(p) for p, _ in want_leaves}
    differ = sorted(got_paths ^ want_paths) or ["(its structure)"]
    raise ArgumentError(
      "state",
      f"its fields differ from the {kind} (first: state{differ[0]}): it was"
      " made by another agent or another configuration (setting, inner solver, warm start);"
      " start afresh with state=None",
      where=where,
    )
  for (path, got), (_, want) in zip(got_leaves, want_leaves):
    shape = tuple(np.shape(got))
    want_shape = tuple(want.shape)
    if not batched_cmdp and lead:
      shape = shape[1:]
    dtype = np.dtype(getattr(got, "dtype", None) or np.result_type(got))
    if shape != want_shape or dtype != want.dtype:
      raise ArgumentError(
        where,
        f"state{jax.tree_util.keystr(path)}: {dtype}{list(shape)} where"
        f" this agent makes {want.dtype}{list(want_shape)} for this CMDP (H = {cmdp.horizon},"
        f" S = {cmdp.num_states}, A = {cmdp.num_actions}, I = {cmdp.num_constraints}): the"
        " state was made for another CMDP (sizes, support, dtype) or agent configuration",
      )
  _check_options(agent, state, where, batched=batched)
  for field in ("thresholds", "initial_state"):
    _check_copy(field, getattr(state, field), getattr(cmdp, field), where, batched=bool(lead))


def _check_copy(field: str, mine, theirs, where: str, *, batched: bool) -> None:
  """The state's copy of the CMDP's `field` (thresholds, initial state) equals the CMDP's,
  where both are concrete (the first seed that differs named with `batched`)."""
  if not (_concrete_leaf(mine) and _concrete_leaf(theirs)):
    return
  mine = np.asarray(mine)
  theirs = np.broadcast_to(np.asarray(theirs).astype(mine.dtype), mine.shape)
  if not np.array_equal(mine, theirs):
    if batched:  # the first seed that differs
      seed = int(np.argmax((mine != theirs).reshape(mine.shape[0], -1).any(axis=1)))
      mine, theirs = mine[seed], theirs[seed]
      field_at = f"{field} of seed {seed}"
    else:
      field_at = field
    fix = (
      "; to resume with other thresholds on purpose, pass"
      " state=state._replace(thresholds=cmdp.thresholds)"
      if field == "thresholds"
      else ""
    )
    raise ArgumentError(
      where,
      f"state.{field}: the state was made for {field_at} {_shown(mine)}, the CMDP has"
      f" {_shown(theirs)}: the agent would keep planning for the old ones; a state resumes"
      f" only the CMDP it was made for{fix}",
    )


def _check_options(agent, state, where: str, *, batched: bool) -> None:
  """Refuses a state stamped by an agent built with other options (`agents.options`)."""
  assumptions = _assumptions(agent)
  if assumptions is None:
    return
  digest = assumptions.options_digest
  stamp = getattr(state, "options", None)
  if not digest or stamp is None or not _concrete_leaf(stamp):
    return
  stamps = np.asarray(stamp).reshape(-1)
  other = stamps[(stamps != 0) & (stamps != digest)]
  if other.size == 0:
    return
  seed = f" (seed {int(np.argmax(stamps == other[0]))})" if batched else ""
  from .agents import options as options_lib  # the agents' module, which imports checks

  differ = options_lib.differences(int(other[0]), assumptions.options)
  named = (
    f": {differ}"
    if differ
    else "; this agent's: "
    + ", ".join(f"{k}={v}" for k, v in sorted((assumptions.options or {}).items()))
  )
  raise ArgumentError(
    where,
    f"state.options{seed}: the state was made by an agent built with other options"
    f"{named}. A state resumes only the agent that made it: build the agent with the same"
    " options, or, to continue under new options on purpose, pass"
    " state=state._replace(options=np.int32(0))",
  )


def warn_past_horizon(agent, num_episodes: int, state, where: str) -> None:
  """Warns when a run would go past the `K` the agent was built for (its radii use it)."""
  assumptions = _assumptions(agent)
  built_for = None if assumptions is None else assumptions.num_episodes
  start = _first_episode(state)
  if built_for is None or start is None or start + num_episodes <= built_for:
    return
  warnings.warn(
    f"{where}: the run ends at episode {start + num_episodes}, past the num_episodes ="
    f" {built_for} the agent was built for: its confidence radii use K = {built_for} (their"
    " guarantee is for K episodes). Build the agent with num_episodes >= the run's length",
    UserWarning,
    stacklevel=4,  # the caller of run, run_sharded or episode_step
  )


def _assumptions(agent) -> Assumptions | None:
  return getattr(agent, "assumptions", None)


def check_agent(agent, cmdp: CMDP, where: str, *, batched: bool = False) -> None:
  """Host checks of `agent.assumptions` against `cmdp` (a batch of CMDPs with one leading
  axis if `batched`). Skipped for what is traced (use `check=True` there)."""
  assumptions = _assumptions(agent)
  if assumptions is None:
    return
  if assumptions.counts_transitions:
    _warn_dense_agent(assumptions.setting, cmdp, where)
  if assumptions.safe_policy is None or arguments.traced(
    cmdp, assumptions.safe_policy, assumptions.slack
  ):
    return
  policy = np.asarray(assumptions.safe_policy)
  expected = tuple(cmdp.transitions.shape[-4:-1])
  if policy.shape != expected:
    raise ArgumentError(
      "safe_policy",
      f"expected shape {expected} [H, S, A] of the CMDP, got {policy.shape}",
      where=where,
    )
  values_fn = jax.vmap(_policy_values, in_axes=(0, None)) if batched else _policy_values
  with jax.ensure_compile_time_eval():  # concrete even while an outer `jit` traces
    _, values = values_fn(cmdp, jnp.asarray(policy, cmdp.transitions.dtype))
  fault = baseline_fault(np.asarray(values), np.asarray(cmdp.thresholds), assumptions.slack)
  if fault is not None:
    raise ArgumentError(where, f"{fault}")


def _warn_dense_agent(setting, cmdp: CMDP, where: str) -> None:
  """A sparse CMDP and an agent that declares no support: it runs in the dense layout, with
  `S` entries per row where the CMDP has `N < S` slots."""
  if cmdp.max_next_states >= cmdp.num_states or (
    setting is not None and (setting.support is not None or setting.all_next_states)
  ):
    return
  steps = 1 if setting is not None and setting.stationary else cmdp.horizon
  num_states, num_actions, slots = cmdp.num_states, cmdp.num_actions, cmdp.max_next_states
  dense_mb = steps * num_states * num_actions * num_states * 4 / 2**20
  sparse_mb = steps * num_states * num_actions * slots * 4 / 2**20
  warnings.warn(
    f"{where}: the CMDP is sparse ({slots} next-state slots per row) but the agent's setting"
    f" declares no support, so the agent counts and plans in the dense layout: S = {num_states}"
    f" entries per row instead of {slots} ({num_states / slots:.0f}x the work per step), and"
    f" {dense_mb:.3g} MB of transition counts per seed instead of {sparse_mb:.3g} MB. Build the"
    " agent with setting=oj.Setting(support=cmdp.next_states) (with the setting's other"
    " fields), or setting=oj.Setting(all_next_states=True) if every next state is possible"
    " on purpose (the paper's setting, named_setting('paper'))",
    UserWarning,
    stacklevel=5,  # the caller of run, run_sharded or episode_step
  )


def check_in_program(agent, cmdp: CMDP, where: str) -> None:
  """`checkify` checks of `cmdp` and of the agent's baseline, for a traced run
  (`check=True`): transition rows, initial state, costs in `[0, 1]`, thresholds in
  `[0, H]`, and a strictly feasible baseline with a slack at most its true slack."""
  kernels.initial_state(cmdp.initial_state, cmdp.num_states, where, check=True)
  kernels.distribution("cmdp.transitions", cmdp.transitions, where, check=True)
  kernels.finite("cmdp.cost", cmdp.cost, where, check=True, low=0.0, high=1.0)
  kernels.finite(
    "cmdp.constraint_costs", cmdp.constraint_costs, where, check=True, low=0.0, high=1.0
  )
  kernels.finite("cmdp.thresholds", cmdp.thresholds, where, check=True, low=0.0, high=cmdp.horizon)
  assumptions = _assumptions(agent)
  if assumptions is None or assumptions.safe_policy is None:
    return
  pi = jnp.asarray(assumptions.safe_policy, cmdp.transitions.dtype)
  _, values = policies.policy_values(cmdp, pi)
  true_slack = jnp.min(cmdp.thresholds - values)
  checkify.check(
    true_slack > 0,
    f"{where}: safe_policy: not strictly feasible: its true slack is {{slack}} <= 0"
    " (constraint values {values} against thresholds {thresholds})",
    slack=true_slack,
    values=values,
    thresholds=cmdp.thresholds,
  )
  if assumptions.slack is not None:
    slack = jnp.asarray(assumptions.slack, true_slack.dtype)
    tol = max(float(np.sqrt(np.finfo(true_slack.dtype).eps)), 1e-6)
    checkify.check(
      jnp.isfinite(slack) & (slack > 0) & (slack <= true_slack + tol),
      f"{where}: slack: {{stated}} must be positive and at most the safe policy's true"
      " slack {slack} (constraint values {values} against thresholds {thresholds})",
      stated=slack,
      slack=true_slack,
      values=values,
      thresholds=cmdp.thresholds,
    )
