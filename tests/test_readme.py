"""The README's and the documentation's Python code runs, and prints what it shows (as
doctest would).

The README's ```python blocks run in one namespace of a fresh interpreter with JAX's
defaults; each page of the documentation (`PAGES`) runs its blocks after them, in a
fresh interpreter of its own (a reader who ran the README's example and opened that page;
later blocks use the names of earlier ones). A block followed by a ```text block must
print exactly that text. The README's example runs in the default suite; every page in
the slow one.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# The pages of the documentation with Python blocks (each run after the README's).
PAGES = (
  "docs/getting-started.md",
  "docs/guides/own-cmdp.md",
  "docs/guides/own-algorithm.md",
  "docs/guides/large-sparse.md",
  "docs/guides/linear.md",
  "docs/guides/devices.md",
  "docs/guides/gradients.md",
  "docs/guides/experiments.md",
  "docs/algorithms.md",
)


def test_every_page_with_python_is_listed():
  pages = sorted((ROOT / "docs").rglob("*.md"))
  with_python = {str(p.relative_to(ROOT)) for p in pages if "```python" in p.read_text()}
  assert with_python <= set(PAGES), with_python - set(PAGES)


def _blocks(pages=("README.md",)):
  """`(python source, expected output or None)` for each python block, in order."""
  text = "\n".join((ROOT / page).read_text() for page in pages)
  fences = [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]
  out = []
  for i, (kind, body) in enumerate(fences):
    if kind != "python":
      continue
    following = fences[i + 1] if i + 1 < len(fences) else None
    expected = following[1] if following and following[0] == "text" else None
    out.append((body, expected))
  return out


_RUNNER = """
import contextlib, io, json, sys
blocks = json.load(sys.stdin)
namespace = {}
for source in blocks:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "README.md", "exec"), namespace)
    sys.stdout.write(json.dumps(printed.getvalue()) + "\\n")
"""


def _run(blocks):
  """Runs the blocks as a reader would: a fresh interpreter with JAX's defaults (float32;
  the test suite's own process runs in float64)."""
  env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
  out = subprocess.run(
    [sys.executable, "-c", _RUNNER],
    input=json.dumps([b for b, _ in blocks]),
    env=env,
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=1200,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  printed = [json.loads(line) for line in out.stdout.splitlines()]
  assert len(printed) == len(blocks)
  for (source, expected), got in zip(blocks, printed):
    if expected is not None:
      assert got == expected, f"README block:\n{source}"


def test_the_readme_has_a_quick_start_with_its_output():
  blocks = _blocks()
  assert len(blocks) >= 1 and len(_blocks(PAGES)) >= 7
  assert "oj.optaug(" in blocks[0][0] and blocks[0][1] is not None


def test_quick_start_prints_what_the_readme_shows():
  _run(_blocks()[:1])


@pytest.mark.slow
def test_every_python_block_of_the_readme_runs_and_prints_what_it_shows():
  _run(_blocks())


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if "```python" in (ROOT / p).read_text()])
def test_every_python_block_of_a_page_runs_after_the_readme_and_prints_what_it_shows(page):
  _run(_blocks(("README.md", page)))
