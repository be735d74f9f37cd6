"""The synthetic SST-5 stand-in (datasets/sst5/standin.py): stsa format read back by the real reader, determinism,
class balance, lengths, duplicates, a learnable sentiment signal, the cache folder and the fallback."""

from __future__ import annotations

import collections
import os
import time

import numpy as np
import pytest

from gru4rec_conformance.datasets.sst5 import (
    EXPECTED_CLASS_COUNTS,
    SPLITS,
    STANDIN_CLASS_COUNTS,
    STANDIN_NAME,
    binary,
    generate_standin,
    load_sst5,
    load_sst5_or_standin,
    read_stsa,
    standin_dir,
    write_standin,
)


@pytest.fixture(scope="module")
def standin():
    return generate_standin(0)


@pytest.fixture(scope="module")
def standin_files(tmp_path_factory):
    d = write_standin(tmp_path_factory.mktemp("standin"), seed=0)
    return d, load_sst5(d, check=False)


def test_round_trip_through_the_stsa_reader(standin, standin_files):
    """The files hold exactly the generated (label, sentence) pairs, one '<label> <sentence>' line each, read back
    by read_stsa / load_sst5 with ids '<split>-<line>'."""
    d, splits = standin_files
    for split in SPLITS:
        raw = (d / f"stsa.fine.{split}").read_bytes()
        assert raw.endswith(b"\n") and b"\r" not in raw and b"\n\n" not in raw
        raw.decode("utf-8")
        ex = splits[split]
        assert list(zip(ex.labels, ex.texts)) == standin[split]
        assert ex.ids[0] == f"{split}-000001" and ex.ids[-1] == f"{split}-{len(ex):06d}"
        assert read_stsa(d / f"stsa.fine.{split}") == ex
    binary_view = load_sst5(d, view="binary", check=False)
    assert all(set(b.labels) == {0, 1} and b.num_labels == 2 for b in binary_view.values())


def test_sentences_look_like_the_real_files(standin):
    """Lower-cased, single-spaced, PTB-tokenised text (``n't`` split off), some non-ASCII, no empty sentence."""
    texts = [t for split in SPLITS for _, t in standin[split]]
    assert all(t == t.lower() and t == t.strip() and "  " not in t and t for t in texts)
    joined = " ".join(texts)
    for token in (" n't ", " 's ", " , ", "-lrb-", "-rrb-"):
        assert token in f" {joined} ", f"no {token.strip()!r} token"
    assert not any(w in joined.split() for w in ("don't", "it's", "(", ")"))
    assert 0 < sum(any(ord(c) > 127 for c in t) for t in texts) < 0.05 * len(texts)


def test_deterministic_for_a_seed(tmp_path, standin):
    assert generate_standin(0) == standin
    assert generate_standin(1) != standin
    a, b = write_standin(tmp_path / "a", 0), write_standin(tmp_path / "b", 0)
    for split in SPLITS:
        assert (a / f"stsa.fine.{split}").read_bytes() == (b / f"stsa.fine.{split}").read_bytes()


def test_class_counts_and_balance(standin):
    """Class counts are the real ones / 5; the leading 64 / 32 sentences (the fast checks' slices) have about the
    split's class proportions; the binary view keeps about 80% of each split, as on the real data."""
    for split in SPLITS:
        labels = [y for y, _ in standin[split]]
        counts = collections.Counter(labels)
        assert [counts[c] for c in range(5)] == STANDIN_CLASS_COUNTS[split]
        real = np.array(EXPECTED_CLASS_COUNTS[split]) / sum(EXPECTED_CLASS_COUNTS[split])
        assert np.abs(np.array(STANDIN_CLASS_COUNTS[split]) / len(labels) - real).max() < 0.01
        head = 64 if split == "train" else 32
        h = collections.Counter(labels[:head])
        assert all(abs(h[c] - head * real[c]) <= 1.5 for c in range(5)), f"{split} head classes {h}"
        kept = sum(y != 2 for y in labels) / len(labels)
        assert abs(kept - (1 - real[2])) < 0.01


def test_lengths_spread_like_the_real_data(standin):
    """Tokens per sentence close to the real 5/50/95th percentiles (6/18/35, max 56), and the joined test
    sentences of the fast checks' slices are longer than 66 tokens (so truncation happens)."""
    from gru4rec_conformance.conformance.finetuner.support import make_slices

    lens = np.array([len(t.split()) for split in SPLITS for _, t in standin[split]])
    p5, p50, p95 = np.percentile(lens, [5, 50, 95])
    assert 4 <= p5 <= 10 and 15 <= p50 <= 21 and 30 <= p95 <= 40, (p5, p50, p95)
    assert 2 <= lens.min() and 45 <= lens.max() <= 60
    test = load_like(standin)
    slices = make_slices(test)
    longs = [len(t.split()) for t in slices.test.texts[-3:]]
    assert max(longs) > 66, longs


def load_like(standin):
    from gru4rec_conformance.datasets.sst5 import Examples

    return {s: Examples.from_lists([t for _, t in standin[s]], [y for y, _ in standin[s]], split=s) for s in SPLITS}


