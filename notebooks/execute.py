"""Executes the notebooks at their full sizes and stores their outputs, for the site.

The documentation site renders each notebook with its stored outputs (mkdocs-jupyter does
not execute them: the full sizes take minutes each). This script is what stores them: it
runs every code cell top to bottom in a fresh kernel, at the full sizes
(`OPTAUG_NOTEBOOK_QUICK` unset), and records in the notebook's metadata the digest of its
code cells, the package's version and the time. `tests/test_notebooks.py` checks, in the
default suite, that each notebook's stored outputs come from its current cells (the
digest matches, every code cell ran, none failed); its slow test runs each notebook again
at small sizes.

  python notebooks/execute.py                       # every notebook
  python notebooks/execute.py 01_quickstart.ipynb   # the named ones
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import pathlib
import time

HERE = pathlib.Path(__file__).parent
KEY = "optaug_jax"  # the notebook metadata's entry this script writes


def code_digest(nb) -> str:
  """sha256 of the notebook's code cells' sources, in order (outputs excluded)."""
  sources = [
    "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    for c in nb["cells"]
    if c["cell_type"] == "code"
  ]
  return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


def execute(path: pathlib.Path, timeout: int) -> float:
  """Runs `path` at full size and writes it back with its outputs; returns the seconds."""
  import nbclient
  import nbformat

  import optaug_jax as oj

  nb = nbformat.read(path, as_version=4)
  start = time.perf_counter()
  client = nbclient.NotebookClient(
    nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}
  )
  client.execute()
  seconds = time.perf_counter() - start
  nb.metadata[KEY] = {
    "code_digest": code_digest(nb),
    "version": oj.__version__,
    "executed": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    "seconds": round(seconds, 1),
  }
  nbformat.write(nb, path)
  return seconds


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("names", nargs="*", help="notebooks to run (default: every one)")
  parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
  args = parser.parse_args()
  os.environ.pop("OPTAUG_NOTEBOOK_QUICK", None)  # the kernels inherit the environment
  os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend stores the figures
  paths = [HERE / n for n in args.names] or sorted(HERE.glob("*.ipynb"))
  for path in paths:
    print(f"{path.name}: running at full size ...", flush=True)
    print(f"{path.name}: {execute(path, args.timeout):.0f} s", flush=True)


if __name__ == "__main__":
  main()
