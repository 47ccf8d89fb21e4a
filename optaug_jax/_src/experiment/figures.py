"""The standard figure panels of the experiment scripts (matplotlib axes passed in): mean
curves with their confidence bands, fitted lines, labels of bands too narrow to see, and
the per-episode constraint oscillation of a few seeds."""

from __future__ import annotations

import numpy as np


def oscillation_panel(ax, episodes, gap, title):
  """Per-episode `max_i V(d_i) - alpha_i` of the first three seeds (`gap`: [seeds, n, I])."""
  for s in range(min(3, gap.shape[0])):
    ax.plot(episodes, gap[s].max(-1), lw=0.8, label=f"seed {s}")
  ax.axhline(0, color="k", lw=0.6)
  ax.set_title(title)
  ax.set_xlabel("episode k")
  ax.set_ylabel("max_i V(d_i) - alpha_i (per episode)")
  ax.legend(fontsize=8)


# Mean curves with 95% bands, and fits drawn above them (headline.py, cancellation.py).

BAND_FACE_ALPHA = 0.3  # the band's fill; its edge is drawn at BAND_EDGE_ALPHA
BAND_EDGE_ALPHA = 0.8
FIT_ZORDER = 4  # fits above the data lines (2) and the bands (1)


def mean_with_band(ax, x, mean, lo, hi, *, color, label, **line_kwargs):
  """Draws `mean` over `x` with its band `[lo, hi]` (a visible fill with an edge, below the
  line); returns a band record for `label_narrow_bands`."""
  from matplotlib.colors import to_rgba

  x, mean, lo, hi = (np.asarray(v, np.float64) for v in (x, mean, lo, hi))
  (line,) = ax.plot(x, mean, color=color, label=label, zorder=2, **line_kwargs)
  ax.fill_between(
    x,
    lo,
    hi,
    facecolor=to_rgba(color, BAND_FACE_ALPHA),
    edgecolor=to_rgba(color, BAND_EDGE_ALPHA),
    linewidth=0.7,
    zorder=1,
  )
  return {"line": line, "label": label, "x": x, "mean": mean, "lo": lo, "hi": hi}


def fit_line(ax, x, y, *, color, label):
  """A least-squares fit curve: dashed, thicker and darker than the data's colour, above
  the data (`FIT_ZORDER`)."""
  from matplotlib.colors import to_rgb

  dark = tuple(0.55 * c for c in to_rgb(color))
  (line,) = ax.plot(x, y, color=dark, ls="--", lw=2.0, zorder=FIT_ZORDER, label=label)
  return line


def band_is_narrow(ax, band) -> bool:
  """Whether a band is thinner on screen than its line (median over its points, in the
  axes' final scales and limits): then it cannot be seen, and its legend says it."""
  ax.get_xlim(), ax.get_ylim()  # settles autoscaled limits before transforming
  x, lo, hi = band["x"], band["lo"], band["hi"]
  ok = np.isfinite(x) & np.isfinite(lo) & np.isfinite(hi)
  if not ok.any():
    return False
  if np.all(hi[ok] == lo[ok]):  # no width at all (identical seeds, one seed), any scale
    return True
  with np.errstate(all="ignore"):
    low = ax.transData.transform(np.column_stack([x[ok], lo[ok]]))[:, 1]
    high = ax.transData.transform(np.column_stack([x[ok], hi[ok]]))[:, 1]
  height = np.abs(high - low)
  height = height[np.isfinite(height)]
  if not height.size:
    return False
  return float(np.median(height)) < band["line"].get_linewidth() * ax.figure.dpi / 72


def interval_label(band) -> str:
  """The band's label with its last finite point's mean and 95% interval."""
  ok = np.flatnonzero(np.isfinite(band["mean"]) & np.isfinite(band["lo"]) & np.isfinite(band["hi"]))
  if not ok.size:
    return band["label"]
  i = ok[-1]
  half = (band["hi"][i] - band["lo"][i]) / 2
  return f"{band['label']} (final {band['mean'][i]:.3g} ± {half:.2g}, 95% CI)"


def label_narrow_bands(ax, bands):
  """States the interval in the legend label of every band too narrow to see; call once
  the axes' scales and the figure's layout are final, before `ax.legend`."""
  for band in bands:
    if band_is_narrow(ax, band):
      band["line"].set_label(interval_label(band))