def test_duplicates_only_inside_train(standin):
    """Two duplicated train sentences (same label), none in dev or test, none shared between splits."""
    train = collections.Counter(standin["train"])
    assert sorted(n for n in train.values() if n > 1) == [2, 2]
    assert len({t for _, t in standin["train"]}) == len(standin["train"]) - 2
    for split in ("dev", "test"):
        texts = [t for _, t in standin[split]]
        assert len(set(texts)) == len(texts)
    sets = {s: {t for _, t in standin[s]} for s in SPLITS}
    assert not (sets["train"] & sets["dev"]) and not (sets["train"] & sets["test"]) and not (sets["dev"] & sets["test"])


def test_sentiment_is_learnable(standin):
    """A bag-of-words classifier trained on train beats the majority rate by far on test (5 classes and binary);
    with shuffled training labels it does not (the signal is in the words, not in the class priors)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    splits = load_like(standin)
    vec = CountVectorizer(token_pattern=r"\S+")
    x_train = vec.fit_transform(splits["train"].texts)
    x_test = vec.transform(splits["test"].texts)
    y_train, y_test = np.array(splits["train"].labels), np.array(splits["test"].labels)
    majority = np.bincount(y_test).max() / len(y_test)
    acc = LogisticRegression(max_iter=2000).fit(x_train, y_train).score(x_test, y_test)
    shuffled = np.random.default_rng(0).permutation(y_train)
    acc_shuffled = LogisticRegression(max_iter=2000).fit(x_train, shuffled).score(x_test, y_test)
    assert acc >= 1.4 * majority, f"5-class test accuracy {acc:.3f}, majority {majority:.3f}"
    assert acc_shuffled < majority + 0.05, f"shuffled-label control reaches {acc_shuffled:.3f}"
    b_train, b_test = binary(splits["train"]), binary(splits["test"])
    b_acc = (
        LogisticRegression(max_iter=2000)
        .fit(vec.transform(b_train.texts), b_train.labels)
        .score(vec.transform(b_test.texts), b_test.labels)
    )
    assert b_acc >= 0.78, f"binary test accuracy {b_acc:.3f}"


def test_cache_folder_written_once_and_repaired(tmp_path):
    d = standin_dir(0, tmp_path)
    assert d.parent == tmp_path and d.name.endswith("-seed0") and (d / "standin.json").is_file()
    stamp = {p.name: p.stat().st_mtime_ns for p in d.iterdir()}
    assert standin_dir(0, tmp_path) == d
    assert {p.name: p.stat().st_mtime_ns for p in d.iterdir()} == stamp, "a valid cache was rewritten"
    (d / "stsa.fine.dev").write_text("4 tampered .\n", encoding="utf-8")
    assert standin_dir(0, tmp_path) == d
    assert load_sst5(d, check=False)["dev"].texts == tuple(t for _, t in generate_standin(0)["dev"])
    assert [p.name for p in tmp_path.iterdir()] == [d.name], "temporary folders left behind"
    assert standin_dir(1, tmp_path) != d


def test_old_generations_and_leftovers_are_pruned_when_a_stand_in_is_written(tmp_path):
    old_gen = tmp_path / "sst5-standin-v0-000000000000-seed0"
    leftover = tmp_path / ".sst5-standin-v0-000000000000-seed0.abcd"
    young = tmp_path / "sst5-standin-v0-111111111111-seed0"  # another checkout may still be reading it
    for p in (old_gen, leftover, young):
        p.mkdir()
        (p / "stsa.fine.dev").write_text("2 x .\n", encoding="utf-8")
    two_days_ago = time.time() - 2 * 24 * 3600
    for p in (old_gen, leftover):
        os.utime(p, (two_days_ago, two_days_ago))
    d = standin_dir(0, tmp_path)
    old_same_version = standin_dir(1, tmp_path)
    os.utime(old_same_version, (two_days_ago, two_days_ago))
    standin_dir(2, tmp_path)  # a write prunes: the current generation's seeds stay, whatever their age
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [d.name, old_same_version.name, young.name, d.name.replace("seed0", "seed2")]
    )


def test_fallback_to_the_standin(tmp_path, monkeypatch):
    """Without shared data, load_sst5_or_standin returns the stand-in with a notice naming the folder looked at;
    the real count assertion rejects the stand-in (so checks that need the real sizes must skip)."""
    monkeypatch.setenv("GRU4REC_SHARED_DATA", str(tmp_path / "absent"))
    data = load_sst5_or_standin(seed=0, cache_dir=tmp_path / "cache")
    assert not data.real and data.name == STANDIN_NAME
    assert str(tmp_path / "absent" / "sst5") in data.notice and "stand-in" in data.notice
    assert {s: len(ex) for s, ex in data.splits.items()} == {s: sum(STANDIN_CLASS_COUNTS[s]) for s in SPLITS}
    with pytest.raises(ValueError, match="expected 8544"):
        load_sst5(data.directory)


def test_real_data_preferred_when_present(monkeypatch):
    from gru4rec_conformance.datasets.paths import shared_data_dir

    base = shared_data_dir()
    if base is None or not all((base / "sst5" / f"stsa.fine.{s}").is_file() for s in SPLITS):
        pytest.skip("real SST-5 not found: set GRU4REC_SHARED_DATA to the folder holding sst5/stsa.fine.*")
    data = load_sst5_or_standin()
    assert data.real and data.name == "sst5" and data.notice == ""
    assert len(data.splits["train"]) == 8544
    assert os.path.samefile(data.directory, base / "sst5")
