"""Root-cause attribution: when a prerequisite check failed, the failures of other kinds may follow
from it; the verdict marks them and the reports group them under it."""

from __future__ import annotations

from gru4rec_conformance.conformance._records import verdict

HEADER = {"impl": {"name": "x"}, "command": []}
END = {"status": "complete", "not_run": {}}


def _rec(check_id, kind, outcome="failed", param=""):
    return {"nodeid": f"conformance/gru4rec/t.py::test_{check_id.lower().replace('-', '')}[x{param}]", "impl": "x",
            "outcome": outcome, "check": {"id": check_id, "kind": kind}, "reason": "r"}  # fmt: skip


def test_failures_of_other_kinds_follow_from_a_failed_prerequisite():
    records = [_rec("SR-3", "K1"), _rec("EB-3", "K7"), _rec("EB-1", "K7"), _rec("HP-1", "K6", "xfail"),
               _rec("DO-1", "K4"), _rec("LF-1", "K2", "passed")]  # fmt: skip
    conf = verdict.assess(HEADER, records, END)
    follows = {d.check_id: d.may_follow_from for d in conf.defects}
    # EB-1 is of EB-3's own kind; DO-1 is a later prerequisite, so it may follow from EB-3 too
    assert follows == {"SR-3": ("EB-3",), "EB-3": (), "EB-1": (), "HP-1": ("EB-3",), "DO-1": ("EB-3",)}, follows
    assert conf.root_cause_lines() == ["3 failure(s) may follow from EB-3 (epoch count): SR-3, HP-1, DO-1"]
    assert conf.reasons[1] == conf.root_cause_lines()[0], conf.reasons
    assert "3 may follow from EB-3" in conf.line("x")
    again = verdict.Conformance.from_json(conf.to_json())
    assert again.root_causes().keys() == {"EB-3"} and again.defects == conf.defects


def test_a_prerequisite_counts_only_when_every_instance_failed_and_nothing_follows_from_a_pass():
    one_option = [_rec("RN-1", "K10", param="-loss:top1"), _rec("RN-1", "K10", "passed", param="-loss:bpr"),
                  _rec("SR-3", "K1")]  # fmt: skip
    conf = verdict.assess(HEADER, one_option, END)
    assert all(not d.may_follow_from for d in conf.defects) and not conf.root_causes()
    nothing_runs = [_rec("RN-1", "K10", param="-loss:top1"), _rec("RN-1", "K10", param="-loss:bpr"), _rec("SR-3", "K1")]
    conf = verdict.assess(HEADER, nothing_runs, END)
    assert {d.check_id: d.may_follow_from for d in conf.defects}["SR-3"] == ("RN-1",)
    assert verdict.assess(HEADER, [_rec("EB-3", "K7", "passed"), _rec("SR-3", "K1")], END).root_causes() == {}
