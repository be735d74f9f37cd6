"""CITATION.cff names the suite at the version pyproject.toml declares (the two are edited by hand)."""

from __future__ import annotations

import re
from pathlib import Path

import gru4rec_conformance

REPO = Path(__file__).resolve().parents[1]


def test_citation_version_and_license_match_pyproject():
    text = (REPO / "CITATION.cff").read_text(encoding="utf-8")
    assert re.search(r"^cff-version: 1\.2\.0$", text, re.M)
    assert re.search(r"^title: gru4rec-conformance$", text, re.M)
    version = re.search(r'^version: "([^"]+)"$', text, re.M)
    assert version and version.group(1) == gru4rec_conformance.__version__, (
        "CITATION.cff's version differs from pyproject.toml's [project] version"
    )
    assert re.search(r"^license: MIT$", text, re.M)
    assert "doi: 10.1145/3604915.3609487" in text and "1511.06939" in text
