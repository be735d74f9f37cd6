"""Full-data acceptance (docs/datasets.md, 'Published statistics'): the study's preprocessing of the real full raw files
reproduces the published train_full / test statistics (events, sessions, days, items).

The raw files of a dataset are looked for in ``$GRU4REC_FULL_DATA/<name>/`` and in ``<shared>/sessions/<name>/full/``
(found by original name or by content, as ``prepare --raw`` finds them); the test is skipped, naming the paths
looked at, when neither holds all the dataset's inputs. Prepared outputs are cached in
``$GRU4REC_FULL_DATA/<name>/prepared`` when that folder is writable (``prepare``'s content-hash cache), else in a
temporary folder. Yoochoose and Rees46 need 16-32 GB of memory and tens of minutes (docs/datasets.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gru4rec_conformance.datasets.paths import shared_data_candidate
from gru4rec_conformance.datasets.sessions.inputs import MissingInputError, resolve_inputs
from gru4rec_conformance.datasets.sessions.pipeline import prepare

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = json.loads((ROOT / "datasets" / "sessions" / "study_stats.json").read_text())["published"]
#: "exactly, or within a handful of events where the raw files differ" (docs/datasets.md, 'Published statistics')
SLACK_REL, SLACK_ABS = 5e-4, 10


def _raw_dir(name: str) -> Path:
    looked = []
    env = os.environ.get("GRU4REC_FULL_DATA", "").strip()
    cands = ([Path(env) / name] if env else []) + [shared_data_candidate() / "sessions" / name / "full"]
    for d in cands:
        looked.append(str(d))
        if d.is_dir():
            try:
                resolve_inputs(name, d)
                return d
            except MissingInputError as e:
                looked[-1] += f" ({str(e).splitlines()[0]})"
    pytest.skip(f"real full {name} raw files absent: looked in {'; '.join(looked)} (set GRU4REC_FULL_DATA)")


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= max(SLACK_ABS, SLACK_REL * want)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["yoochoose", "rees46", "coveo", "retailrocket", "diginetica"])
def test_full_data_reproduces_the_published_statistics(name, tmp_path):
    raw = _raw_dir(name)
    out = raw / "prepared" if os.access(raw, os.W_OK) else tmp_path / "prepared"
    res = prepare(name, raw, out)
    pub = PUBLISHED[name]
    stats = res.stats.set_index("Dataset")
    prefix = stats.index[0].rsplit("_full.tsv", 1)[0]
    bad = []
    for part, key in (("train_full", "train"), ("test", "test")):
        row = stats.loc[f"{prefix}_{part}.tsv"]
        want = pub[key]
        for col, field in (("NumEvents", "events"), ("NumSessions", "sessions")):
            if not _close(int(row[col]), want[field]):
                bad.append(f"{part} {field}: {int(row[col]):,} vs published {want[field]:,}")
        if round(float(row["NumDays"])) != want["days"]:
            bad.append(f"{part} days: {float(row['NumDays']):.2f} vs published {want['days']}")
    # the paper's #Items does not say of which part: the full data's or train_full's count must match
    items = {p: int(stats.loc[f"{prefix}_{p}.tsv", "NumItems"]) for p in ("full", "train_full")}
    if not any(_close(n, pub["items"]) for n in items.values()):
        bad.append(f"items: {items} vs published {pub['items']:,}")
    assert not bad, f"{name} ({raw}): " + "; ".join(bad)
