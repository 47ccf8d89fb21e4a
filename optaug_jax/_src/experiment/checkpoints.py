"""Checkpoints of chunked runs: each agent's state and running arrays after a chunk, with the
run's identity (`agent_identity`: the script, the settings that determine the numbers, the
agent, the problem) and a digest of their arrays, written atomically and verified when read
(`load_checkpoint` refuses, as a `CheckpointError` saying why, a checkpoint of another run,
another agent, another problem or a damaged file), so a resumed run never mixes in another
run's numbers."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np

from optaug_jax._src.experiment.result_files import digest, write_npz


class CheckpointError(ValueError):
  """A checkpoint that cannot be used for this run (the message says why and what to do)."""


class OtherRunCheckpoint(CheckpointError):
  """A whole checkpoint of another run (other settings, agent or problem): a cache may
  compute its own instead (`experiments/episode_cost.py`'s late states)."""


def save_checkpoint(path, identity, done, state, arrays, seconds):
  """Writes the state's leaves, `arrays` and the run's identity atomically (`write_npz`)."""
  arrays = dict(arrays)
  arrays.update({f"state_{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(state))})
  arrays["done"] = np.asarray(done)
  meta = {"identity": identity, "seconds": seconds, "digest": digest(arrays)}
  write_npz(
    path, {"meta": np.asarray(json.dumps(meta, sort_keys=True)), **arrays}, compressed=False
  )


def agent_identity(config: dict, name: str, record: dict) -> dict:
  """What determines one agent's numbers in a run: every argument but the list of the
  other agents, the agent's name, and the package versions."""
  return {
    **{k: v for k, v in config.items() if k != "agents"},
    "agent": name,
    "versions": record["versions"],
  }


RESUME_FIX = "delete it, or run without --resume to start afresh"


def _read(path, fix):
  """`(meta, arrays)` of the file at `path`; a `CheckpointError` when it cannot be read."""
  try:
    with np.load(path) as ck:
      arrays = {k: ck[k] for k in ck.files}
    meta = json.loads(str(arrays.pop("meta")))
    if not isinstance(meta, dict):
      raise ValueError(f"its meta is a {type(meta).__name__}, not a dict")
  except Exception as e:  # pylint: disable=broad-except  (zip, pickle, EOF, JSON, key)
    reason = " ".join(f"{type(e).__name__}: {e}".split())
    raise CheckpointError(f"{path}: unreadable checkpoint ({reason}); {fix}") from e
  return meta, arrays


def read_checkpoint(path, *, fix=RESUME_FIX) -> tuple[dict, dict]:
  """`(meta, arrays)` of the checkpoint at `path`, read whole and checked against its
  digest, whatever run it belongs to: a `CheckpointError` (ending with `fix`) for a
  damaged file, before any work that would use it (`load_checkpoint` verifies the rest)."""
  meta, arrays = _read(path, fix)
  if digest(arrays) != meta.get("digest"):
    raise CheckpointError(f"{path}: content does not match its digest (edited or corrupted); {fix}")
  return meta, arrays


def load_checkpoint(path, identity, init_state, total, check_arrays, *, fix=RESUME_FIX):
  """`(done, state, arrays, seconds)` from `path`, verified against this run.

  Refuses with a `CheckpointError` naming the file and ending with `fix` (what to do):
  unreadable files, another run's checkpoint (`OtherRunCheckpoint`, naming the settings
  that differ), content that does not match its digest, an episode count outside (0,
  total], arrays that `check_arrays(arrays, done)` rejects (it returns the reason, or
  None), state that does not match this run's shapes or holds NaN or inf, or a state at
  another episode.
  """
  meta, arrays = _read(path, fix)
  saved = dict(meta.get("identity") or {})
  saved.pop("agents", None)  # checkpoints written before agent_identity carried the list
  if saved != identity:
    diff = sorted(k for k in set(saved) | set(identity) if saved.get(k) != identity.get(k))
    details = {k: (saved.get(k), identity.get(k)) for k in diff}
    raise OtherRunCheckpoint(
      f"{path}: belongs to another run; differing settings (saved, now): {details}; {fix}"
    )
  if digest(arrays) != meta.get("digest"):
    raise CheckpointError(f"{path}: content does not match its digest (edited or corrupted); {fix}")
  done = int(arrays["done"])
  if not 0 < done <= total:
    raise CheckpointError(f"{path}: records {done} episodes, outside (0, {total}]; {fix}")
  problem = check_arrays(arrays, done)
  if problem:
    raise CheckpointError(f"{path}: {problem}; {fix}")
  leaves, treedef = jax.tree.flatten(init_state)
  state_leaves = []
  for i, ref in enumerate(leaves):
    x = arrays.get(f"state_{i}")
    if x is None or x.shape != ref.shape or x.dtype != ref.dtype:
      raise CheckpointError(f"{path}: state leaf {i} does not match this run's state; {fix}")
    if np.issubdtype(x.dtype, np.floating) and not np.all(np.isfinite(x)):
      raise CheckpointError(f"{path}: state leaf {i} holds NaN or inf; {fix}")
    state_leaves.append(jnp.asarray(x))
  state = jax.tree.unflatten(treedef, state_leaves)
  if not np.all(np.asarray(state.episode) == done):
    raise CheckpointError(
      f"{path}: the state is at episode {np.unique(state.episode)}, the arrays at {done}; {fix}"
    )
  return done, state, arrays, float(meta["seconds"])
