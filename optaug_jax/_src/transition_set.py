"""The set of transition kernels an extended MDP optimises over, as one value.

A `TransitionSet` holds the box `[lower, upper]` of every row `(h, s, a)` (intersected with
the simplex), its layout (dense `[H or 1, S, A, S']`, or the sparse layout's slots `[H or 1,
S, A, N]` of `next_states`; a step axis of length 1 is the same box at every step) and the
greedy-fill formulation its DPs use (static, resolved for its width: `box.resolve_fill`).
The layout is a type (`layouts.Dense`, `layouts.Sparse`: `TransitionSet.layout`), which
holds what one step of a recursion does to the rows (the fill, the row pick, the forward
push); `planning.py` writes each recursion once against it.
Everything that optimises or evaluates over the set goes through it, so no caller threads
the layout or the fill: `lmo` (one extended DP, the oracle of every inner solver),
`vertex` (a named vertex filled again in this box), `value_iteration` and `evaluate`.

A known kernel in its layout is a set of one point (`TransitionSet.point`, `lower = upper`,
held once): `occupancy` and `optimal_policy` are defined on such a set only.

It is a pytree: `lower`, `upper` and `next_states` are leaves (batched by `vmap`,
differentiated by `jax.grad`; a point set has one leaf for both bounds), the fill and
whether the set is a point are static (part of the tree's structure).
"""

from __future__ import annotations

from typing import Any

import jax
from jax.typing import ArrayLike

from . import box, layouts, planning
from .checking import arguments, kernels
from .errors import ArgumentError


