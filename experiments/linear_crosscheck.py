"""A one-off cross-check of `oj.linear` against Kitamura et al.'s code (their repository
matsuolab/Episode-Wise-Safe-Linear-CMDP, read from a local checkout given by `--peer`;
nothing of it is copied here, it is imported from that path at run time).

1. The instances: for each benchmark and instance seed, their `create_cmdp` arrays (the
   kernel, rewards, utilities, features, the start) against ours (`oj.linear.BENCHMARKS`,
   converted back from the cost convention): the largest absolute differences.
2. The estimators: the same `--episodes` trajectories (uniformly random actions, from
   NumPy's generator of `--key`, in the true kernel) fed to their Sherman-Morrison
   inverse, bonus and enumerated `P_hat`, and to ours (`Ridge`, `estimate`,
   `expected_next` on each unit vector): the largest differences of `Lambda^{-1}`, the
   bonus and `P_hat`.

  python experiments/linear_crosscheck.py --peer /path/to/Episode-Wise-Safe-Linear-CMDP \\
      --out docs/results/linear_cmdps/crosscheck.json

Float32, x64 off (their arrays are float32). Writes a small JSON of the differences.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

import optaug_jax as oj

ENVS = {  # ours: (their module, their create_cmdp's keyword arguments)
  "kitamura_random": ("envs.tabular", dict(S=5, A=3, H=4, const_scale=0.6)),
  "kitamura_streaming": ("envs.streaming", None),
  "kitamura_linear": ("envs.linear", dict(S=100, A=3, d=5, H=4, const_scale=0.68)),
}


def theirs(name, seed):
  module, kwargs = ENVS[name]
  create = importlib.import_module(module).create_cmdp
  key = jax.random.PRNGKey(seed)
  return create(key) if kwargs is None else create(key, **kwargs)


def trajectories(cmdp, seed, episodes):
  """`[episodes, H + 1]` states and `[episodes, H]` actions: uniform actions in `cmdp`
  (NumPy's generator of `seed`)."""
  kernel = np.asarray(cmdp.transitions, np.float64)
  horizon, num_states, num_actions = kernel.shape[:3]
  rng = np.random.default_rng(seed)
  states = np.zeros((episodes, horizon + 1), np.int32)
  actions = rng.integers(0, num_actions, size=(episodes, horizon)).astype(np.int32)
  states[:, 0] = int(cmdp.initial_state)
  for k in range(episodes):
    for h in range(horizon):
      p = kernel[h, states[k, h], actions[k, h]]
      states[k, h + 1] = rng.choice(num_states, p=p / p.sum())
  return states, actions


def main(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  p.add_argument("--peer", required=True, help="a checkout of their repository")
  p.add_argument("--seeds", type=int, default=3)
  p.add_argument("--episodes", type=int, default=50)
  p.add_argument("--key", type=int, default=0)
  p.add_argument("--out", default="results/linear_crosscheck.json")
  args = p.parse_args(argv)
  jax.config.update("jax_enable_x64", False)
  sys.path.insert(0, args.peer)
  utils = importlib.import_module("utils")
  out = {"peer": args.peer, "episodes": args.episodes, "jax": jax.__version__, "rows": []}
  for name in ENVS:
    for seed in range(args.seeds):
      peer = theirs(name, seed)
      bench = oj.linear.BENCHMARKS[name](seed)
      ours = bench.model
      horizon = ours.cmdp.cost.shape[0]
      num_states, num_actions = ours.cmdp.cost.shape[1:]
      d = ours.num_features
      row = {"benchmark": name, "seed": seed}
      row["kernel"] = float(np.max(np.abs(np.asarray(peer.P) - np.asarray(ours.cmdp.transitions))))
      row["reward"] = float(np.max(np.abs(np.asarray(peer.rew) - (1 - np.asarray(ours.cmdp.cost)))))
      row["utility"] = float(
        np.max(np.abs(np.asarray(peer.utility) - (1 - np.asarray(ours.cmdp.constraint_costs[0]))))
      )
      phi = np.asarray(ours.features).reshape(num_states * num_actions, d)
      row["features"] = float(np.max(np.abs(np.asarray(peer.phi) - phi)))
      row["start"] = [int(np.argmax(peer.init_dist)), int(ours.cmdp.initial_state)]
      states, actions = trajectories(ours.cmdp, args.key, args.episodes)
      # Theirs: the Sherman-Morrison inverse, the bonus, the enumerated P_hat.
      inv = jnp.tile(jnp.eye(d), (horizon, 1, 1))
      ephi = jnp.zeros((horizon, num_states, d))
      for s_row, a_row in zip(states, actions):
        traj = jnp.stack([s_row[:-1] * num_actions + a_row, s_row[1:]], axis=1)
        inv = utils.Sherman_Morrison_update_H(inv, peer.phi[traj[:, 0]])
        ephi, p_hat = utils.update_ephi_sum_and_estimate_P(ephi, inv, traj, peer)
      bonus = utils.compute_bonus(inv, peer)
      # Ours.
      features = ours.step_features()
      ridge = oj.linear.Ridge.zeros(horizon, num_states, num_actions, d, jnp.float32)
      for s_row, a_row in zip(states, actions):
        ridge = oj.linear.update(ridge, features, jnp.asarray(s_row), jnp.asarray(a_row))
      est = oj.linear.estimate(ridge, features, 1.0)
      our_inv = np.linalg.inv(np.asarray(oj.linear.gram(ridge, features, 1.0), np.float64))
      eye = jnp.eye(num_states)
      ours_p = np.stack(
        [
          np.stack(
            [
              np.asarray(oj.linear.expected_next(est, features, h, eye[n]))
              for n in range(num_states)
            ],
            -1,
          )
          for h in range(horizon)
        ]
      )
      row["lambda_inverse"] = float(np.max(np.abs(np.asarray(inv) - our_inv)))
      row["bonus"] = float(np.max(np.abs(np.asarray(bonus) - np.asarray(est.bonus))))
      row["p_hat"] = float(np.max(np.abs(np.asarray(p_hat) - ours_p)))
      out["rows"].append(row)
      print(json.dumps(row), flush=True)
  with open(args.out, "w") as f:
    json.dump(out, f, indent=1)
  return out


if __name__ == "__main__":
  main()
