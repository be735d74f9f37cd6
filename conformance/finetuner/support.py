"""Helpers shared by the fine-tuner checks: data slices, adapter construction with capability skipping,
sequence-length logic, a network guard and the cause rows and probes that several checks' diagnoses share
(conformance/_harness/diagnosis.py)."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gru4rec_conformance.conformance._harness import diagnosis
from gru4rec_conformance.datasets.sst5 import Examples

#: Labels of the fine-grained view (for plots and messages).
LABEL_NAMES = ("very negative", "negative", "neutral", "positive", "very positive")


@dataclass(frozen=True)
class Slices:
    """Small slices of the SST-5 splits (real, or the synthetic stand-in) used by the fast checks.

    train: 64 train sentences; val: 32 dev sentences; test: 32 test sentences followed by 3 long sentences
    (each four consecutive test sentences joined, > 66 word pieces on the real data and on the stand-in of seed 0
    for at least one) so that truncation happens; full: the full splits.
    """

    train: Examples
    val: Examples
    test: Examples
    full: dict


def make_slices(full: dict) -> Slices:
    """Build the fixed slices from the full fine-grained splits (deterministic: leading examples)."""
    test = full["test"]
    base = test.head(32)
    longs = [" ".join(test.texts[i : i + 4]) for i in (40, 50, 60)]
    long_ex = Examples.from_lists(
        longs,
        [test.labels[40], test.labels[50], test.labels[60]],
        split="test",
        ids=[f"test-long-{k}" for k in range(3)],
        source="joined test sentences",
    )
    joined = Examples(
        "test", base.ids + long_ex.ids, base.texts + long_ex.texts, base.labels + long_ex.labels, 5, base.source
    )
    return Slices(full["train"].head(64), full["dev"].head(32), joined, full)


def fresh(impl):
    """A new, unbuilt adapter of the implementation under test (closed by the harness after the check)."""
    return impl.new()


#: The check that isolates a training pass on a split other than train; other checks' cause tables name it.
LEAKAGE_CHECK = "FT-11 test_training_passes_only_on_train"
#: The check that judges restoring the selected epoch's weights; other checks' cause tables name it.
RESTORE_CHECK = "FT-13 test_stops_on_patience_and_restores_best"

#: Causes that several fine-tuner checks name (meta-tests and mutants match them).
TRAINED_OFF_TRAIN = "training on a split other than train, e.g. a retrain on train+dev after selection"
WEIGHTS_NOT_RESTORED = "weights not restored"
CHANGED_OTHERWISE = "the weights changed after selection in another way, or another epoch's state restored"

#: The row of a check that training off train can also fail: FT-11's leakage check owns the cause, so the split
#: log never isolates it here (the failure may have another cause as well).
OFF_TRAIN_ROW = diagnosis.Candidate(
    f"{TRAINED_OFF_TRAIN}, judged by {LEAKAGE_CHECK}",
    "the run's split log: not decided when it records a training pass off train (the failure may follow from it) "
    "or is not kept, ruled out when every training pass is on train",
)
#: The rows of a final model that does not reproduce the selected epoch's loss (FT-13; FT-11 on the dev loss).
_LAST_EPOCH = (
    "the final model's loss against the last epoch's: confirmed when it reproduces it (within 1e-5) and the split "
    "log does not record a training pass off train, not decided when it records one, ruled out otherwise"
)
NOT_RESTORED_ROW = diagnosis.Candidate(WEIGHTS_NOT_RESTORED, _LAST_EPOCH)
#: The same cause in the table of a check that does not own it.
NOT_RESTORED_ELSEWHERE_ROW = diagnosis.Candidate(f"{WEIGHTS_NOT_RESTORED}, judged by {RESTORE_CHECK}", _LAST_EPOCH)
CHANGED_ROW = diagnosis.Candidate(
    CHANGED_OTHERWISE,
    "the final model's loss against every epoch's: stays not decided (no hook shows when weights change); the "
    "evidence names the epochs it reproduces, if any",
)


def off_train_passes(impl, adapter, train_split: str) -> dict[str, list] | None:
    """Training passes the adapter's ``split_log`` records on a split other than ``train_split``: split name ->
    the epochs of those passes (empty when every training pass is on ``train_split``). None when the
    implementation does not declare the ``split_log`` hook (split accesses are not observable)."""
    if not impl.supports("hook:split_log"):
        return None
    out: dict[str, list] = {}
    for e in adapter.split_log():
        if e.get("purpose") == "train" and e.get("split") != train_split:
            out.setdefault(str(e.get("split")), []).append(e.get("epoch"))
    return out


def leakage_evidence(impl, adapter, train_split: str) -> tuple[bool | None, str]:
    """Whether the split log shows training on a split other than ``train_split`` (None: not observable), and
    one clause saying what it shows (the evidence of a cause row about such training)."""
    passes = off_train_passes(impl, adapter, train_split)
    if passes is None:
        return None, "training on a split other than train is not ruled out (split accesses are not observable)"
    if passes:
        where = ", ".join(f"{s!r} (epochs {e})" for s, e in passes.items())
        return True, f"split_log records training passes on {where}, a split other than {train_split!r}"
    return False, f"split_log records training on {train_split!r} only"


def off_train_cause(impl, adapter, train_split: str) -> diagnosis.Cause:
    """:data:`OFF_TRAIN_ROW`'s cause: not decided when the split log records a training pass off ``train_split``
    (the failure may follow from it; :data:`LEAKAGE_CHECK` judges it) or is not kept, ruled out when it records
    training on ``train_split`` only."""

    def probe() -> diagnosis.Finding:
        leak, evidence = leakage_evidence(impl, adapter, train_split)
        if leak is False:
            return diagnosis.ruled_out(evidence)
        return diagnosis.undecided(f"may follow from it: {evidence}" if leak else evidence)

    return OFF_TRAIN_ROW.cause(probe)


def restore_causes(impl, adapter, train_split: str, final: float, losses: list[float], split: str,
                   same: Callable[[float, float], bool],
                   not_restored_row: diagnosis.Candidate = NOT_RESTORED_ROW) -> list[diagnosis.Cause]:  # fmt: skip
    """The causes of a final model whose loss on ``split`` (``final``) is not the selected epoch's, in table order:
    ``not_restored_row`` (:data:`NOT_RESTORED_ROW`, or :data:`NOT_RESTORED_ELSEWHERE_ROW` in a check that does
    not own it), :data:`OFF_TRAIN_ROW` (:func:`off_train_cause`) and :data:`CHANGED_ROW`. ``losses`` are the
    epochs' recorded losses on ``split``; ``same`` is the check's own equality of two losses.

    Weights not restored: confirmed when ``final`` reproduces the last epoch's loss and the split log records no
    training pass off train (or is not kept), not decided when it records one, else ruled out. Changed otherwise:
    always not decided, naming the epochs whose loss ``final`` reproduces."""
    last = f"the last epoch's ({len(losses)}) {split} loss {losses[-1]:.6f}"

    def not_restored() -> diagnosis.Finding:
        if leakage_evidence(impl, adapter, train_split)[0]:
            return diagnosis.undecided("not told apart from the training off train that the split log records")
        if same(final, losses[-1]):
            return diagnosis.confirmed(f"the final model reproduces {last}")
        return diagnosis.ruled_out(f"the final model's {split} loss {final:.6f} is not {last}")

    def changed() -> diagnosis.Finding:
        hits = [k + 1 for k, v in enumerate(losses) if same(final, v)]
        if hits:
            return diagnosis.undecided(f"the final model's {split} loss {final:.6f} is that of epoch(s) {hits}")
        return diagnosis.undecided(
            f"the final model reproduces no epoch's {split} loss ({[round(v, 6) for v in losses]})"
        )

    return [
        not_restored_row.cause(not_restored),
        off_train_cause(impl, adapter, train_split),
        CHANGED_ROW.cause(changed),
    ]


def unpadded_length(ids: list[int], mask: list[int] | None, pad_id: int | None) -> int:
    """Length of the real sequence: the mask's sum when there is a mask, else ``ids`` minus trailing pad ids."""
    if mask is not None:
        return int(sum(mask))
    n = len(ids)
    while n > 0 and pad_id is not None and ids[n - 1] == pad_id:
        n -= 1
    return n


