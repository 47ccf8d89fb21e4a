"""Every number of the library's default runs, written to one file, and two such files compared.

A refactor that should change no number is checked by running this script on the code
before it and on the code after it, then comparing the two files bit for bit:

    git worktree add /tmp/before <commit before>
    PYTHONPATH=/tmp/before python experiments/fingerprint.py --out /tmp/before.npz
    python experiments/fingerprint.py --out /tmp/after.npz
    python experiments/fingerprint.py --compare /tmp/before.npz /tmp/after.npz

(`PYTHONPATH` puts the older `optaug_jax` first; the script itself only uses names present
in both.) What it runs, in float64 and in float32: every registered agent with its default
options (`make_agent(name, benchmark, num_episodes=K)`, full episode logs and the final
state) on two small benchmarks (one constraint, and two constraints), for a few seeds; the
known-model augmented Lagrangian method; and the inner solve (the exact method, stopping on
its proof) on a few random inner problems. The comparison is exact (`np.array_equal`,
NaNs equal): any difference is printed with its largest size.

Two machines: `python experiments/fingerprint.py` prints one line, `fingerprint <sha256>`,
a digest of every array; the same digest on both means the same numbers bit for bit
(expect it only with the same jax and jaxlib versions and the same kind of device: other
compiled code rounds otherwise).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _problems(oj, dtype):
  """(name, benchmark) of the benchmarks the fingerprint runs."""
  family = oj.benchmarks.random_family
  return [
    ("random_i1", family(seed=3, num_states=4, num_actions=3, horizon=4, dtype=dtype)),
    (
      "random_i2",
      family(seed=5, num_states=4, num_actions=3, horizon=4, num_constraints=2, dtype=dtype),
    ),
    ("gridworld_sparse", oj.benchmarks.gridworld(3, horizon=5, sparse=True, dtype=dtype)),
  ]


def _leaves(prefix, tree, out):
  import jax

  flat, _ = jax.tree_util.tree_flatten_with_path(tree)
  for path, leaf in flat:
    if leaf is None:
      continue
    out[prefix + jax.tree_util.keystr(path)] = np.asarray(leaf)


def _solve(oj, problem, multipliers, eta, method):
  """The exact method stopping on its proof, or Frank-Wolfe's 100 line-search steps, in the
  API of either version."""
  if hasattr(oj, "inner") and hasattr(oj.inner, "exact"):
    solver = oj.inner.exact(tol=0.0) if method == "exact" else oj.inner.frank_wolfe()
    return oj.solve_inner(problem, multipliers, eta, solver=solver)
  old = dict(method="dual", tol=0.0) if method == "exact" else dict(method="frank_wolfe")
  return oj.solve_inner(*problem[:6], multipliers, eta, next_states=problem[6], **old)


def fingerprint(*, episodes: int, seeds: int) -> dict[str, np.ndarray]:
  import jax
  import jax.numpy as jnp

  import optaug_jax as oj

  out: dict[str, np.ndarray] = {}
  for dtype in (jnp.float64, jnp.float32):
    tag = jnp.dtype(dtype).name
    for pname, bench in _problems(oj, dtype):
      keys = jax.random.split(jax.random.PRNGKey(0), seeds)
      for name in oj.agents.AGENTS:
        if oj.agents.AGENTS[name].factory.__module__.startswith("optaug_jax._src.linear"):
          continue  # the linear agents (one constraint, one-hot features here): not recorded
        agent = oj.agents.make_agent(name, bench, num_episodes=episodes)
        state, log = jax.vmap(lambda k: oj.run(agent, k, bench.cmdp, num_episodes=episodes))(keys)
        _leaves(f"{tag}/{pname}/{name}/log", log, out)
        _leaves(f"{tag}/{pname}/{name}/state", state, out)
      cmdp = bench.cmdp
      alm = oj.analysis.alm_known_model(cmdp, 10.0, num_iters=5)
      _leaves(f"{tag}/{pname}/alm_known_model", alm, out)
      # Inner problems: the true model inside a box around it, random multipliers and eta.
      rng = np.random.default_rng(1)
      num_constraints = cmdp.thresholds.shape[0]
      for i in range(3):
        radius = jnp.asarray(rng.uniform(0.0, 0.3), dtype)
        lower = jnp.clip(cmdp.transitions - radius, 0.0, 1.0)
        upper = jnp.clip(cmdp.transitions + radius, 0.0, 1.0)
        if cmdp.next_states is not None:  # no mass on the empty slots of the sparse layout
          upper = jnp.where(cmdp.next_states >= 0, upper, 0.0)
        lam = jnp.asarray(rng.uniform(0.0, 2.0, num_constraints), dtype)
        eta = jnp.asarray(10.0 ** rng.uniform(-1, 4), dtype)
        if hasattr(oj, "TransitionSet"):
          problem = oj.inner.InnerProblem(
            cost=cmdp.cost,
            constraint_costs=cmdp.constraint_costs,
            thresholds=cmdp.thresholds,
            transitions=oj.TransitionSet(lower, upper, cmdp.next_states),
            initial_state=cmdp.initial_state,
          )
        elif hasattr(oj, "inner") and hasattr(oj.inner, "exact"):
          problem = oj.inner.InnerProblem(
            cost=cmdp.cost,
            constraint_costs=cmdp.constraint_costs,
            thresholds=cmdp.thresholds,
            lower=lower,
            upper=upper,
            initial_state=cmdp.initial_state,
            next_states=cmdp.next_states,
          )
        else:
          problem = (
            cmdp.cost,
            cmdp.constraint_costs,
            lower,
            upper,
            cmdp.initial_state,
            cmdp.thresholds,
            cmdp.next_states,
          )
        for method in ("exact", "frank_wolfe"):
          _leaves(f"{tag}/{pname}/inner{i}/{method}", _solve(oj, problem, lam, eta, method), out)
      # The eager solves and per-agent programs load thousands of executables: at the
      # kernel's limit on memory mappings the process dies in LLVM (docs/guides/devices.md).
      # One problem's programs alone stay far below it.
      jax.clear_caches()
  return out


def _names_of_fields(key: str) -> str:
  """A key in the names of today's code, so that files written before the inner solvers
  became values compare with files written after: the certificate `fw_gap` is now
  `InnerSolution.gap` and `EpisodeLog.inner_gap`, and the states of OptDual's variants and
  OptPrimalDual hold their `AgentState` in a field `agent` (same numbers)."""
  key = key.replace("/state.agent.", "/state.")
  if "/inner" in key:  # an inner solve's InnerSolution
    return key.replace(".fw_gap", ".gap")
  return key.replace(".fw_gap", ".inner_gap")


def compare(before_path: str, after_path: str) -> int:
  before, after = np.load(before_path), np.load(after_path)
  b = {_names_of_fields(k): before[k] for k in before.files}
  a = {_names_of_fields(k): after[k] for k in after.files}
  missing, extra = sorted(set(b) - set(a)), sorted(set(a) - set(b))
  differ = []
  for k in sorted(set(a) & set(b)):
    x, y = b[k], a[k]
    same = (
      x.shape == y.shape
      and x.dtype == y.dtype
      and (np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))
    )
    if not same:
      size = (
        float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
        if x.shape == y.shape and x.dtype.kind in "fcib"
        else float("nan")
      )
      differ.append((k, size))
  print(
    f"{len(set(a) & set(b))} arrays in both files ({sum(v.size for v in a.values())}"
    f" numbers); {len(differ)} differ; {len(missing)} only before; {len(extra)} only after"
  )
  for k, size in differ:
    print(f"  differs: {k} (largest difference {size:.3g})")
  for k in missing:
    print(f"  only before: {k}")
  for k in extra:
    print(f"  only after: {k}")
  return 0 if not (differ or missing) else 1


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--out", help="also write the fingerprint's arrays to this .npz")
  p.add_argument(
    "--compare",
    nargs=2,
    metavar=("BEFORE", "AFTER"),
    help="compare two fingerprint files bit for bit (exit 1 if they differ)",
  )
  p.add_argument("--episodes", type=int, default=40, help="episodes per run")
  p.add_argument("--seeds", type=int, default=2, help="seeds per run")
  args = p.parse_args(argv)
  if args.compare:
    return compare(*args.compare)
  import jax

  jax.config.update("jax_enable_x64", True)
  import optaug_jax as oj
  from optaug_jax.experiment import result_files

  start = time.time()
  out = fingerprint(episodes=args.episodes, seeds=args.seeds)
  if args.out:
    np.savez(args.out, **out)
  where = f" -> {args.out}" if args.out else ""
  print(f"{len(out)} arrays from {oj.__file__} in {time.time() - start:.0f} s{where}")
  print(
    f"fingerprint {result_files.digest(out)} (jax {jax.__version__}, {jax.devices()[0].platform},"
    f" {args.episodes} episodes, {args.seeds} seeds)"
  )
  return 0


if __name__ == "__main__":
  sys.exit(main())
