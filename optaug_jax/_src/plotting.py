"""Figures of benchmark problems (matplotlib, imported lazily). Host side."""

from __future__ import annotations

import numpy as np

from . import benchmarks
from .errors import ArgumentError


def plot_gridworld(
  benchmark: benchmarks.Benchmark, policy=None, occupancy=None, ax=None, *, step: int = 0
):
  """Draws a `gridworld` benchmark: hazards, start, goal, and optionally a policy and visits.

  Args:
    benchmark: a `Benchmark` from `gridworld` (the grid is read from its CMDP).
    policy: optional `[H, S, A]` policy; arrows show its greedy actions at `step` (none
      in the goal and in cells where the policy is uniform, e.g. unreached ones).
    occupancy: optional `[H, S, A]` occupancy measure; a heat map shows the expected
      number of visits of each non-goal cell (summed over steps and actions; the
      absorbing goal, which would dominate the scale, is left blank).
    ax: matplotlib `Axes` to draw on (default: a new figure).
    step: the step (0-based) whose actions the arrows show.

  Returns:
    The matplotlib `Axes`.
  """
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib.patches import Rectangle  # pylint: disable=g-import-not-at-top

  model = benchmark.cmdp
  num_states = model.num_states
  size = int(round(np.sqrt(num_states)))
  if size * size != num_states:
    raise ArgumentError("benchmark", f"{num_states} states is not a square grid")
  hazard = np.asarray(model.constraint_costs)[0, 0, :, 0].reshape(size, size) > 0
  start = divmod(int(model.initial_state), size)
  goal = (size - 1, size - 1)
  if ax is None:
    _, ax = plt.subplots(figsize=(0.8 * size + 1.5, 0.8 * size + 1.0))

  if occupancy is not None:
    visits = np.asarray(occupancy, np.float64).sum(axis=(0, 2)).reshape(size, size)
    mask = np.zeros_like(visits, bool)
    mask[goal] = True
    visits = np.ma.masked_array(visits, mask=mask)
    image = ax.imshow(
      visits, cmap="Blues", origin="upper", vmin=0.0, extent=(-0.5, size - 0.5, size - 0.5, -0.5)
    )
    ax.figure.colorbar(image, ax=ax, label="expected visits")
  for r, c in zip(*np.nonzero(hazard)):
    ax.add_patch(
      Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor="tab:red", alpha=0.35, edgecolor="none")
    )
  for (r, c), label, color in [(start, "S", "tab:green"), (goal, "G", "tab:orange")]:
    ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor=color, alpha=0.35, edgecolor="none"))
    ax.text(c - 0.38, r - 0.3, label, fontsize=10, fontweight="bold")
  if policy is not None:
    rows = np.asarray(policy, np.float64)[step]
    actions = np.argmax(rows, axis=-1)
    for s in range(num_states):
      r, c = divmod(s, size)
      if (r, c) == goal or np.ptp(rows[s]) < 1e-9:
        continue
      dr, dc = benchmarks.GRID_MOVES[int(actions[s])]
      ax.annotate(
        "",
        xy=(c + 0.3 * dc, r + 0.3 * dr),
        xytext=(c - 0.3 * dc, r - 0.3 * dr),
        arrowprops=dict(arrowstyle="->", lw=1.5),
      )
  ax.set_xlim(-0.5, size - 0.5)
  ax.set_ylim(size - 0.5, -0.5)
  ax.set_xticks(np.arange(-0.5, size), minor=True)
  ax.set_yticks(np.arange(-0.5, size), minor=True)
  ax.grid(which="minor", color="gray", lw=0.5)
  ax.set_xticks(range(size))
  ax.set_yticks(range(size))
  ax.set_aspect("equal")
  ax.set_title(f"gridworld {size}x{size} (red: hazards)")
  return ax
