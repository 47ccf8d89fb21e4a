"""The notebooks execute top to bottom at small sizes (OPTAUG_NOTEBOOK_QUICK=1, slow), and
the outputs stored for the site come from their current cells (`notebooks/execute.py`)."""

import json
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).parent.parent / "notebooks"
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))
sys.path.insert(0, str(HERE))
import execute  # noqa: E402  (notebooks/execute.py: the digest of a notebook's code cells)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, monkeypatch):
  nbformat = pytest.importorskip("nbformat")
  nbclient = pytest.importorskip("nbclient")
  monkeypatch.setenv("OPTAUG_NOTEBOOK_QUICK", "1")
  monkeypatch.setenv("MPLBACKEND", "Agg")
  nb = nbformat.read(path, as_version=4)
  client = nbclient.NotebookClient(
    nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
  )
  client.execute()
  errors = [
    o
    for c in nb.cells
    if c.cell_type == "code"
    for o in c.get("outputs", [])
    if o.get("output_type") == "error"
  ]
  assert not errors


def test_there_are_notebooks():
  assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_stored_outputs_come_from_the_current_cells(path):
  """What the site renders: every code cell ran (in order, none failed) at full size, and
  the cells are those that ran (`python notebooks/execute.py NAME` stores them again)."""
  nb = json.loads(path.read_text())
  stored = nb["metadata"].get(execute.KEY, {})
  assert stored.get("code_digest") == execute.code_digest(nb), (
    f"{path.name}: its code cells changed since their outputs were stored;"
    f" run python notebooks/execute.py {path.name}"
  )
  code = [c for c in nb["cells"] if c["cell_type"] == "code"]
  assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
  assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
  changed = json.loads(json.dumps(nb))
  first = [c["cell_type"] for c in nb["cells"]].index("code")
  changed["cells"][first]["source"] = "".join(nb["cells"][first]["source"]) + "\n# x"
  assert execute.code_digest(changed) != stored["code_digest"]
