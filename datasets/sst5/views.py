"""Fine-grained and binary views of SST, and the count assertions (docs/finetuner.md, 'The studied pipeline', Label mapping; 'Reference behaviour')."""

from __future__ import annotations

import os
from pathlib import Path

from gru4rec_conformance.fileio import sha256_file

from ..paths import shared_data_candidate, shared_data_dir
from .examples import Examples
from .stsa import read_stsa

#: Binary mapping of the studied code (Munikar ``get_binary_label``): neutral (2) is dropped before mapping.
BINARY_MAP = {0: 0, 1: 0, 3: 1, 4: 1}

#: Root-level sentence counts of the standard splits (FT-6 in docs/checks.md; docs/finetuner.md, 'Reference behaviour', item 1).
EXPECTED_COUNTS = {
    "fine": {"train": 8544, "dev": 1101, "test": 2210},
    "binary": {"train": 6920, "dev": 872, "test": 1821},
}

#: Class counts of the stsa.fine files (shared/data/sst5/README.md), labels 0..4.
EXPECTED_CLASS_COUNTS = {
    "train": [1092, 2218, 1624, 2322, 1288],
    "dev": [139, 289, 229, 279, 165],
    "test": [279, 633, 389, 510, 399],
}

SPLITS = ("train", "dev", "test")


def fine_grained(examples: Examples) -> Examples:
    """The 5-class view: labels 0..4 unchanged. Raises ``ValueError`` if ``examples`` is not 5-class."""
    if examples.num_labels != 5:
        raise ValueError(
            f"{examples.source or examples.split}: fine-grained view needs 5-class input, "
            f"got num_labels={examples.num_labels}"
        )
    return examples


def binary(examples: Examples) -> Examples:
    """The 2-class view: neutral (label 2) examples removed, {0,1} -> 0, {3,4} -> 1; ids are kept.

    Raises ``ValueError`` if ``examples`` is not 5-class.
    """
    if examples.num_labels != 5:
        raise ValueError(
            f"{examples.source or examples.split}: binary view needs 5-class input, "
            f"got num_labels={examples.num_labels}"
        )
    keep = [i for i, y in enumerate(examples.labels) if y != 2]
    sub = examples.subset(keep)
    return Examples(sub.split, sub.ids, sub.texts, tuple(BINARY_MAP[y] for y in sub.labels), 2, sub.source)


def check_counts(splits: dict[str, Examples], view: str) -> None:
    """Assert the standard split sizes of ``view`` ('fine' or 'binary').

    Raises ``ValueError`` naming the split, its source file, the expected and the found count.
    """
    expected = EXPECTED_COUNTS[view]
    for name, ex in splits.items():
        if name in expected and len(ex) != expected[name]:
            raise ValueError(
                f"{ex.source or name}: SST-5 {view} {name} split has {len(ex)} examples, expected {expected[name]}"
            )


def sst5_dir() -> Path | None:
    """``<shared data>/sst5`` if it holds the three stsa.fine files, else ``None``.

    The shared data folder is :func:`datasets.shared_data_dir` (env ``GRU4REC_SHARED_DATA``, else
    ``<repo>/../shared/data``).
    """
    base = shared_data_dir()
    if base is None:
        return None
    d = base / "sst5"
    return d if all((d / f"stsa.fine.{s}").is_file() for s in SPLITS) else None


def load_sst5(
    data_dir: str | os.PathLike | None = None, *, view: str = "fine", check: bool = True
) -> dict[str, Examples]:
    """Read stsa.fine.{train,dev,test} from ``data_dir`` (default: ``sst5_dir()``) and return the ``view``.

    Args:
        view: ``'fine'`` (5 classes) or ``'binary'`` (neutral removed, 2 classes).
        check: assert the standard counts (8544/1101/2210, binary 6920/872/1821).

    Raises:
        FileNotFoundError: no data directory found (names the path looked at and GRU4REC_SHARED_DATA).
        ValueError: bad lines (file:line) or wrong counts.
    """
    if view not in EXPECTED_COUNTS:
        raise ValueError(f"view must be 'fine' or 'binary', got {view!r}")
    if data_dir is None:
        data_dir = sst5_dir()
        if data_dir is None:
            raise FileNotFoundError(
                f"SST-5 files not found in {shared_data_candidate() / 'sst5'}: set "
                "GRU4REC_SHARED_DATA to the folder holding sst5/stsa.fine.{train,dev,test}"
            )
    data_dir = Path(data_dir)
    splits = {s: read_stsa(data_dir / f"stsa.fine.{s}", split=s) for s in SPLITS}
    if view == "binary":
        splits = {s: binary(ex) for s, ex in splits.items()}
    if check:
        check_counts(splits, view)
    return splits


def data_hashes(data_dir: str | os.PathLike) -> dict[str, str]:
    """sha256 of each stsa.fine file in ``data_dir`` (for manifests)."""
    return {f"stsa.fine.{s}": sha256_file(Path(data_dir) / f"stsa.fine.{s}") for s in SPLITS}
