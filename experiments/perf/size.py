"""`benchmark.py`'s `size` section: time per seed and memory against S (gridworld 5..50,
dense and sparse), for the extended LMO and the default OptAug episode, with fitted slopes,
and OptCMDP's LP against S; and its figure."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj
from optaug_jax.experiment import result_files, timing


def grid_box(cmdp, radius=0.05):
  """A box of `radius` around the true transitions (zero off their support), in the
  CMDP's layout; `[H, ...]`."""
  p = cmdp.transitions
  support = p > 0 if cmdp.next_states is None else cmdp.next_states >= 0
  lower = jnp.where(support, jnp.clip(p - radius, 0.0, 1.0), 0.0)
  upper = jnp.where(support, jnp.clip(p + radius, 0.0, 1.0), 0.0)
  return lower, upper


def size_section(table, args):
  """Time per seed and memory against S on `gridworld(size)` (A=4, H=3 size), dense and
  sparse: the extended LMO (one problem), and the default OptAug episode (16 seeds
  vmapped, past pre-training, counts from 20 pre-training episodes)."""
  rows = []
  dense_max = args.size_dense_max
  for size in args.size_grid:
    horizon = 3 * size
    for layout in ("dense", "sparse"):
      if layout == "dense" and size > dense_max:
        num = horizon * size**2 * 4 * size**2
        rows.append(
          {
            "size": size,
            "S": size**2,
            "H": horizon,
            "layout": layout,
            "skipped": f"dense transitions [H, S, A, S'] = {num:.3g} entries"
            f" ({num * 4 / 2**30:.1f} GiB per array in float32)",
          }
        )
        print(f"size     grid {size}x{size} dense: skipped ({rows[-1]['skipped']})", flush=True)
        continue
      t0 = time.perf_counter()
      bench = oj.benchmarks.gridworld(size, sparse=layout == "sparse", dtype=jnp.float32)
      build_s = time.perf_counter() - t0
      cmdp = bench.cmdp
      ns = cmdp.next_states
      sizes = f"S={size**2} A=4 H={horizon} {layout}"
      lower, upper = grid_box(cmdp)
      reward = jax.random.uniform(jax.random.PRNGKey(0), cmdp.cost.shape, jnp.float32)
      lmo = jax.jit(lambda r, lo, up, ns=ns: oj.TransitionSet(lo, up, ns).lmo(r, 0).value)
      lmo_s = timing.median_time(lambda: lmo(reward, lower, upper), args.reps)
      table.add("size", "extended LMO, one problem", seeds=1, time_s=lmo_s, sizes=sizes)
      row = {
        "size": size,
        "S": size**2,
        "H": horizon,
        "layout": layout,
        "entries": int(lower.size),
        "lmo_s": lmo_s,
        "build_s": build_s,
      }
      # The same LMO for --size-seeds problems vmapped (a run's case): time per seed.
      n = args.size_seeds
      rewards = jax.random.uniform(jax.random.PRNGKey(2), (n,) + cmdp.cost.shape, jnp.float32)
      lmo_batch = jax.jit(jax.vmap(lmo, in_axes=(0, None, None)))
      row["lmo_vmapped_s_per_seed"] = (
        timing.median_time(lambda: lmo_batch(rewards, lower, upper), args.reps) / n
      )
      table.add(
        "size",
        f"extended LMO, {n} seeds vmapped",
        seeds=n,
        time_s=row["lmo_vmapped_s_per_seed"] * n,
        sizes=sizes,
      )
      if ns is not None:  # stationary bounds: one [1, S, A, N] box for every step
        lo1, up1, ns1 = lower[:1], upper[:1], ns[:1]
        lmo1 = jax.jit(lambda r, lo, up: oj.TransitionSet(lo, up, ns1).lmo(r, 0).value)
        row["lmo_stationary_s"] = timing.median_time(lambda: lmo1(reward, lo1, up1), args.reps)
        table.add(
          "size",
          "extended LMO, stationary box",
          seeds=1,
          time_s=row["lmo_stationary_s"],
          sizes=sizes,
        )
      for stationary in (False, True):
        support = np.asarray(cmdp.transitions) > 0 if ns is None else np.asarray(ns)
        if stationary:
          support = support[0]
        setting = oj.Setting(
          support=support,
          stationary=stationary,
          name="known support" + (", stationary" if stationary else ""),
        )
        agent = oj.optaug(
          num_episodes=100_000,
          safe_policy=bench.safe_policy,
          slack=bench.slack,
          pretrain_episodes=20,
          setting=setting,
        )
        n = args.size_seeds
        keys = jax.random.split(jax.random.PRNGKey(1), n)
        states = jax.vmap(
          lambda _: agent.init(
            cmdp.thresholds,
            cmdp.initial_state,
            num_states=cmdp.num_states,
            num_actions=cmdp.num_actions,
            horizon=cmdp.horizon,
          )
        )(keys)
        step = jax.jit(
          jax.vmap(
            lambda st, k: oj.run(agent, k, cmdp, state=st, num_episodes=1, logs="summary")[0]
          )
        )
        compiled, compile_s = timing.compile_timed(step, states, keys)
        for i in range(20):  # pre-training episodes (one compiled step, 20 calls)
          states = compiled(states, jax.random.split(jax.random.PRNGKey(100 + i), n))
        episode_s = timing.median_time(lambda: compiled(states, keys), max(2, args.reps // 2))
        label = "stationary" if stationary else "per-step"
        table.add(
          "size",
          f"OptAug episode, {label} counts",
          seeds=n,
          time_s=episode_s,
          sizes=sizes,
          compile_s=compile_s,
          memory=timing.memory(compiled),
        )
        state_bytes = timing.tree_bytes(jax.tree.map(lambda x: x[0], states))
        row[f"episode_{label}_s_per_seed"] = episode_s / n
        row[f"state_{label}_bytes_per_seed"] = state_bytes
        row[f"state_{label}_bytes_64_seeds"] = 64 * state_bytes
        print(
          f"size     state per seed ({label}): {state_bytes / 2**20:.2f} MiB,"
          f" 64 seeds {64 * state_bytes / 2**30:.3f} GiB",
          flush=True,
        )
      rows.append(row)
  fits = {}
  for layout in ("dense", "sparse"):
    done = [r for r in rows if r["layout"] == layout and "lmo_s" in r]
    if len(done) >= 2:
      fits[layout] = {
        "lmo_slope_vs_S": timing.fit_slope([r["S"] for r in done], [r["lmo_s"] for r in done]),
        "lmo_slope_vs_entries": timing.fit_slope(
          [r["entries"] for r in done], [r["lmo_s"] for r in done]
        ),
        "episode_slope_vs_S": timing.fit_slope(
          [r["S"] for r in done], [r["episode_per-step_s_per_seed"] for r in done]
        ),
      }
      print(
        f"size     {layout}: LMO time ~ S^{fits[layout]['lmo_slope_vs_S']:.2f}"
        f" (entries^{fits[layout]['lmo_slope_vs_entries']:.2f}), episode ~"
        f" S^{fits[layout]['episode_slope_vs_S']:.2f}",
        flush=True,
      )
  lp_rows = []
  for size in args.size_lp_grid:  # OptCMDP's episode LP: H S A S' variables
    bench = oj.benchmarks.gridworld(size, sparse=False)
    cmdp = bench.cmdp
    lower, upper = (np.asarray(x, np.float64) for x in grid_box(cmdp))
    t0 = time.perf_counter()
    oj.lp.solve_extended_lp(
      np.asarray(cmdp.cost),
      np.asarray(cmdp.constraint_costs),
      lower,
      upper,
      0,
      np.asarray(cmdp.thresholds),
    )
    lp_s = time.perf_counter() - t0
    lp_rows.append({"size": size, "S": size**2, "variables": int(lower.size), "lp_s": lp_s})
    print(
      f"size     OptCMDP episode LP, grid {size}x{size}: {lower.size:.3g} variables, {lp_s:.2f} s",
      flush=True,
    )
  return {"rows": rows, "fits": fits, "lp": lp_rows}


def plot_size(size: dict, path: str) -> None:
  """Log-log figure of `size_section`'s times per seed against S, dense and sparse."""
  import matplotlib  # pylint: disable=import-outside-toplevel

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  series = (
    ("lmo_s", "extended LMO, one problem", axes[0]),
    ("lmo_vmapped_s_per_seed", "extended LMO, per seed, vmapped", axes[0]),
    ("lmo_stationary_s", "extended LMO, stationary box", axes[0]),
    ("episode_per-step_s_per_seed", "OptAug episode, per-step counts", axes[1]),
    ("episode_stationary_s_per_seed", "OptAug episode, stationary counts", axes[1]),
  )
  for layout, marker in (("dense", "s-"), ("sparse", "o-")):
    done = [r for r in size["rows"] if r["layout"] == layout and "lmo_s" in r]
    for key, label, ax in series:
      pts = [(r["S"], r[key]) for r in done if key in r]
      if pts:
        ax.plot(*zip(*pts), marker, label=f"{layout}: {label}")
  for ax, title in zip(axes, ("extended LMO", "default OptAug episode, per seed")):
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("states S (gridworld, A = 4, H = 3 sqrt(S))")
    ax.set_ylabel("seconds")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
  fig.tight_layout()
  result_files.save_figure(fig, path)
  plt.close(fig)
