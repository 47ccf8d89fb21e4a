"""Playing a policy in the true CMDP."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from . import layouts
from .cmdp import CMDP


class Trajectory(NamedTuple):
  """One episode. Observed costs are the realised random costs, not their means."""

  states: jax.Array  # [H + 1] int, s_1 .. s_{H+1}
  actions: jax.Array  # [H] int
  costs: jax.Array  # [H] observed C_h(s_h, a_h) in {0, 1}
  constraint_costs: jax.Array  # [I, H] observed D_{i,h}(s_h, a_h) in {0, 1}


def sample_episode(key: jax.Array, cmdp: CMDP, policy: jax.Array) -> Trajectory:
  """Samples one episode of `policy` in `cmdp` (`lax.scan` over the horizon).

  Observed costs are Bernoulli with the CMDP's expected costs as means (the paper only
  needs random variables in `[0, 1]` with those means).

  Args:
    key: PRNG key, consumed.
    cmdp: an unbatched `CMDP`.
    policy: `[H, S, A]` policy.

  Returns:
    A `Trajectory`.
  """
  horizon = cmdp.horizon
  layout = layouts.of(cmdp.next_states)
  keys = jax.random.split(key, horizon)
  xs = (
    keys,
    cmdp.transitions,
    policy,
    cmdp.cost,
    jnp.moveaxis(cmdp.constraint_costs, 0, 1),
    cmdp.next_states,
  )

  def step(state, x):
    k, p_h, pi_h, c_h, d_h, ns_h = x
    k_a, k_s, k_c, k_d = jax.random.split(k, 4)
    action = jax.random.categorical(k_a, jnp.log(jnp.maximum(pi_h[state], 0.0)))
    # Dense: the draw is the next state; sparse: it is a slot of the row.
    draw = jax.random.categorical(k_s, jnp.log(jnp.maximum(p_h[state, action], 0.0))).astype(
      jnp.int32
    )
    next_state = layout.next_state(draw, ns_h, state, action)
    cost = jax.random.bernoulli(k_c, c_h[state, action]).astype(c_h.dtype)
    constraint_cost = jax.random.bernoulli(k_d, d_h[:, state, action]).astype(d_h.dtype)
    return next_state, (state, action, cost, constraint_cost)

  s1 = jnp.asarray(cmdp.initial_state, jnp.int32)
  last, (states, actions, costs, constraint_costs) = lax.scan(step, s1, xs)
  return Trajectory(
    states=jnp.concatenate([states, last[None]]).astype(jnp.int32),
    actions=actions.astype(jnp.int32),
    costs=costs,
    constraint_costs=constraint_costs.T,
  )
