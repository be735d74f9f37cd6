"""benchmarks/floor.py: the floor's products and the replayed epoch (untimed; the figures are the benchmark's)."""

from __future__ import annotations

import torch

from gru4rec_conformance.benchmarks.floor import Floor, Replay, epoch_lanes, format_line, measure


def test_floor_has_the_steps_products():
    f = Floor([4, 4, 3], n_input=6, layers=[5], n_sample=7)
    assert sorted(f.ops) == [3, 4]
    assert len(f.ops[4]) == 8  # one layer: 2 forward + 3 backward, scores: 1 forward + 2 backward
    shapes = [tuple(out.shape) for _, _, out in f.ops[4]]
    assert (4, 11) in shapes and (11, 5) in shapes  # scores over K = b + S columns, dL/dO
    f.run()
    assert len(Floor([2], 6, [5, 3], 1).ops[2]) == 13


def test_measure_replays_the_epoch_and_reports_ratios():
    torch.set_num_threads(1)
    r = measure("retailrocket", "bpr-max", minibatches=2, rounds=1, scale=0.01, n_sample=16)
    assert r.n_steps > 0 and len(r.ref_epoch_cpu) == len(r.floor_cpu) == 1
    assert r.ref_over_floor > 0 and r.official_over_ref is None
    assert "reference/floor" in format_line(r)
    assert format_line(r, "no official checkout").endswith("official/reference n/a (no official checkout)")


def test_official_checkout_prefers_the_given_folder_then_the_environment(monkeypatch, tmp_path):
    from gru4rec_conformance.benchmarks.floor import official_checkout

    monkeypatch.setenv("OFFICIAL_GRU4REC_PATH", "/env/official")
    assert official_checkout(str(tmp_path)) == (str(tmp_path), None)
    assert official_checkout() == ("/env/official", None)
    monkeypatch.delenv("OFFICIAL_GRU4REC_PATH")
    monkeypatch.delenv("GRU4REC_MIRROR_DIR", raising=False)
    monkeypatch.delenv("GRU4REC_ALLOW_DOWNLOAD", raising=False)
    monkeypatch.setenv("GRU4REC_CACHE_DIR", str(tmp_path / "empty-cache"))
    path, why = official_checkout()
    assert path is None and why is not None and why.startswith("no official checkout")


def test_replay_yields_the_iterators_runs():
    from gru4rec_conformance.benchmarks.workload import best_params, padded_data
    from gru4rec_conformance.reference.gru4rec import GRU4Rec

    hp = best_params("coveo", "cross-entropy")
    d = padded_data("coveo", 2, hp["batch_size"], scale=0.01)
    g = GRU4Rec(**{**hp, "n_sample": 8}, n_epochs=1)
    g.fit(d.train, n_epochs=0)
    lanes = epoch_lanes(g)
    rp = Replay(g.iterator)
    assert [r.n_lanes for r in rp for _ in range(r.n_steps)] == lanes
    assert [r.n_lanes for r in rp for _ in range(r.n_steps)] == lanes  # replayable
