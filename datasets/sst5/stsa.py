"""Reader for the ``stsa`` SST files: one ``<label> <sentence>`` per line (docs/finetuner.md, 'Reference behaviour' item 1, 'Offline resources')."""

from __future__ import annotations

import os

from .examples import Examples


def read_stsa(path: str | os.PathLike, *, split: str | None = None, num_labels: int = 5) -> Examples:
    """Read an stsa file (UTF-8, ``label`` then one space then the sentence, one example per line).

    Args:
        path: the file, e.g. ``.../sst5/stsa.fine.test``.
        split: split name for the ids; defaults to the file's last suffix (``test`` for ``stsa.fine.test``).
        num_labels: 5 for stsa.fine.*, 2 for stsa.binary.*.

    Returns:
        ``Examples`` in file order; ids are ``'<split>-<line number>'`` (1-based, 6 digits).

    Raises:
        ValueError: naming the file and line for an undecodable byte, a line without a space, a label that is
            not an integer in 0..num_labels-1, or an empty sentence. Blank lines are errors too (they would
            shift every id after them).
    """
    path = os.fspath(path)
    if split is None:
        split = os.path.basename(path).rsplit(".", 1)[-1]
    with open(path, "rb") as f:
        raw = f.read()
    ids, texts, labels = [], [], []
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line and lineno == raw.count(b"\n") + 1:
            break  # the newline that ends the last line
        try:
            text_line = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}:{lineno}: not UTF-8 at byte {e.start} of the line") from None
        if not text_line.strip():
            raise ValueError(f"{path}:{lineno}: blank line (every line must be '<label> <sentence>')")
        label_str, sep, sentence = text_line.partition(" ")
        if not sep:
            raise ValueError(f"{path}:{lineno}: expected '<label> <sentence>', found no space: {text_line[:60]!r}")
        try:
            label = int(label_str)
        except ValueError:
            raise ValueError(f"{path}:{lineno}: label {label_str[:20]!r} is not an integer") from None
        if not 0 <= label < num_labels:
            raise ValueError(f"{path}:{lineno}: label {label} outside 0..{num_labels - 1}")
        if not sentence.strip():
            raise ValueError(f"{path}:{lineno}: empty sentence")
        ids.append(f"{split}-{lineno:06d}")
        texts.append(sentence)
        labels.append(label)
    return Examples(split, tuple(ids), tuple(texts), tuple(labels), num_labels, source=path)
