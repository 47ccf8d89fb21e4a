"""Does a seed's run depend on how it is run? Each agent on each benchmark, several layouts.

For every (agent, benchmark) asked, the seeds are run in several layouts and every state
leaf and every logged field of each seed is compared, bit for bit, with the reference
layout (`jax.jit(jax.vmap(run))` over all the seeds):

- `alone`: each seed in its own `jax.jit(run)` (a batch of one, no `vmap`);
- `neighbours`: the first seed vmapped beside other seeds than the reference's;
- `sharded_b1`, `sharded_b2`: `run_sharded(batch_size=1 or 2)` (a `lax.map` over vmapped
  chunks) on this process's devices;
- `devices`: `run_sharded` over 2 CPU devices, in a subprocess
  (`--xla_force_host_platform_device_count=2`; not with `--no-devices`).

Prints one line per (agent, benchmark, layout): `same` or the fields that differ and by
how much; `--out FILE.json` keeps them. The slow suite's `tests/test_layouts.py` runs a
matrix of it and holds the README's list of exceptions to it.

  python experiments/layouts.py --agents optdual,optaug --benchmarks media_streaming
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

# The benchmarks at a size the matrix can afford (their default options otherwise).
BENCHMARKS = {
  "media_streaming": ("media_streaming", {}),
  "factored": ("factored", {}),
  "gridworld": ("gridworld", {"size": 4, "sparse": True}),
  "queue": ("queue", {"capacity": 19, "horizon": 10}),
  "inventory": ("inventory", {}),
  "lost_sales": ("lost_sales", {"capacity": 19, "horizon": 8}),
  "random_family": ("random_family", {"num_states": 5, "num_constraints": 2, "horizon": 5}),
}
# OptAug's pre-training shortened and its eta constant (as the experiments run it), so
# that a short run reaches the exact search.
AGENT_OPTIONS = {"optaug": {"pretrain_episodes": 5, "eta": 20.0}}
LAYOUTS = ("alone", "neighbours", "sharded_b1", "sharded_b2", "devices")
DEFAULT_AGENTS = (
  "optaug",
  "optdual",
  "optdual_optimistic",
  "pid_lagrangian",
  "nupi_lagrangian",
  "optprimaldual",
  "dope",
  "optpess_lp",
  "safe_baseline",
)  # optcmdp (HiGHS on the host, per seed) is left out: its numbers are the LP solver's


def _setup(agent_name, bench_name, episodes, x64, setting=None):
  import jax

  jax.config.update("jax_enable_x64", x64)
  import optaug_jax as oj

  name, kwargs = BENCHMARKS[bench_name]
  dtype = "float64" if x64 else "float32"
  bench = oj.benchmarks.make_benchmark(name, dtype=dtype, **kwargs)
  options = dict(AGENT_OPTIONS.get(agent_name, {}))
  if setting is not None:
    options["setting"] = setting
  agent = oj.agents.make_agent(agent_name, bench, num_episodes=episodes, **options)
  return oj, bench.cmdp, agent


def _flat(tree):
  import jax

  out = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    if leaf is not None:
      out[jax.tree_util.keystr(path)] = np.asarray(leaf)
  return out


def _keys(seeds, offset=0):
  import jax

  return jax.random.split(jax.random.PRNGKey(7), seeds + offset)[offset:]


def run_layout(agent_name, bench_name, layout, *, episodes, seeds, x64, setting=None):
  """The flattened `(state, log)` of the seeds in `layout` (`"vmap"`: the reference). x64
  is set for the run and restored after it (the caller's process keeps its own). `setting`:
  the agent's (`"paper"`, `"bura2022"`: known costs); `None`, its default."""
  import jax

  previous = jax.config.jax_enable_x64
  try:
    return _run_layout(
      agent_name, bench_name, layout, episodes=episodes, seeds=seeds, x64=x64, setting=setting
    )
  finally:
    jax.config.update("jax_enable_x64", previous)


def _run_layout(agent_name, bench_name, layout, *, episodes, seeds, x64, setting=None):
  import jax

  oj, cmdp, agent = _setup(agent_name, bench_name, episodes, x64, setting)
  keys = _keys(seeds)
  run = lambda k, m: oj.run(agent, k, m, num_episodes=episodes)
  if layout == "vmap":
    out = jax.jit(jax.vmap(run, in_axes=(0, None)))(keys, cmdp)
  elif layout == "alone":
    one = jax.jit(run)
    parts = [one(k, cmdp) for k in keys]
    out = jax.tree.map(lambda *xs: np.stack(xs), *parts)
  elif layout == "neighbours":  # seed 0 beside other seeds; only seed 0 is compared
    others = jax.numpy.concatenate([keys[:1], _keys(seeds - 1, offset=seeds)])
    out = jax.jit(jax.vmap(run, in_axes=(0, None)))(others, cmdp)
    out = jax.tree.map(lambda x: x[:1], out)
  elif layout in ("sharded_b1", "sharded_b2", "devices"):
    batch = {"sharded_b1": 1, "sharded_b2": 2, "devices": None}[layout]
    out = oj.run_sharded(agent, keys, cmdp, num_episodes=episodes, batch_size=batch)
  else:
    raise ValueError(f"layout: {layout!r} is not one of {('vmap',) + LAYOUTS}")
  return _flat(out)


def difference(reference, other):
  """`{field: largest |difference|}` of the fields that are not equal bit for bit (NaNs
  equal); `other` may hold fewer seeds (the first ones)."""
  diffs = {}
  for name, want in reference.items():
    got = other[name]
    want = want[: got.shape[0]]
    if not np.array_equal(got, want, equal_nan=True):
      if got.dtype.kind in "fc" or want.dtype.kind in "fc":
        diffs[name] = float(np.nanmax(np.abs(got.astype(float) - want.astype(float))))
      else:
        diffs[name] = float(np.max(np.abs(got.astype(np.int64) - want.astype(np.int64))))
  return diffs


# The child runs this file's `run_layout` (`runpy`: no import path to edit) on 2 devices.
_CHILD = """
import runpy
import numpy as np
run_layout = runpy.run_path({script!r})["run_layout"]
out = run_layout(
  {agent!r}, {bench!r}, "devices", episodes={episodes}, seeds={seeds}, x64={x64},
  setting={setting!r},
)
np.savez({path!r}, **out)
"""


def _devices_layout(agent_name, bench_name, *, episodes, seeds, x64, tmp, setting=None):
  path = os.path.join(tmp, f"{agent_name}_{bench_name}_{setting}_devices.npz")
  here = os.path.dirname(os.path.abspath(__file__))
  code = _CHILD.format(
    script=os.path.abspath(__file__),
    agent=agent_name,
    bench=bench_name,
    episodes=episodes,
    seeds=seeds,
    x64=x64,
    setting=setting,
    path=path,
  )
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
  root = os.path.dirname(here)
  env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
  done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
  if done.returncode:
    raise RuntimeError(f"the 2-device run failed:\n{done.stderr[-3000:]}")
  with np.load(path) as f:
    return {k: f[k] for k in f.files}


def compare(
  agent_name,
  bench_name,
  layouts=LAYOUTS,
  *,
  episodes=40,
  seeds=4,
  x64=False,
  tmp=".",
  setting=None,
):
  """`{layout: {field: largest difference}}` against the vmapped reference ({}: the same)."""
  kw = dict(episodes=episodes, seeds=seeds, x64=x64, setting=setting)
  reference = run_layout(agent_name, bench_name, "vmap", **kw)
  result = {}
  for layout in layouts:
    if layout == "devices":
      other = _devices_layout(agent_name, bench_name, tmp=tmp, **kw)
    else:
      other = run_layout(agent_name, bench_name, layout, **kw)
    result[layout] = difference(reference, other)
  return result


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--agents", default=",".join(DEFAULT_AGENTS))
  p.add_argument("--benchmarks", default=",".join(BENCHMARKS))
  p.add_argument("--layouts", default=",".join(LAYOUTS))
  p.add_argument("--episodes", type=int, default=40)
  p.add_argument("--seeds", type=int, default=4)
  p.add_argument("--x64", action="store_true")
  p.add_argument("--no-devices", action="store_true", help="skip the 2-device subprocess")
  p.add_argument("--out", default=None)
  args = p.parse_args(argv)
  layouts = [x for x in args.layouts.split(",") if not (args.no_devices and x == "devices")]
  for x in layouts:
    if x not in LAYOUTS:
      p.error(f"--layouts: {x!r} is not one of {LAYOUTS}")
  rows = []
  import tempfile

  with tempfile.TemporaryDirectory() as tmp:
    for bench in args.benchmarks.split(","):
      if bench not in BENCHMARKS:
        p.error(f"--benchmarks: {bench!r} is not one of {tuple(BENCHMARKS)}")
      for agent in args.agents.split(","):
        res = compare(
          agent, bench, layouts, episodes=args.episodes, seeds=args.seeds, x64=args.x64, tmp=tmp
        )
        for layout, diffs in res.items():
          rows.append({"agent": agent, "benchmark": bench, "layout": layout, "diffs": diffs})
          text = "same" if not diffs else ", ".join(f"{k} {v:.2g}" for k, v in diffs.items())
          print(f"{agent:20s} {bench:16s} {layout:11s} {text}", flush=True)
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"args": vars(args), "rows": rows}, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
