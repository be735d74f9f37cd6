"""One vocabulary: the adapter protocol's FitReport/StepTrace are the reference GRU4Rec's records
(reference/gru4rec/records.py), and importing the protocol stays light (no torch, no numpy)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gru4rec_conformance import child_pythonpath
from gru4rec_conformance.conformance._harness.codec import Codec, dumps, loads
from gru4rec_conformance.implementations import base
from gru4rec_conformance.reference.gru4rec import records


def test_the_protocol_and_the_reference_share_one_set_of_records():
    import gru4rec_conformance.reference.gru4rec as ref

    for name in ("FitReport", "StepTrace", "ExchangeRecord"):
        assert getattr(base, name) is getattr(records, name)
    assert ref.FitReport is base.FitReport and ref.StepTrace is base.StepTrace


def test_importing_the_protocol_imports_neither_torch_nor_numpy():
    heavy = ("torch", "numpy", "gru4rec_conformance.reference.gru4rec.core")
    code = f"import sys; import gru4rec_conformance.implementations.base; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": child_pythonpath(), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "[]"


def test_a_reference_trace_crosses_the_worker_boundary(tmp_path):
    trace = base.StepTrace(
        session_ids=np.array([3, 4]),
        positions=np.array([0, 2]),
        h_in_norms=np.array([0.0, 1.5]),
        n_active=2,
        negative_ids=np.array([7, 8]),
        learning_rate=0.05,
        epoch=1,
        step=9,
        score_shape=(2, 4),
        output_rows_touched=4,
    )
    report = base.FitReport([0.5], [10], [20], [0.1], trace=[trace])
    sender, receiver = Codec(tmp_path, "c"), Codec(tmp_path, "p")
    out = receiver.decode(loads(dumps(sender.encode(report))))
    assert isinstance(out, base.FitReport) and out.n_epochs == 1
    t = out.trace[0]
    assert (t.epoch, t.step, t.score_shape, t.output_rows_touched) == (1, 9, (2, 4), 4)
    assert t.h_in_norms.tolist() == [0.0, 1.5] and t.negative_ids.tolist() == [7, 8]


def test_the_old_trace_field_name_still_reads_with_a_warning():
    t = base.StepTrace(np.array([1]), np.array([0]), np.array([0.25]), 1)
    assert t.epoch is None and t.score_shape is None  # fields only the reference fills default to None
    with pytest.warns(DeprecationWarning, match="h_in_norms"):
        assert t.h_in_norm.tolist() == [0.25]
