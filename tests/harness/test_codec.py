"""The worker exchange format: JSON and .npy only, never pickle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gru4rec_conformance.conformance._harness.codec import Codec, ExchangeError, dumps, loads
from gru4rec_conformance.implementations.base import Capabilities, FitReport, StepTrace


def _roundtrip(value, tmp_path):
    sender, receiver = Codec(tmp_path, "c"), Codec(tmp_path, "p")
    return receiver.decode(loads(dumps(sender.encode(value))))


def test_roundtrip_of_protocol_values(tmp_path):
    big = np.random.default_rng(0).random((40, 30), dtype=np.float32)
    value = {
        "scores": big,
        "small": np.arange(5, dtype=np.int64),
        "nan": float("nan"),
        "flag": np.bool_(True),
        3: (1, "two", None),
        "set": {1, 2},
        "report": FitReport(
            [0.5],
            [2],
            [10],
            [0.1],
            trace=[StepTrace(np.array([1, 2]), np.array([0, 1]), np.array([0.0, 1.5]), 2, np.array([7]), 0.05)],
        ),
    }
    out = _roundtrip(value, tmp_path)
    assert out["scores"].dtype == np.float32 and np.array_equal(out["scores"], big)
    assert out["small"].dtype == np.int64 and out["small"].tolist() == [0, 1, 2, 3, 4]
    assert np.isnan(out["nan"]) and out["flag"] is True and out[3] == (1, "two", None) and out["set"] == {1, 2}
    assert isinstance(out["report"], FitReport) and out["report"].trace[0].h_in_norms.tolist() == [0.0, 1.5]
    caps = Capabilities.from_mapping({"losses": ["bpr-max"], "bpreg": True})
    assert _roundtrip(caps, tmp_path) == caps


def test_dataframes_streams_and_prefixes(tmp_path):
    df = pd.DataFrame(
        {
            "SessionId": np.array([1, 1, 2], dtype=np.int64),
            "ItemId": [5, 6, 5],
            "Time": [0.5, 1.0, 2.0],
            "Name": ["a", "b", "c"],
        }
    )
    out = _roundtrip(df, tmp_path)
    pd.testing.assert_frame_equal(out, df, check_dtype=False)
    assert out["SessionId"].dtype == np.int64 and out["Time"].dtype == np.float64
    stream = (row for row in [(1, 1, 6, np.full(4, 1.0)), (2, 1, 5, np.full(4, 2.0))])  # like score_stream
    rows = _roundtrip(stream, tmp_path)
    assert [r[:3] for r in rows] == [(1, 1, 6), (2, 1, 5)] and rows[1][3].tolist() == [2.0] * 4
    prefixes = [[i, i + 1] for i in range(40)] + [[]]
    assert _roundtrip(prefixes, tmp_path) == prefixes
    packer = Codec(tmp_path, "x")  # both are packed column-wise, not one JSON value per element
    assert "__ragged__" in packer.encode(prefixes)
    assert "__rows__" in packer.encode([(1, 1, 6, np.zeros(300)), (2, 1, 5, np.ones(300))])


def test_unsafe_values_and_names_are_refused(tmp_path):
    codec = Codec(tmp_path, "c")
    with pytest.raises(ExchangeError, match="dtype object"):
        codec.encode(np.array([object()], dtype=object), where="score_prefixes() result")
    with pytest.raises(ExchangeError, match="score_prefixes\\(\\) result: values of type builtins.object"):
        codec.encode(object(), where="score_prefixes() result")
    with pytest.raises(ExchangeError, match="refusing exchange file name"):
        codec.decode({"__ndarray__": "../../etc/passwd.npy"})
    with pytest.raises(ExchangeError, match="refusing to rebuild 'os:system'"):
        codec.decode({"__dataclass__": "os:system", "fields": {}})
    with pytest.raises(ExchangeError, match="refusing to rebuild .*FamilySpec.*only the registered exchange types"):
        codec.decode({"__dataclass__": "gru4rec_conformance.implementations.base:FamilySpec", "fields": {}})
    with pytest.raises(ExchangeError, match="refusing to rebuild 'gru4rec_conformance.conformance_pwn:X'"):
        codec.decode({"__dataclass__": "gru4rec_conformance.conformance_pwn:X", "fields": {}})
    pickled = tmp_path / "p0.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ExchangeError, match="dtype object is refused"):
        codec.decode({"__ndarray__": "p0.npy"})


def test_npy_headers_are_checked_before_loading(tmp_path):
    """A file past the byte budget, a link, a structured dtype or a truncated payload is refused from its header."""
    np.save(tmp_path / "c0.npy", np.zeros(1000, dtype=np.float64))
    with pytest.raises(
        ExchangeError, match=r"shape \(1000,\) and dtype float64 \(8000 bytes\) exceeds the reply budget of 4000"
    ):
        Codec(tmp_path, "p", max_bytes=4000).decode({"__ndarray__": "c0.npy"})
    budget = Codec(tmp_path, "p", max_bytes=12000)  # the budget is summed over one message
    budget.decode({"__ndarray__": "c0.npy"})
    with pytest.raises(ExchangeError, match="8000 bytes already received"):
        budget.decode({"__ndarray__": "c0.npy"})
    (tmp_path / "c1.npy").symlink_to(tmp_path / "c0.npy")
    with pytest.raises(ExchangeError, match="without following links"):
        budget.decode({"__ndarray__": "c1.npy"})
    np.save(tmp_path / "c2.npy", np.zeros(3, dtype=[("a", "i4"), ("b", "f8")]))
    with pytest.raises(ExchangeError, match="is refused"):
        budget.decode({"__ndarray__": "c2.npy"})
    data = (tmp_path / "c0.npy").read_bytes()
    (tmp_path / "c3.npy").write_bytes(data[:200])
    with pytest.raises(ExchangeError, match="truncated"):
        Codec(tmp_path, "p").decode({"__ndarray__": "c3.npy"})
    with pytest.raises(ExchangeError, match="inline array of dtype object"):
        budget.decode({"__array__": {"dtype": "|O", "shape": [1], "data": [1]}})
