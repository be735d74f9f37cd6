"""PTB-style sentiment trees (the Stanford Sentiment Treebank's trees/{train,dev,test}.txt), read the way
pytreebank 0.2.7 reads them (docs/finetuner.md, 'The studied pipeline', Data loading; 'Reference behaviour', item 1), without downloading anything.

A tree line looks like ``(3 (2 it) (4 (2 's) (4 great)))``: every node is ``(label children...)`` and a leaf is
``(label word)``. As in pytreebank, bracket tokens (-LRB-, -RRB-, -LCB-, -RCB-, -LSB-, -RSB-) become the
characters again, non-breaking spaces become spaces and backslashes are removed; the sentence of a node is its
leaves joined by single spaces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from gru4rec_conformance.fileio import atomic_write_text

from .examples import Examples

#: pytreebank's ``normalize_string`` replacements, in its order.
_NORMALIZE = (
    ("\xa0", " "),
    ("\\", ""),
    ("-LRB-", "("),
    ("-RRB-", ")"),
    ("-LCB-", "{"),
    ("-RCB-", "}"),
    ("-LSB-", "["),
    ("-RSB-", "]"),
)


def _normalize(token: str) -> str:
    for old, new in _NORMALIZE:
        token = token.replace(old, new)
    return token


@dataclass
class Tree:
    """A labelled constituency tree node.

    Attributes:
        label: sentiment label of the node (0..4 in SST).
        children: child nodes (empty for a leaf).
        word: the leaf's (normalised) word, ``None`` for inner nodes.
    """

    label: int
    children: list[Tree] = field(default_factory=list)
    word: str | None = None

    def words(self) -> list[str]:
        """The leaves' words, left to right."""
        if not self.children:
            return [self.word] if self.word is not None else []
        out: list[str] = []
        for c in self.children:
            out.extend(c.words())
        return out

    def text(self) -> str:
        """The node's phrase: its leaves joined by single spaces."""
        return " ".join(self.words())

    def labeled_lines(self) -> list[tuple[int, str]]:
        """(label, phrase) for this node and every descendant, pre-order (pytreebank ``to_labeled_lines``)."""
        out = [(self.label, self.text())]
        for c in self.children:
            out.extend(c.labeled_lines())
        return out


def parse_tree(line: str, *, source: str = "<string>", lineno: int = 1) -> Tree:
    """Parse one PTB tree line.

    Raises:
        ValueError: naming ``source:lineno`` and the column for unbalanced parentheses, a node without an
            integer label, a leaf with more than one word, or text after the tree.
    """
    n = len(line)

    def err(msg: str, col: int) -> ValueError:
        return ValueError(f"{source}:{lineno}:{col + 1}: {msg}")

    def skip_ws(i: int) -> int:
        while i < n and line[i] in " \t\r\n":
            i += 1
        return i

    def node(i: int) -> tuple[Tree, int]:
        if i >= n or line[i] != "(":
            raise err("expected '('", i)
        i = skip_ws(i + 1)
        j = i
        while j < n and line[j] not in " ()\t":
            j += 1
        label_str = line[i:j]
        if not label_str.isdigit():
            raise err(f"node label {label_str!r} is not a non-negative integer", i)
        t = Tree(int(label_str))
        i = skip_ws(j)
        if i < n and line[i] == "(":
            while i < n and line[i] == "(":
                child, i = node(i)
                t.children.append(child)
                i = skip_ws(i)
        else:
            j = i
            while j < n and line[j] not in "()":
                j += 1
            word = line[i:j].strip()
            if not word:
                raise err("leaf without a word", i)
            if " " in word:
                raise err(f"leaf holds more than one word: {word!r}", i)
            t.word = _normalize(word)
            i = j
        if i >= n or line[i] != ")":
            raise err("unbalanced parentheses: expected ')'", min(i, n))
        return t, i + 1

    start = skip_ws(0)
    tree, end = node(start)
    end = skip_ws(end)
    if end != n:
        raise err("text after the end of the tree (unbalanced parentheses?)", end)
    return tree


def read_trees(path: str | os.PathLike) -> list[Tree]:
    """Read a PTB tree file (one tree per line, UTF-8; blank lines skipped).

    Raises ``ValueError`` naming the file, line and column of the first malformed tree or undecodable line.
    """
    path = os.fspath(path)
    trees = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not UTF-8 at byte {e.start} of the line") from None
            if line.strip():
                trees.append(parse_tree(line, source=path, lineno=lineno))
    return trees


def load_sst(directory: str | os.PathLike) -> dict[str, list[Tree]]:
    """Read ``directory``/train.txt, dev.txt and test.txt (pytreebank's ``load_sst(path)`` layout), offline.

    Raises:
        FileNotFoundError: naming every missing file (nothing is downloaded, unlike pytreebank).
    """
    directory = os.fspath(directory)
    paths = {s: os.path.join(directory, f"{s}.txt") for s in ("train", "dev", "test")}
    missing = [p for p in paths.values() if not os.path.isfile(p)]
    if missing:
        raise FileNotFoundError(f"SST tree files missing: {', '.join(missing)}")
    return {s: read_trees(p) for s, p in paths.items()}


def trees_to_examples(trees: list[Tree], split: str, *, mode: str = "root", source: str = "") -> Examples:
    """Turn trees into fine-grained ``Examples``.

    Args:
        mode: ``'root'`` (one example per tree: whole sentence, root label; the SST-5 root task) or
            ``'all'`` (every node's (label, phrase), pytreebank's all-nodes expansion).

    Raises ``ValueError`` for an unknown mode or a label outside 0..4.
    """
    if mode not in ("root", "all"):
        raise ValueError(f"mode must be 'root' or 'all', got {mode!r}")
    ids, texts, labels = [], [], []
    for t_i, tree in enumerate(trees, start=1):
        pairs = [(tree.label, tree.text())] if mode == "root" else tree.labeled_lines()
        for p_i, (label, text) in enumerate(pairs):
            ids.append(f"{split}-{t_i:06d}" if mode == "root" else f"{split}-{t_i:06d}-{p_i:03d}")
            texts.append(text)
            labels.append(label)
    return Examples(split, tuple(ids), tuple(texts), tuple(labels), 5, source=source)


def _escape(word: str) -> str:
    return word.replace("(", "-LRB-").replace(")", "-RRB-")


def format_right_branching(label: int, words: list[str]) -> str:
    """A binary right-branching tree with ``label`` on every node, e.g. ``(3 (3 a) (3 (3 b) (3 c)))``.

    pytreebank joins only the first two children of a node, so trees written for it must be binary.
    Only the root label carries information (the node labels of the real SST are not in the stsa files).

    Raises ``ValueError`` for an empty word list.
    """
    if not words:
        raise ValueError("a tree needs at least one word")
    leaf = lambda w: f"({label} {_escape(w)})"  # noqa: E731
    out = leaf(words[-1])
    for w in reversed(words[:-1]):
        out = f"({label} {leaf(w)} {out})"
    return out


def write_root_trees(examples: Examples, path: str | os.PathLike) -> None:
    """Write ``examples`` as one right-branching tree per line (root label = the example's label), atomically.

    This turns stsa sentences into files that tree readers (pytreebank, ``load_sst``) accept; it is the data
    shim of the third-party adapters, whose code reads trees. Only root mode is meaningful on such files.
    """
    lines = [format_right_branching(y, t.split()) for t, y in zip(examples.texts, examples.labels)]
    atomic_write_text(path, "\n".join(lines) + "\n")