@contextlib.contextmanager
def network_guard() -> Iterator[list]:
    """Refuse and record every outgoing connection and name lookup made in this process."""
    attempts: list = []
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(self, address):  # noqa: ANN001
        if self.family == getattr(socket, "AF_UNIX", None):
            return real_connect(self, address)
        attempts.append(("connect", repr(address)))
        raise OSError(f"network access attempted during a fine-tuner check: {address!r}")

    def getaddrinfo(host, *a, **kw):  # noqa: ANN001
        attempts.append(("getaddrinfo", str(host)))
        raise socket.gaierror(f"network access attempted during a fine-tuner check: {host!r}")

    socket.socket.connect = connect  # type: ignore[method-assign]  # the guard patches the class on purpose
    socket.getaddrinfo = getaddrinfo
    try:
        yield attempts
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]  # undo the patch
        socket.getaddrinfo = real_getaddrinfo


def stable_json_hash(path: Path) -> str:
    """sha256 of a JSON file's content without wall-time entries (keys naming seconds, runtime or per_second)."""
    import hashlib

    def strip(o):
        if isinstance(o, dict):
            return {
                k: strip(v) for k, v in o.items() if not any(w in str(k) for w in ("seconds", "runtime", "per_second"))
            }
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    with open(path, encoding="utf-8") as f:
        data = strip(json.load(f))
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
