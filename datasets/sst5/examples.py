"""The in-memory form of a labelled sentence split, shared by every SST-5 reader and view."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Examples:
    """One split of labelled sentences, in file order.

    Attributes:
        split: split name ('train', 'dev', 'test', or any name a caller gives a slice).
        ids: one stable id per example (str), e.g. ``'test-000017'`` (split and 1-based line number of the
            source file); prediction files have one row per id.
        texts: the sentences (str), exactly as read (no markers, no case change).
        labels: int class labels, 0..num_labels-1.
        num_labels: 5 for the fine-grained view, 2 for the binary view.
        source: where the examples came from (file path or a description), for error messages and manifests.

    Raises ``ValueError`` when the three sequences differ in length or a label is out of range.
    """

    split: str
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    labels: tuple[int, ...]
    num_labels: int = 5
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not (len(self.ids) == len(self.texts) == len(self.labels)):
            raise ValueError(
                f"{self.source or self.split}: ids/texts/labels lengths differ "
                f"({len(self.ids)}/{len(self.texts)}/{len(self.labels)})"
            )
        for i, y in enumerate(self.labels):
            if not 0 <= int(y) < self.num_labels:
                raise ValueError(
                    f"{self.source or self.split}: example {self.ids[i]!r} has label {y}, "
                    f"outside 0..{self.num_labels - 1}"
                )

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def from_lists(
        cls,
        texts: Sequence[str],
        labels: Sequence[int],
        *,
        split: str = "data",
        ids: Sequence[str] | None = None,
        num_labels: int = 5,
        source: str = "",
    ) -> Examples:
        """Build from plain lists; ids default to ``'<split>-<1-based index>'``."""
        if ids is None:
            ids = [f"{split}-{i + 1:06d}" for i in range(len(texts))]
        return cls(split, tuple(ids), tuple(texts), tuple(int(y) for y in labels), num_labels, source)

    def subset(self, indices: Iterable[int], *, split: str | None = None) -> Examples:
        """The examples at ``indices`` (in that order), keeping their ids."""
        idx = list(indices)
        return Examples(
            split or self.split,
            tuple(self.ids[i] for i in idx),
            tuple(self.texts[i] for i in idx),
            tuple(self.labels[i] for i in idx),
            self.num_labels,
            self.source,
        )

    def head(self, n: int) -> Examples:
        """The first ``n`` examples (a small slice for fast checks)."""
        return self.subset(range(min(n, len(self))))

    def with_labels(self, labels: Sequence[int]) -> Examples:
        """Same ids and texts with other labels (used by the shuffled-test-label checks)."""
        return Examples(self.split, self.ids, self.texts, tuple(int(y) for y in labels), self.num_labels, self.source)

    def class_counts(self) -> list[int]:
        """Number of examples per class, index = label."""
        counts = [0] * self.num_labels
        for y in self.labels:
            counts[y] += 1
        return counts

    def content_hash(self) -> str:
        """sha256 (hex) of ids, texts, labels and num_labels: identifies a split in manifests."""
        payload = json.dumps([self.ids, self.texts, self.labels, self.num_labels], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()
