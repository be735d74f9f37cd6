"""The last lines of a run say when its verdict stands on synthetic stand-in data: the stand-in notice is printed
when the data are first needed, often hundreds of lines above the CONFORMANT line a newcomer reads."""

from __future__ import annotations

import pytest

CHECKS = """
@pytest.mark.check("D-1", kind="K1")
def test_standin(impl, record_metric):
    '''records a metric measured on a stand-in'''
    record_metric("recall@20", 0.5, reference=0.5, tolerance=0.1, dataset="toy_standin")


@pytest.mark.check("D-2", kind="K1")
def test_real(impl, record_metric):
    '''records a metric measured on real data'''
    record_metric("recall@20", 0.5, reference=0.5, tolerance=0.1, dataset="toy")
"""


def test_final_lines_name_the_standin_data(project):
    project.checks(CHECKS)
    result = project.run("conformance", "--impl", "good")
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    tail = out[out.index("good: CONFORMANT") :]
    assert "  data: synthetic stand-ins (toy_standin), not the real data (set GRU4REC_SHARED_DATA)" in tail
    result = project.run("conformance", "--impl", "good", "-k", "test_real")
    assert "synthetic stand-ins" not in result.stdout.str()
