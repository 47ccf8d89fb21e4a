"""Why the exact I = 1 search certifies on one device and not on another: a probe.

Runs OptAug (bura2022, bonus 0.1, eta 20, one chunk of pre-training) on a problem for a
few seeds, then, at the final state's models, compares each extended DP's value at the
initial state (the backward recursion) with the same vertex's Lagrangian evaluated from
its occupancy (`sum((c + mu d) q)`, the forward pass): the search's stopping test compares
these two computations, so their disagreement must stay below its rounding allowance
(`16 eps (1 + |value|)`). Prints the disagreement's distribution against that allowance,
the run's DP counts and certified share.

  PYTHONPATH=. python experiments/perf/certificate_probe.py --problem delivery
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax._src import inner as inner_lib
from optaug_jax._src.estimates import optimistic_model
from optaug_jax.experiment import cost_table


def trace_solves(state, args, bonus, setting, count=3):
  """The search's steps (mu, the DP's value, the bracket, done) for the next solve of the
  first `count` seeds, jitted as the agent runs it (the loop's body reports each step)."""
  from jax import lax

  from optaug_jax._src.inner import loops

  rows = []

  def record(*xs):
    rows.append([np.asarray(x).item() for x in xs])

  def iterate(body, carry, *, num_iters, running, early, can_stop=True):
    def step(c):
      c = body(c)
      jax.debug.callback(
        record,
        c.it,
        c.mu_last,
        c.v_last.value,
        jnp.sum(c.v_last.occupancy),
        c.lo,
        c.hi,
        c.has_lo,
        c.has_hi,
        c.done,
        c.stalls,
        c.best,
        ordered=True,
      )
      return c

    jax.debug.callback(
      record,
      carry.it,
      carry.mu_last,
      carry.v_last.value,
      jnp.sum(carry.v_last.occupancy),
      carry.lo,
      carry.hi,
      carry.has_lo,
      carry.has_hi,
      carry.done,
      carry.stalls,
      carry.best,
      ordered=True,
    )
    return lax.while_loop(running, step, carry)

  original = loops.iterate
  loops.iterate = iterate
  try:

    @jax.jit
    def solve(st):
      model = optimistic_model(
        st.counts, num_episodes=args.episodes, bonus_scale=bonus, setting=setting
      )
      problem = inner_lib.InnerProblem.of_model(model, st.thresholds, st.initial_state)
      sol = inner_lib.solve_inner(
        problem,
        st.multipliers,
        jnp.float32(20.0),
        gradient=None,
        with_transitions=False,
        warm=st.warm,
      )
      return sol.dp_calls, sol.certified, sol.gap, sol.objective

    traces = []
    for i in range(count):
      rows.clear()
      st = jax.tree.map(lambda x: x[i], state)
      dp, cert, gap, obj = jax.device_get(solve(st))
      head = ("it", "mu", "value", "mass", "lo", "hi", "has_lo", "has_hi", "done", "stalls", "best")
      print(
        f"seed {i}: dp_calls {dp} certified {cert} gap {gap:.3e} objective {obj:.6f}"
        f" lambda {float(st.multipliers[0]):.6f}"
      )
      for r in rows:
        print(
          "   "
          + " ".join(
            f"{h}={v:.7g}" if isinstance(v, float) else f"{h}={v}" for h, v in zip(head, r)
          )
        )
      traces.append(
        {
          "dp_calls": int(dp),
          "certified": bool(cert),
          "gap": float(gap),
          "steps": [dict(zip(head, r)) for r in rows],
        }
      )
    return traces
  finally:
    loops.iterate = original


def main(argv=None):
  p = argparse.ArgumentParser()
  p.add_argument("--problem", default="delivery")
  p.add_argument("--seeds", type=int, default=4)
  p.add_argument("--episodes", type=int, default=200)
  p.add_argument("--out", default=None)
  args = p.parse_args(argv)
  name, kwargs, setting_name, bonus = cost_table.PROBLEMS[args.problem]
  bench = cost_table.benchmark(name, kwargs)
  cmdp = bench.cmdp
  setting = oj.named_setting(setting_name, cmdp)
  agent = oj.agents.make_agent(
    "optaug",
    bench,
    num_episodes=args.episodes,
    pretrain_episodes=100,
    eta=20.0,
    setting=setting,
    bonus_scale=bonus,
  )
  run = jax.jit(jax.vmap(lambda k, m: oj.run(agent, k, m, num_episodes=args.episodes), (0, None)))
  keys = jax.random.split(jax.random.PRNGKey(0), args.seeds)
  state, log = jax.block_until_ready(run(keys, cmdp))
  dp = np.asarray(log.extras["dp_calls"])[:, 100:]
  cert = np.asarray(log.certified)[:, 100:]
  out = {
    "device": str(jax.devices()[0]),
    "jax": jax.__version__,
    "problem": args.problem,
    "dp_mean": float(dp.mean()),
    "dp_max": int(dp.max()),
    "certified": float(cert.mean()),
  }
  d_rel, allow = [], []

  @jax.jit
  def disagreement(counts, thresholds, initial_state, mu):
    model = optimistic_model(counts, num_episodes=args.episodes, bonus_scale=bonus, setting=setting)
    problem = inner_lib.InnerProblem.of_model(model, thresholds, initial_state)
    c = problem.cost + mu * problem.constraint_costs[0]
    v = problem.lmo(c)
    forward = jnp.sum(c * v.occupancy)
    return v.value, forward, jnp.sum(v.occupancy)

  for i in range(args.seeds):
    st = jax.tree.map(lambda x: x[i], state)
    for mu in np.linspace(0.0, 4.0, 9):
      val, fwd, mass = jax.device_get(
        disagreement(st.counts, st.thresholds, st.initial_state, jnp.float32(mu))
      )
      d_rel.append(float(abs(val - fwd) / (1 + abs(val))))
      allow.append(float(16 * np.finfo(np.float32).eps))
      if i == 0:
        print(
          f"seed 0 mu {mu:.1f}: DP value {val:.7f} forward {fwd:.7f} mass {mass:.7f}"
          f" |diff|/(1+|v|) {d_rel[-1]:.2e}",
          flush=True,
        )
  d_rel = np.array(d_rel)
  out["trace"] = trace_solves(state, args, bonus, setting)
  out.update(
    rel_disagreement_median=float(np.median(d_rel)),
    rel_disagreement_max=float(d_rel.max()),
    allowance=allow[0],
    share_over_allowance=float(np.mean(d_rel > allow[0])),
  )
  print(json.dumps(out, indent=1), flush=True)
  if args.out:
    with open(args.out, "w") as f:
      json.dump(out, f, indent=1)


if __name__ == "__main__":
  main()
