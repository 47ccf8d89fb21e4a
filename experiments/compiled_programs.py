"""The compiled programs of the layout-dependent kernels and of whole episodes, written to a
folder, and two such folders compared: a refactor that moves code and should change neither
a number nor a timing compiles to the same programs.

The fingerprint (`experiments/fingerprint.py`) shows that a refactor changed no number; this
shows more where it holds: the optimised HLO that XLA compiles is the same text, so the
machine runs the same code (the same numbers, and the same time, whatever the noise of a
timing). Run it on the code before and after:

    git worktree add /tmp/before <commit before>
    PYTHONPATH=/tmp/before python experiments/compiled_programs.py --out /tmp/hlo_before
    python experiments/compiled_programs.py --out /tmp/hlo_after
    python experiments/compiled_programs.py --compare /tmp/hlo_before /tmp/hlo_after

What it compiles (float32, 4 problems vmapped): every `TransitionSet`
operation (`lmo`, `value_iteration`, `vertex`, `evaluate`, `occupancy`, `optimal_policy`)
and the retrieval of transitions (`inner.retrieve.transitions_from_z`) on random boxes in
six layouts (dense with the `matmul` and `blocked` fills, dense stationary, sparse with
3 slots, sparse stationary with 3 and with 8 slots: the rolled backward pass); the sampler
and the counts' update in both layouts; and a chunk of 20 episodes of OptAug and OptDual
(`oj.run` vmapped, as `episode_cost.py` compiles it) on media_streaming (dense), the queue
(sparse, stationary) and the 10 x 10 grid (dense). The comparison drops what names the
source (metadata, file and function tables, stack frame ids): it reports the programs that
differ in what they compute. Expect the same text only with the same jax and jaxlib and
the same kind of device.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import numpy as np

_SOURCE_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def normalise(text: str) -> str:
  """An HLO module's text without what names the source: the file, function and location
  tables, `stack_frame_id`s and `metadata={...}` (op names hold Python function names)."""
  out, skipping = [], False
  for line in text.splitlines():
    if line in _SOURCE_TABLES:
      skipping = True
      continue
    if skipping and (line == "" or re.match(r"^\d+ ", line)):
      continue
    skipping = False
    line = re.sub(r",? ?stack_frame_id=\d+", "", line)
    out.append(re.sub(r",? ?metadata=\{[^}]*\}", "", line))
  return _renumbered("\n".join(out))


def _renumbered(text: str) -> str:
  """The module with its instructions' and computations' names replaced by their order of
  first appearance: XLA derives them from the op names (a `jax.named_scope` renumbers
  `%broadcast_in_dim.25` as `.10` in an otherwise identical program)."""
  names: dict[str, str] = {}
  return re.sub(r"%[\w.\-]+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), text)


def compare(before: str, after: str) -> tuple[list[str], list[str], list[str]]:
  """`(same, differ, missing)`: the program names of folder `before` by whether folder
  `after` holds the same normalised text, another one, or none."""
  same, differ, missing = [], [], []
  for name in sorted(os.listdir(before)):
    other = os.path.join(after, name)
    if not os.path.exists(other):
      missing.append(name)
      continue
    with open(os.path.join(before, name)) as f, open(other) as g:
      (same if normalise(f.read()) == normalise(g.read()) else differ).append(name)
  return same, differ, missing


def _boxes(rng, steps, num_states, num_actions, width, sparse):
  p = rng.dirichlet(np.ones(width), size=(steps, num_states, num_actions)).astype(np.float32)
  lower = np.maximum(p - 0.1, 0).astype(np.float32)
  upper = np.minimum(p + 0.1, 1).astype(np.float32)
  next_states = None
  if sparse:
    rows = [rng.permutation(num_states)[:width] for _ in range(steps * num_states * num_actions)]
    next_states = np.stack(rows).reshape(steps, num_states, num_actions, width).astype(np.int32)
  return p, lower, upper, next_states


def write(out: str) -> int:
  import jax
  import jax.numpy as jnp

  import optaug_jax as oj
  from optaug_jax._src import env, estimates
  from optaug_jax._src.inner import retrieve

  # The imported checkout's own cost table (`optaug_jax.experiment.cost_table`).
  from optaug_jax.experiment import cost_table as episode_cost

  os.makedirs(out, exist_ok=True)
  batch, horizon, num_states, num_actions = 4, 5, 9, 3
  rng = np.random.default_rng(0)
  count = 0

  def emit(name, fn, *args):
    nonlocal count
    text = jax.jit(jax.vmap(fn)).lower(*args).compile().as_text()
    with open(os.path.join(out, f"{name}.txt"), "w") as f:
      f.write(text)
    count += 1

  def batched(x):
    return None if x is None else jnp.broadcast_to(jnp.asarray(x), (batch,) + np.shape(x))

  def batched_tree(tree):
    return jax.tree.map(batched, tree)

  reward = batched(rng.normal(size=(horizon, num_states, num_actions)).astype(np.float32))
  policy = batched(
    rng.dirichlet(np.ones(num_actions), size=(horizon, num_states)).astype(np.float32)
  )
  actions = batched(rng.integers(0, num_actions, size=(horizon, num_states)).astype(np.int32))
  values = batched(rng.normal(size=(horizon, num_states)).astype(np.float32))
  s0 = jnp.zeros((batch,), jnp.int32)
  layouts = {  # name: (steps, width, sparse, fill)
    "dense_matmul": (horizon, num_states, False, "matmul"),
    "dense_blocked": (horizon, num_states, False, "blocked"),
    "dense_stationary": (1, num_states, False, "matmul"),
    "sparse_3": (horizon, 3, True, "auto"),
    "sparse_stationary_3": (1, 3, True, "auto"),
    "sparse_stationary_8": (1, 8, True, "auto"),
  }
  for layout, (steps, width, sparse, fill) in layouts.items():
    p, lo, up, ns = (batched(x) for x in _boxes(rng, steps, num_states, num_actions, width, sparse))

    def box(lo, up, ns, fill=fill):
      return oj.TransitionSet(lo, up, ns, fill=fill)

    def point(p, ns, fill=fill):
      return oj.TransitionSet.point(p, ns, fill=fill)

    emit(
      f"{layout}_lmo", lambda r, lo, up, ns, s: box(lo, up, ns).lmo(r, s), reward, lo, up, ns, s0
    )
    emit(
      f"{layout}_value_iteration",
      lambda r, lo, up, ns, s: box(lo, up, ns).value_iteration(r, s),
      reward,
      lo,
      up,
      ns,
      s0,
    )
    emit(
      f"{layout}_vertex",
      lambda r, a, v, lo, up, ns, s: box(lo, up, ns).vertex(r, a, v, s),
      reward,
      actions,
      values,
      lo,
      up,
      ns,
      s0,
    )
    emit(
      f"{layout}_evaluate",
      lambda r, pi, lo, up, ns: box(lo, up, ns).evaluate(r, pi),
      reward,
      policy,
      lo,
      up,
      ns,
    )
    emit(
      f"{layout}_occupancy", lambda pi, p, ns, s: point(p, ns).occupancy(pi, s), policy, p, ns, s0
    )
    emit(f"{layout}_optimal_policy", lambda r, p, ns: point(p, ns).optimal_policy(r), reward, p, ns)
    z = batched(rng.random(size=(horizon, num_states, num_actions, width)).astype(np.float32))
    emit(
      f"{layout}_retrieve",
      lambda z, lo, up, ns: retrieve.transitions_from_z(z, box(lo, up, ns)),
      z,
      lo,
      up,
      ns,
    )
  grid = oj.benchmarks.make_benchmark("gridworld", size=3).cmdp
  keys = jax.random.split(jax.random.PRNGKey(0), batch)
  for layout, cmdp in (("dense", grid), ("sparse", oj.to_sparse(grid))):
    shape = (cmdp.horizon, cmdp.num_states, cmdp.num_actions)
    uniform = jnp.full(shape, 1.0 / cmdp.num_actions)
    emit(f"sample_episode_{layout}", env.sample_episode, keys, batched_tree(cmdp), batched(uniform))
    ns = cmdp.next_states
    counts = estimates.init_counts(
      horizon=cmdp.horizon,
      num_states=cmdp.num_states,
      num_actions=cmdp.num_actions,
      num_constraints=cmdp.constraint_costs.shape[0],
      dtype=jnp.float32,
      num_next_states=None if ns is None else ns.shape[-1],
    )
    trajectories = jax.vmap(env.sample_episode, (0, None, None))(keys, cmdp, uniform)
    emit(
      f"update_counts_{layout}",
      estimates.update_counts,
      batched_tree(counts),
      trajectories,
      batched(ns),
    )
  for problem in ("media_streaming", "queue", "gridworld10_dense"):
    bench_name, kwargs, setting_name, bonus = episode_cost.PROBLEMS[problem]
    bench = episode_cost.benchmark(bench_name, kwargs)
    setting = oj.named_setting(setting_name, bench.cmdp)
    agents = episode_cost.agents(bench, setting, bonus, 1000, 100, 20.0, ["optaug", "optdual"], 0.0)
    for name, agent in agents.items():

      def run(key, state, model, agent=agent):
        return oj.run(agent, key, model, num_episodes=20, state=state)

      chunk_keys = episode_cost.keys(batch, 7)
      compiled = jax.jit(jax.vmap(run, in_axes=(0, 0, None))).lower(chunk_keys, None, bench.cmdp)
      with open(os.path.join(out, f"episodes_{problem}_{name}.txt"), "w") as f:
        f.write(compiled.compile().as_text())
      count += 1
  return count


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--out", help="write the compiled programs' text to this folder")
  p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two such folders")
  args = p.parse_args(argv)
  if bool(args.out) == bool(args.compare):
    p.error("give one of --out DIR or --compare BEFORE AFTER")
  if args.compare:
    same, differ, missing = compare(*args.compare)
    for name in differ:
      print(f"differs: {name}")
    for name in missing:
      print(f"missing after: {name}")
    print(f"{len(same)} programs the same, {len(differ)} differ, {len(missing)} missing")
    return 0 if not differ and not missing else 1
  start = time.perf_counter()
  count = write(args.out)
  print(f"{count} compiled programs -> {args.out} in {time.perf_counter() - start:.0f} s")
  return 0


if __name__ == "__main__":
  sys.exit(main())
