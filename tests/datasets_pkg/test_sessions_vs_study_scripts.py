"""Differential test against the study's own preprocessing scripts (hidasib/gru4rec_third_party_comparison,
``<name>_preproc.py``), run from a checkout outside this repository on the same synthetic raw files.

Opt-in (skipped otherwise, with the reason): set
- ``GRU4REC_STUDY_REPO`` to a checkout of that repository, or to its bare mirror (scripts are read with
  ``git show HEAD:<file>`` into a temporary folder), and
- ``GRU4REC_STUDY_PYTHON`` to an interpreter with pandas < 3 (the scripts use ``Series.view``, removed in pandas 3,
  and the nanosecond idiom that is only right with pandas < 3).

The study's outputs (TSV) must equal ours row by row (SessionId, ItemId, Time, in order) for all five datasets,
including the Yoochoose removal by duplicated index label.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from gru4rec_conformance.datasets.sessions.pipeline import DATASETS, SPLITS, STUDY_PREFIX, prepare
from gru4rec_conformance.datasets.sessions.readers import RAW_FILES

REPO = os.environ.get("GRU4REC_STUDY_REPO", "")
PY = os.environ.get("GRU4REC_STUDY_PYTHON", "")
pytestmark = pytest.mark.skipif(
    not (REPO and PY and Path(REPO).exists() and Path(PY).exists()),
    reason="opt-in: set GRU4REC_STUDY_REPO (checkout or mirror of hidasib/gru4rec_third_party_comparison) and "
    "GRU4REC_STUDY_PYTHON (an interpreter with pandas < 3)",
)


def _script(name: str, dest: Path) -> Path:
    fname = f"{name}_preproc.py"
    src = Path(REPO) / fname
    out = dest / fname
    if src.is_file():
        shutil.copy(src, out)
    else:
        text = subprocess.run(
            ["git", f"--git-dir={REPO}", "show", f"HEAD:{fname}"], capture_output=True, text=True, check=True
        ).stdout
        out.write_text(text)
    return out


@pytest.mark.parametrize("name", DATASETS)
def test_same_outputs_as_the_study_script(name, synthetic_raw, tmp_path):
    raw = synthetic_raw(name)
    work = tmp_path / "study"
    work.mkdir()
    for f in RAW_FILES[name]:
        shutil.copy(raw / f, work / f)
    script = _script(name, tmp_path)
    r = subprocess.run([PY, str(script), "-p", str(work)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    ours = prepare(name, raw, tmp_path / "ours")
    for part in ("full",) + SPLITS:
        theirs = pd.read_csv(
            work / f"{STUDY_PREFIX[name]}_{part}.tsv",
            sep="\t",
            dtype={"SessionId": "int64", "ItemId": "int64", "Time": "int64"},
        )
        pd.testing.assert_frame_equal(ours.load(part), theirs, obj=f"{name}/{part}")
    # the stats table too (the study writes it with 4 decimals, rows in glob order)
    theirs = pd.read_csv(work / "stats.tsv", sep="\t").set_index("Dataset").sort_index()
    mine = pd.read_csv(ours.out_dir / "stats.tsv", sep="\t").set_index("Dataset").sort_index()
    pd.testing.assert_frame_equal(mine, theirs, check_dtype=False, atol=1e-4)
