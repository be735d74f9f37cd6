"""Unit tests of datasets.sst5: stsa reader, PTB-tree reader (hand-made tree fixture), views and counts."""

from __future__ import annotations

import pytest

from gru4rec_conformance.datasets.sst5 import (
    BINARY_MAP,
    EXPECTED_CLASS_COUNTS,
    EXPECTED_COUNTS,
    Examples,
    binary,
    check_counts,
    format_right_branching,
    load_sst,
    load_sst5,
    parse_tree,
    read_stsa,
    read_trees,
    trees_to_examples,
    write_root_trees,
)

TREES = {
    "train": [
        "(3 (2 it) (4 (2 's) (4 (3 great) (2 fun))))",
        "(1 (2 -LRB-) (1 (1 (2 not) (1 (2 a) (1 (1 good) (2 film)))) (2 -RRB-)))",
        "(2 (2 just) (2 okay))",
    ],
    "dev": ["(0 (0 awful) (2 .))", "(4 (4 brilliant) (2 !))"],
    "test": ["(3 (2 a) (3 (3 fine) (2 movie)))", "(2 neutral)"],
}


@pytest.fixture
def tree_dir(tmp_path):
    for split, lines in TREES.items():
        (tmp_path / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_parse_tree_root_and_nodes():
    t = parse_tree("(3 (2 it) (4 (2 's) (4 great)))")
    assert t.label == 3 and t.text() == "it 's great"
    assert t.labeled_lines() == [(3, "it 's great"), (2, "it"), (4, "'s great"), (2, "'s"), (4, "great")]


def test_bracket_tokens_normalised_like_pytreebank():
    t = parse_tree("(2 (2 -LRB-) (2 (2 x) (2 -RRB-)))")
    assert t.text() == "( x )"


@pytest.mark.parametrize(
    "line, col, msg",
    [
        ("(3 (2 it) (4 great)", 20, "expected ')'"),
        ("(x (2 it))", 2, "not a non-negative integer"),
        ("(3 (2 it)) extra", 12, "text after the end"),
        ("(3 (2 two words))", 7, "more than one word"),
    ],
)
def test_parse_errors_name_file_line_column(line, col, msg):
    with pytest.raises(ValueError) as e:
        parse_tree(line, source="trees.txt", lineno=7)
    assert f"trees.txt:7:{col}" in str(e.value) and msg in str(e.value)


def test_load_sst_tree_fixture(tree_dir):
    sst = load_sst(tree_dir)
    assert {k: len(v) for k, v in sst.items()} == {"train": 3, "dev": 2, "test": 2}
    root = trees_to_examples(sst["train"], "train")
    assert root.texts == ("it 's great fun", "( not a good film )", "just okay")
    assert root.labels == (3, 1, 2)
    allnodes = trees_to_examples(sst["dev"], "dev", mode="all")
    assert allnodes.labels == (0, 0, 2, 4, 4, 2) and allnodes.texts[0] == "awful ."


def test_load_sst_missing_file_named(tmp_path):
    (tmp_path / "train.txt").write_text("(2 a)\n")
    with pytest.raises(FileNotFoundError, match="dev.txt"):
        load_sst(tmp_path)


def test_bad_tree_file_names_line(tmp_path):
    p = tmp_path / "train.txt"
    p.write_text("(2 a)\n(3 (2 b)\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"train.txt:2:"):
        read_trees(p)


def test_right_branching_trees_round_trip(tmp_path):
    ex = Examples.from_lists(["a fine movie", "bad ( really )", "ok"], [3, 0, 2], split="train")
    write_root_trees(ex, tmp_path / "train.txt")
    back = trees_to_examples(read_trees(tmp_path / "train.txt"), "train")
    assert back.texts == ex.texts and back.labels == ex.labels
    assert format_right_branching(1, ["x", "y", "z"]) == "(1 (1 x) (1 (1 y) (1 z)))"


def test_read_stsa(tmp_path):
    p = tmp_path / "stsa.fine.dev"
    p.write_text("3 a fine movie\n0 awful -lrb- really -rrb-\n", encoding="utf-8")
    ex = read_stsa(p)
    assert ex.split == "dev" and ex.ids == ("dev-000001", "dev-000002")
    assert ex.texts[1] == "awful -lrb- really -rrb-" and ex.labels == (3, 0)


@pytest.mark.parametrize(
    "content, msg",
    [
        ("3 ok\nnospace\n", ":2: expected '<label> <sentence>'"),
        ("3 ok\n7 too big\n", ":2: label 7 outside 0..4"),
        ("x ok\n", ":1: label 'x' is not an integer"),
        ("3 ok\n\n2 fine\n", ":2: blank line"),
        ("3  \n", ":1: empty sentence"),
    ],
)
def test_stsa_errors_name_file_and_line(tmp_path, content, msg):
    p = tmp_path / "stsa.fine.train"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as e:
        read_stsa(p)
    assert str(p) in str(e.value) and msg in str(e.value)


def test_stsa_not_utf8(tmp_path):
    p = tmp_path / "stsa.fine.test"
    p.write_bytes(b"3 ok\n2 caf\xe9\n")
    with pytest.raises(ValueError, match=r"stsa.fine.test:2: not UTF-8"):
        read_stsa(p)


def test_binary_view_mapping():
    ex = Examples.from_lists(list("abcdefghij"), [0, 1, 2, 3, 4, 4, 3, 2, 1, 0])
    b = binary(ex)
    assert b.num_labels == 2 and 2 not in b.labels
    assert b.texts == tuple("abdefgij") and b.labels == (0, 0, 1, 1, 1, 1, 0, 0)
    assert BINARY_MAP == {0: 0, 1: 0, 3: 1, 4: 1}


def test_count_assertion_names_file():
    ex = Examples.from_lists(["a"], [1], split="test", source="/x/stsa.fine.test")
    with pytest.raises(ValueError, match=r"/x/stsa.fine.test: SST-5 fine test split has 1 examples, expected 2210"):
        check_counts({"test": ex}, "fine")


def test_real_sst5_counts(sst5_full):
    assert {k: len(v) for k, v in sst5_full.items()} == EXPECTED_COUNTS["fine"]
    assert {k: v.class_counts() for k, v in sst5_full.items()} == EXPECTED_CLASS_COUNTS
    b = load_sst5(view="binary")
    assert {k: len(v) for k, v in b.items()} == EXPECTED_COUNTS["binary"]


def test_real_sst5_hashes_match_readme(sst5_full):
    from gru4rec_conformance.datasets.sst5 import data_hashes, sst5_dir

    h = data_hashes(sst5_dir())
    assert h["stsa.fine.test"] == "0e2ebb450c231f7b3d67fc932066e7bb26ae7bad8c88488f45ed44ef02eb3c73"
