"""The set of transition kernels an extended MDP optimises over, as one value.

A `TransitionSet` holds the box `[lower, upper]` of every row `(h, s, a)` (intersected with
the simplex), its layout (dense `[H or 1, S, A, S']`, or the sparse layout's slots `[H or 1,
S, A, N]` of `next_states`; a step axis of length 1 is the same box at every step) and the
greedy-fill formulation its DPs use (static, resolved for its width: `box.resolve_fill`).
Everything that optimises or evaluates over the set goes through its methods, so no caller
threads the layout or the fill: `lmo` (one extended DP, the oracle of every inner solver),
`vertex` (a named vertex filled again in this box), `value_iteration` and `evaluate`.

It is a pytree: `lower`, `upper` and `next_states` are leaves (batched by `vmap`,
differentiated by `jax.grad`), the fill is static (part of the tree's structure).
"""

from __future__ import annotations

from typing import Any

import jax

from . import box, planning


@jax.tree_util.register_pytree_node_class
class TransitionSet:
  """Transition kernels `p` with `lower <= p <= upper` row by row (see the module docstring).

  Build one with `TransitionSet(lower, upper, next_states=None, fill="auto")`, or from a
  known kernel with `TransitionSet.point(transitions, next_states)`.
  """

  __slots__ = ("lower", "upper", "next_states", "fill")

  def __init__(
    self,
    lower: jax.Array,
    upper: jax.Array,
    next_states: jax.Array | None = None,
    fill: str = box.DEFAULT_FILL,
  ):
    width = next_states.shape[-1] if next_states is not None else lower.shape[-1]
    self.lower = lower
    self.upper = upper
    self.next_states = next_states
    self.fill = box.resolve_fill(fill, width)

  @classmethod
  def point(
    cls, transitions: jax.Array, next_states: jax.Array | None = None, fill=box.DEFAULT_FILL
  ) -> TransitionSet:
    """The set of one known kernel: `lower = upper = transitions`."""
    return cls(transitions, transitions, next_states, fill)

  # --- pytree ---------------------------------------------------------------------------

  def tree_flatten(self):
    return (self.lower, self.upper, self.next_states), self.fill

  @classmethod
  def tree_unflatten(cls, fill, children):
    out = object.__new__(cls)  # no checks: the children may be tracers or placeholders
    out.lower, out.upper, out.next_states = children
    out.fill = fill
    return out

  def __repr__(self) -> str:
    shape = getattr(self.lower, "shape", None)
    layout = "dense" if self.next_states is None else "sparse"
    return f"TransitionSet({layout}, lower {shape}, fill={self.fill!r})"

  def replace(self, **changes: Any) -> TransitionSet:
    """A copy with the given fields (`lower`, `upper`, `next_states`) replaced."""
    fields = {"lower": self.lower, "upper": self.upper, "next_states": self.next_states}
    unknown = sorted(set(changes) - set(fields))
    if unknown:
      raise ValueError(f"TransitionSet.replace: unknown fields {unknown}")
    fields.update(changes)
    return self.tree_unflatten(self.fill, (fields["lower"], fields["upper"], fields["next_states"]))

  @property
  def sparse(self) -> bool:
    """Whether the set is in the sparse layout (`next_states` given)."""
    return self.next_states is not None

  # --- what callers do with the set ---------------------------------------------------

  def lmo(self, reward: jax.Array, initial_state) -> planning.LMOSolution:
    """`min_{q in Q(set)} reward . q`: one extended DP (`planning.extended_lmo`)."""
    return planning.extended_lmo(
      reward, self.lower, self.upper, initial_state, fill=self.fill, next_states=self.next_states
    )

  def vertex(
    self, reward: jax.Array, actions: jax.Array, order_values: jax.Array, initial_state
  ) -> planning.LMOSolution:
    """The vertex named by `actions` and its fill order, filled in this set
    (`planning.policy_vertex`)."""
    return planning.policy_vertex(
      reward,
      actions,
      order_values,
      self.lower,
      self.upper,
      initial_state,
      fill=self.fill,
      next_states=self.next_states,
    )

  def value_iteration(
    self, reward: jax.Array, initial_state, *, check: bool = False
  ) -> planning.ExtendedSolution:
    """Optimal policy and transitions in the set (`planning.extended_value_iteration`)."""
    return planning.extended_value_iteration(
      reward,
      self.lower,
      self.upper,
      initial_state,
      fill=self.fill,
      check=check,
      next_states=self.next_states,
    )

  def evaluate(self, reward: jax.Array, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Optimistic evaluation of a fixed policy (`planning.optimistic_policy_evaluation`):
    `(values [H, S], q_values [H, S, A])`."""
    return planning.optimistic_policy_evaluation(
      reward, policy, self.lower, self.upper, fill=self.fill, next_states=self.next_states
    )
