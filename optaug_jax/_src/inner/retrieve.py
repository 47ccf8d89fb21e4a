"""From occupancy back to a model: eq. (subst) `z = q p` of a deterministic vertex, and
eq. (retrieve-p) `p_h(s'|s, a) = z_h(s, a, s') / q_h(s, a)` of a mix of vertices.

Every inner solver returns a convex combination of extended-DP vertices (Frank-Wolfe's
iterates, the dual methods' bracketing or collected vertices). Each vertex is a
deterministic policy with a greedy transition function in the box, so its `z` is
`q_h(s, a) p_h(s'|s, a)`; mixing the vertices' `z` with the solution's weights and dividing
by `q` retrieves optimistic transitions that, with the retrieved policy, have occupancy `q`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import planning
from ..transition_set import TransitionSet


def vertex_z(lmo: planning.LMOSolution, num_actions: int) -> jax.Array:
  """`z_h(s, a, s') = q_h(s, a) p_h(s'|s, a)` of a deterministic LMO vertex (eq. (subst))."""
  one_hot = jax.nn.one_hot(lmo.actions, num_actions, dtype=lmo.occupancy.dtype)
  return one_hot[..., None] * (
    lmo.state_occupancy[..., None, None] * lmo.greedy_transitions[:, :, None, :]
  )


def transitions_from_z(z, transitions: TransitionSet):
  """Eq. (retrieve-p); where `q_h(s, a) = 0`, a fixed point of the box `transitions` (lower
  + fill, in the order of the next states' indices). Sparse layout: `z` and the result are
  slots."""
  fallback = transitions.layout.index_order_point(transitions.lower, transitions.upper, z.dtype)
  total = jnp.sum(z, axis=-1, keepdims=True)
  tiny = jnp.finfo(z.dtype).tiny
  safe_total = jnp.where(total > tiny, total, 1.0)
  return jnp.where(total > tiny, z / safe_total, fallback)