@jax.tree_util.register_pytree_node_class
class TransitionSet:
  """Transition kernels `p` with `lower <= p <= upper` row by row (see the module docstring).

  Build one with `TransitionSet(lower, upper, next_states=None, fill="auto")`, or from a
  known kernel with `TransitionSet.point(kernel, next_states)`.
  """

  __slots__ = ("lower", "upper", "layout", "is_point", "checked")
  lower: Any  # arrays (host arrays too, e.g. for the LP), or tracers
  upper: Any
  layout: layouts.Layout
  is_point: bool
  checked: bool

  def __init__(
    self,
    lower: ArrayLike,
    upper: ArrayLike,
    next_states: ArrayLike | None = None,
    fill: str = box.DEFAULT_FILL,
  ):
    # Frozen once built (`__setattr__`): a checked set stays the set that was checked.
    init = lambda name, value: object.__setattr__(self, name, value)
    init("lower", lower)  # arrays (host arrays too, e.g. for the LP), or tracers
    init("upper", upper)
    init("layout", layouts.of(next_states, fill))  # unresolved until checked
    init("is_point", False)
    # Shapes and dtypes always; the numbers when concrete (`checks.transition_set`): a
    # ValueError naming the field and the first row that holds no kernel.
    init("checked", False)
    kernels.transition_set(self, "TransitionSet")
    # Whether the numbers were checked here (a set rebuilt from its leaves, by `vmap`,
    # `jax.tree.map` or `replace`, is checked by the kernels it is passed to).
    init("checked", not arguments.traced(lower, upper, next_states))
    init("layout", layouts.of(next_states, box.resolve_fill(fill, self.layout.width(lower))))

  def __setattr__(self, name: str, value: Any) -> None:
    raise AttributeError(
      f"TransitionSet is immutable (cannot set {name!r}): build a new set, "
      "TransitionSet(lower, upper, next_states) or set.replace(...), which is checked"
    )

  def __delattr__(self, name: str) -> None:
    raise AttributeError(f"TransitionSet is immutable (cannot delete {name!r})")

  def __getstate__(self) -> dict[str, Any]:  # pickle and copy: the same frozen set
    return {name: getattr(self, name) for name in self.__slots__}

  def __setstate__(self, state: dict[str, Any]) -> None:
    for name, value in state.items():
      object.__setattr__(self, name, value)

  @classmethod
  def point(
    cls, kernel: ArrayLike, next_states: ArrayLike | None = None, fill: str = box.DEFAULT_FILL
  ) -> TransitionSet:
    """The set of one known kernel (`lower = upper = kernel`, one leaf): `[H or 1, S, A, S']`
    probabilities, or `[H or 1, S, A, N]` slots of `next_states`."""
    out = cls(kernel, kernel, next_states, fill)
    object.__setattr__(out, "is_point", True)
    return out

  # --- pytree ---------------------------------------------------------------------------

  def tree_flatten(self):
    bounds = (self.lower,) if self.is_point else (self.lower, self.upper)
    return bounds + (self.next_states,), (self.fill, self.is_point)

  @classmethod
  def tree_unflatten(cls, aux, children):
    out = object.__new__(cls)  # no checks: the children may be tracers or placeholders
    fill, is_point = aux
    if is_point:
      lower, next_states = children
      upper = lower
    else:
      lower, upper, next_states = children
    fields = {"lower": lower, "upper": upper, "layout": layouts.of(next_states, fill)}
    for name, value in dict(fields, is_point=is_point, checked=False).items():
      object.__setattr__(out, name, value)
    return out

  def __repr__(self) -> str:
    shape = getattr(self.lower, "shape", None)
    layout = "sparse" if self.sparse else "dense"
    kind = "point, " if self.is_point else ""
    return f"TransitionSet({kind}{layout}, lower {shape}, fill={self.fill!r})"

  def replace(self, **changes: Any) -> TransitionSet:
    """A copy with the given fields (`lower`, `upper`, `next_states`) replaced (a box: a
    point set with its bounds changed is one no more)."""
    fields = {"lower": self.lower, "upper": self.upper, "next_states": self.next_states}
    unknown = sorted(set(changes) - set(fields))
    if unknown:
      raise ArgumentError("TransitionSet.replace", f"unknown fields {unknown}")
    fields.update(changes)
    return self.tree_unflatten(
      (self.fill, False), (fields["lower"], fields["upper"], fields["next_states"])
    )

  @property
  def next_states(self) -> Any:
    """`[H or 1, S, A, N]` int, the next state of each slot (sparse layout); `None`
    (dense)."""
    return self.layout.next_states

  @property
  def fill(self) -> str:
    """The dense layout's greedy-fill formulation, resolved for the width
    (`box.resolve_fill`)."""
    return self.layout.fill

  @property
  def sparse(self) -> bool:
    """Whether the set is in the sparse layout (`next_states` given)."""
    return self.layout.sparse

  @property
  def width(self) -> int:
    """`W`, the entries of a row: `S'` next states (dense) or `N` slots (sparse)."""
    return self.layout.width(self.lower)

  @property
  def kernel(self) -> jax.Array:
    """The one kernel of a point set (`ValueError` for a box)."""
    if not self.is_point:
      raise ArgumentError(
        "TransitionSet", "a known kernel is needed here (TransitionSet.point), got a box"
      )
    return self.lower

  # --- what callers do with the set ---------------------------------------------------

  def lmo(self, reward: jax.Array, initial_state, *, check: bool = False) -> planning.LMOSolution:
    """`min_{q in Q(set)} reward . q`: one extended DP (`planning.extended_lmo`)."""
    return planning.extended_lmo(reward, self, initial_state, check=check)

  def vertex(
    self,
    reward: jax.Array,
    actions: jax.Array,
    order_values: jax.Array,
    initial_state,
    *,
    check: bool = False,
  ) -> planning.LMOSolution:
    """The vertex named by `actions` and its fill order, filled in this set
    (`planning.policy_vertex`)."""
    return planning.policy_vertex(reward, actions, order_values, self, initial_state, check=check)

  def value_iteration(
    self, reward: jax.Array, initial_state, *, check: bool = False
  ) -> planning.ExtendedSolution:
    """Optimal policy and transitions in the set (`planning.extended_value_iteration`)."""
    return planning.extended_value_iteration(reward, self, initial_state, check=check)

  def soft_value_iteration(
    self, reward: jax.Array, temperature: ArrayLike, *, check: bool = False
  ) -> planning.SoftSolution:
    """Entropy-regularised optimistic backups at `temperature` (soft-min over actions,
    softmax policy; `planning.soft_value_iteration`)."""
    arguments.check_positive("temperature", temperature, allow_none=False)
    return planning.soft_value_iteration(reward, self, temperature, check=check)

  def evaluate(
    self, reward: jax.Array, policy: jax.Array, *, check: bool = False
  ) -> tuple[jax.Array, jax.Array]:
    """Optimistic evaluation of a fixed policy (`planning.optimistic_policy_evaluation`):
    `(values [H, S], q_values [H, S, A])`."""
    return planning.optimistic_policy_evaluation(reward, policy, self, check=check)

  def occupancy(self, policy: jax.Array, initial_state, *, check: bool = False) -> jax.Array:
    """`[H, S, A]` occupancy of `policy` under the kernel of a point set
    (`planning.occupancy`)."""
    return planning.occupancy(self, policy, initial_state, check=check)

  def optimal_policy(self, reward: jax.Array, *, check: bool = False) -> jax.Array:
    """`[H, S, A]` one-hot policy minimising `V^pi(reward)` under the kernel of a point set
    (`planning.optimal_policy`)."""
    return planning.optimal_policy(reward, self, check=check)
