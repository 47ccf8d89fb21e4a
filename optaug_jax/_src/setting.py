"""What a learner knows besides its counts, and how it sizes its confidence sets.

Two named settings are in use in the literature this library compares with:

- `"paper"` (the default, `Setting()`): the OptAug-CMDP paper and Efroni et al. (2020).
  Costs are learned (Hoeffding bonus), transition counts are kept per step `h`, every next
  state is possible, and the log factors are `L^p = log(6 S A H K / delta)`,
  `L = log(6 S A H (I + 1) K / delta)` with `delta = 0.1`.
- `"bura2022"` (`named_setting("bura2022", cmdp)`): the experiments of Bura et al. (2022,
  "DOPE") and their public code. Costs are known, transition counts are pooled over `h`
  (a stationary model), the next-state support of each `(s, a)` is known, and both log
  factors are `log(6 S^2 H K / delta)` with `delta = 0.01`.

The radius formulas are the same in both (Bernstein for transitions, capped so the box
stays in `[0, 1]`; Hoeffding for learned costs). With the paper's radii the `14 L / (3 n)`
term alone exceeds 1 until `n > 14 L / 3` visits of an `(h, s, a)`, i.e. 76 (K = 10^3) to
97 (K = 10^5) on media_streaming: until then the box is the whole simplex. Pooling
over `h` gives H times the visits, which is why the published curves learn in 10^3
episodes and the paper's setting needs many more.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import layouts
from .checking import arguments
from .errors import ArgumentError

LOG_FACTORS = ("paper", "bura2022")
SETTINGS = ("paper", "bura2022")
# The confidence parameter each convention uses when `delta` is not given.
DEFAULT_DELTA = {"paper": 0.1, "bura2022": 0.01}


@dataclasses.dataclass(frozen=True, eq=False)
class Setting:
  """Model knowledge and confidence convention of an agent (every agent's `setting=`).

  Attributes:
    log_factor: `"paper"` (`log(6 S A H K / delta)` for transitions and
      `log(6 S A H (I + 1) K / delta)` for costs) or `"bura2022"` (`log(6 S^2 H K / delta)`
      for both).
    delta: the confidence parameter; `None` takes the convention's (`DEFAULT_DELTA`). An
      agent's own `delta=` argument, when given, wins.
    stationary: pool visit counts, transitions and cost sums over `h` (the extended DP
      still runs over the H steps, with the same box at every step). Transition counts
      are then kept pooled (`[1, S, A, S']` or `[1, S, A, N]`) and every transition-shaped
      array of a run has a step axis of length 1: no `H S A S'` array is made.
    cost: known objective cost `[H, S, A]` or `[S, A]` in `[0, 1]`, used as is (no bonus);
      `None` learns it.
    constraint_costs: known constraint costs `[I, H, S, A]` or `[I, S, A]` in `[0, 1]`;
      `None` learns them.
    support: known next-state support, at least one next state per row: boxes (and the
      point estimate of unvisited pairs, uniform over the support) are restricted to it.
      `None`: every next state is possible. Two forms:
      - bool `[H, S, A, S']` or `[S, A, S']` (dense layout);
      - int `[H, S, A, N]` or `[S, A, N]`: the next states of each row's `N` slots, -1 for
        an empty slot (the sparse layout, `CMDP.next_states`): counts, boxes and the
        extended DP then have `N` entries per row instead of `S`, so a run's time and
        memory grow with `S A N`.
      A support the data contradict (an observed `s'` outside it, whose box is then a point
      at 0) is reported: `EpisodeLog.off_support_transitions` counts such `(h, s, a, s')`
      (dense) or such observations (sparse) in a run, `support_violations(state.counts,
      setting)` names them (dense) or counts them (sparse).
    all_next_states: every next state is possible, said on purpose (the paper's setting,
      `named_setting("paper")`): no support is declared, and a sparse CMDP is then run in
      the dense layout without the runner's warning. Excludes `support`. With the default
      `False` and no `support`, the numbers are the same, but `run` warns when the CMDP
      is sparse (what the dense layout costs, and `support=cmdp.next_states`).
    name: a label recorded in results (`"paper"`, `"bura2022"` or `"custom"`).
  """

  log_factor: str = "paper"
  delta: float | None = None
  stationary: bool = False
  cost: Any = None
  constraint_costs: Any = None
  support: Any = None
  name: str = "custom"
  all_next_states: bool = False

  def __post_init__(self):
    arguments.check_choice("log_factor", self.log_factor, LOG_FACTORS)
    for flag in ("stationary", "all_next_states"):
      if not isinstance(getattr(self, flag), (bool, np.bool_)):
        raise ArgumentError(flag, f"must be a bool, got {getattr(self, flag)!r}")
    if self.all_next_states and self.support is not None:
      raise ArgumentError(
        "all_next_states",
        "True says every next state is possible; it excludes a support (pass one or the other)",
      )
    if self.delta is not None:
      arguments.check_confidence(self.delta, 0.0)
    for field in ("cost", "constraint_costs"):
      value = getattr(self, field)
      if value is not None:
        arguments.check_real(field, value, low=0.0, high=1.0)
    if self.cost is not None and np.ndim(self.cost) not in (2, 3):
      raise ArgumentError("cost", f"expected [H, S, A] or [S, A], got shape {np.shape(self.cost)}")
    if self.constraint_costs is not None and np.ndim(self.constraint_costs) not in (3, 4):
      raise ArgumentError(
        "constraint_costs",
        f"expected [I, H, S, A] or [I, S, A], got shape {np.shape(self.constraint_costs)}",
      )
    if self.support is not None and not arguments.traced(self.support):
      support = np.asarray(self.support)
      if support.dtype != bool and not np.issubdtype(support.dtype, np.integer):
        raise ArgumentError(
          "support",
          f"expected a bool array (dense) or int next states (sparse), got dtype {support.dtype}",
        )
      if support.ndim not in (3, 4):
        raise ArgumentError(
          "support",
          f"expected [H, S, A, S'] or [S, A, S'] (bool), [H, S, A, N]"
          f" or [S, A, N] (int), got shape {support.shape}",
        )
      possible = support if support.dtype == bool else support >= 0
      empty = np.argwhere(~possible.any(-1))
      if empty.size:
        raise ArgumentError(
          "support",
          f"every (s, a) needs at least one possible next state;"
          f" row {tuple(int(i) for i in empty[0])} has none",
        )
      if support.dtype != bool:
        num_states = support.shape[-3]
        if support.min() < -1 or support.max() >= num_states:
          raise ArgumentError(
            "support",
            f"next states must lie in [0, {num_states}) or be -1"
            f" (an empty slot); found {int(support.min())}..{int(support.max())}",
          )
        dup = arguments.repeated_next_state_row(support)
        if dup is not None:
          raise ArgumentError("support", f"row {dup} names a next state twice")
        if self.stationary and support.ndim == 4:
          differs = np.argwhere(np.any(support != support[:1], axis=(1, 2, 3)))
          if differs.size:
            raise ArgumentError(
              "support",
              "stationary pools the transition counts of every step into one"
              " slot layout, so the next states must be the same at every step; step"
              f" {int(differs[0, 0])} differs from step 0 (pass an [S, A, N] support)",
            )

  @property
  def layout(self) -> layouts.Layout:
    """The layout the declared support is in (`layouts.of_support`): `Sparse` holding the
    next states `[H, S, A, N]` int32 (`[1, S, A, N]` without a step axis or when
    stationary: its steps are then the same, checked on construction) for int next
    states, `Dense` for a bool support or none."""
    return layouts.of_support(self.support, self.stationary)

  @property
  def sparse(self) -> bool:
    """Whether the support is given in the sparse layout (int next states)."""
    return self.layout.sparse

  def check_fits(self, num_states: int, num_actions: int) -> None:
    """`ValueError` where a sparse support's next states are not `[.., S, A, N]` rows of
    `num_states` states and `num_actions` actions."""
    self.layout.check_rows("setting.support", num_states, num_actions)

  def check_dense(self, agent: str) -> None:
    """Refuses a sparse support for an LP agent: its LPs have `H S A S'` variables (no
    sparse form; `to_dense(cmdp)` and a bool support give the dense layout)."""
    self.layout.require_dense(
      "setting.support",
      f"{agent} solves LPs over H*S*A*S' variables and has no"
      " sparse layout; give the support as a bool [.., S, A, S'] array"
      " (oj.to_dense(cmdp) for the CMDP)",
    )

  def next_states(self) -> jax.Array | None:
    """The sparse layout's next states (`layout.next_states`), `None` if dense."""
    return self.layout.next_states

  @property
  def resolved_delta(self) -> float:
    """`delta`, or the convention's default."""
    return DEFAULT_DELTA[self.log_factor] if self.delta is None else self.delta

  def log_factors(
    self,
    *,
    num_states: int,
    num_actions: int,
    horizon: int,
    num_constraints: int,
    num_episodes: int,
    delta: float | None = None,
  ) -> tuple[Any, Any]:
    """`(L^p, L)`: the log factors of this setting's transition and cost radii (`delta`:
    default the setting's)."""
    delta = self.resolved_delta if delta is None else delta
    return log_factors(
      self,
      num_states=num_states,
      num_actions=num_actions,
      horizon=horizon,
      num_constraints=num_constraints,
      num_episodes=num_episodes,
      delta=delta,
    )

  def whole_simplex_visits(
    self,
    *,
    num_states: int,
    num_actions: int,
    horizon: int,
    num_constraints: int,
    num_episodes: int,
    delta: float | None = None,
  ) -> int:
    """Visits of a pair below which `14 L^p / (3 n) >= 1`: its box is the whole simplex.

    Counted per `(h, s, a)`, or per `(s, a)` summed over h when `stationary`.
    """
    log_p, _ = self.log_factors(
      num_states=num_states,
      num_actions=num_actions,
      horizon=horizon,
      num_constraints=num_constraints,
      num_episodes=num_episodes,
      delta=delta,
    )
    return int(math.floor(14.0 * float(log_p) / 3.0))

  def describe(self) -> dict:
    """A JSON-ready record of the setting (what results store in their config)."""
    return {
      "name": self.name,
      "log_factor": self.log_factor,
      "delta": self.resolved_delta,
      "stationary": bool(self.stationary),
      "known_costs": self.cost is not None or self.constraint_costs is not None,
      "known_support": self.support is not None,
    }


def resolve(setting: Setting | None) -> Setting:
  """`setting`, or the paper's setting for `None`."""
  if setting is None:
    return PAPER
  if not isinstance(setting, Setting):
    raise ArgumentError(
      "setting",
      f"expected a Setting (see named_setting), got {setting!r};"
      " a name needs the CMDP: named_setting(name, cmdp)",
    )
  return setting


def named_setting(name: str, cmdp=None) -> Setting:
  """The setting `name` (one of `SETTINGS`) for `cmdp` (a `CMDP`, or a `Benchmark`: its
  `cmdp` is read).

  `"paper"` needs no model. `"bura2022"` reads the known costs and the next-state support
  (`transitions > 0`) from `cmdp`: it is model knowledge the agents of Bura et al. (2022)
  are given; the transition probabilities themselves stay unknown.
  """
  arguments.check_choice("name", name, SETTINGS)
  if name == "paper":
    return PAPER
  if cmdp is None:
    raise ArgumentError(
      "cmdp", "the 'bura2022' setting reads the known costs and support from the CMDP; pass it"
    )
  if not hasattr(cmdp, "transitions") and hasattr(cmdp, "cmdp"):
    cmdp = cmdp.cmdp  # a Benchmark
  if not all(hasattr(cmdp, f) for f in ("transitions", "cost", "constraint_costs")):
    raise ArgumentError("cmdp", f"expected a CMDP or a Benchmark, got {type(cmdp).__name__}")
  support = (
    np.asarray(cmdp.transitions) > 0
    if getattr(cmdp, "next_states", None) is None
    else np.asarray(cmdp.next_states)
  )
  return Setting(
    log_factor="bura2022",
    stationary=True,
    cost=np.asarray(cmdp.cost),
    constraint_costs=np.asarray(cmdp.constraint_costs),
    support=support,
    name="bura2022",
  )


def log_factors(
  setting: Setting,
  *,
  num_states: int,
  num_actions: int,
  horizon: int,
  num_constraints: int,
  num_episodes: int,
  delta,
) -> tuple[Any, Any]:
  """`(L^p, L)`: the log factors of the transition and the cost radii."""
  if setting.log_factor == "bura2022":
    both = jnp.log(6.0 * float(num_states**2 * horizon * num_episodes) / delta)
    return both, both
  sah_k = float(num_states * num_actions * horizon * num_episodes)
  return (jnp.log(6.0 * sah_k / delta), jnp.log(6.0 * sah_k * (num_constraints + 1) / delta))


PAPER = Setting(name="paper", all_next_states=True)
