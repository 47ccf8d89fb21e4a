"""The results pages follow one shape: the claim in a paragraph first, the command that
regenerates it, and the machine and commit it was measured on (docs/results/README.md)."""

import pathlib
import re

import pytest

RESULTS = pathlib.Path(__file__).parent.parent / "docs" / "results"
PAGES = sorted(p for p in RESULTS.rglob("README.md") if p != RESULTS / "README.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.parent.relative_to(RESULTS).as_posix())
def test_a_results_page_states_its_claim_command_and_machine(page):
  text = page.read_text()
  lines = text.splitlines()
  assert lines[0].startswith("# "), "a title first"
  first = next(line for line in lines[1:] if line.strip())
  assert first.startswith("**Claim.**"), f"the claim's paragraph comes first, not {first!r}"
  assert "```" in text or "`python experiments/" in text, "the command that regenerates it"
  assert re.search(r"machine and commit", text, re.I), "the machine and commit"


def test_the_index_links_every_results_page():
  index = (RESULTS / "README.md").read_text()
  linked = {m for m in re.findall(r"\]\(([^)#]+README\.md)", index)}
  missing = [p.relative_to(RESULTS).as_posix() for p in PAGES]
  missing = [p for p in missing if p not in linked]
  assert not missing, f"pages the index does not link: {missing}"
