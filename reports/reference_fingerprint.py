"""Fingerprint of the reference GRU4Rec's outputs, so that a change of its code that computes the same bits (a speed
change) leaves the committed verdicts current (docs/scoreboard.md, 'When a verdict is stale').

A verdict is stale when the files its checks depend on changed since its run (``reports.facts``). The reference is
one of them: the checks compare against it. A change under ``reference/gru4rec/`` that leaves every output bit the
same cannot change what a check measured, so it should not cost a rerun of every verdict. The *fingerprint* is a
SHA-256 over the exact bytes the reference computes on fixed inputs: the weights and epoch losses of small fits
that reach every loss, final activation, optimizer option, dropout site, embedding mode and step implementation;
the scores of prefixes; the metrics of its evaluator in each tie mode; the oracle loss and its gradient for each
loss (:data:`CASES`, :func:`compute`).

The *ledger* (``reports/reference_fingerprints.json``, :data:`LEDGER`) records, per git tree of
``reference/gru4rec`` (``git rev-parse <commit>:reference/gru4rec``), the fingerprint measured on one machine
(CPU model, torch version: the same code may round differently on another CPU or torch). Two trees compute the
same outputs when the ledger holds both with the same machine and the same fingerprint (:func:`same_outputs`); then
``reports.facts`` does not count their differing files. A tree missing from the ledger counts as changed, as before.

Record the tree of a committed reference after a change that should compute the same bits::

    PYTHONPATH=src python -m gru4rec_conformance.reports.reference_fingerprint record

(the earlier tree must be in the ledger too, measured on the same machine: ``record --commit <sha>`` measures the
reference of an earlier commit from a ``git archive`` of it). ``show`` prints the fingerprint of the working tree;
``check`` recomputes the entry of HEAD's tree on this machine and fails when it differs (tests run it).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gru4rec_conformance.fileio import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
#: The ledger of fingerprints, per git tree of :data:`TREE` (committed; JSON).
LEDGER = ROOT / "reports" / "reference_fingerprints.json"
#: The folder whose tree the ledger names.
TREE = "reference/gru4rec"
#: Version of :func:`compute`'s inputs: entries of another version are not compared.
VERSION = 1

#: The fits (each on top of :data:`BASE`): every loss, final activation, the optimizer's momentum, logQ, both
#: dropout sites, separate and constrained embeddings, two layers, no extra samples, and both step implementations.
BASE: dict[str, Any] = dict(layers=[12], batch_size=5, n_sample=6, n_epochs=2, learning_rate=0.05, seed=3)
CASES: dict[str, dict[str, Any]] = {
    "xe": dict(loss="cross-entropy"),
    "xe-logq-momentum": dict(loss="cross-entropy", logq=1.0, momentum=0.3, sample_alpha=0.0),
    "xe-no-samples": dict(loss="cross-entropy", n_sample=0, final_act="softmax"),
    "xe-separate-dropout-2layers": dict(
        loss="cross-entropy",
        embedding=8,
        constrained_embedding=False,
        dropout_p_embed=0.2,
        dropout_p_hidden=0.3,
        layers=[12, 10],
    ),  # fmt: skip
    "xe-own-embedding": dict(loss="cross-entropy", constrained_embedding=False, sample_alpha=1.0),
    "bprmax-elu-momentum": dict(loss="bpr-max", bpreg=0.5, elu_param=0.5, momentum=0.2),
    "bprmax-linear-no-samples": dict(loss="bpr-max", n_sample=0, elu_param=0.0, bpreg=1.0),
    "top1": dict(loss="top1", final_act="tanh"),
    "top1-max": dict(loss="top1-max", final_act="linear"),
    "bpr": dict(loss="bpr", final_act="linear"),
    "xe-static": dict(loss="cross-entropy", step_impl="static"),
    "bprmax-static": dict(loss="bpr-max", step_impl="static", momentum=0.1),
}
LOSSES = ("cross-entropy", "bpr-max", "top1", "top1-max", "bpr")
#: Two fits at the study's sizes of the sample (n_sample 2048) on a 3,000-item catalogue, one epoch each, so that
#: code paths that depend on the size of a tensor are reached too.
LARGE: dict[str, dict[str, Any]] = {
    "large-xe": dict(layers=[64], batch_size=32, n_sample=2048, n_epochs=1, loss="cross-entropy", logq=1.0),
    "large-bprmax": dict(layers=[48], batch_size=48, n_sample=2048, n_epochs=1, loss="bpr-max", momentum=0.1),
}


def _sessions(seed: int, n_sessions: int, n_items: int) -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, n_items + 1)
    rows, t = [], 0
    for s in range(n_sessions):
        for _ in range(int(rng.integers(2, 8))):
            rows.append((s, 1000 + int(rng.choice(n_items, p=popularity / popularity.sum())), t))
            t += 1
    return pd.DataFrame(rows, columns=["SessionId", "ItemId", "Time"])


def compute() -> str:
    """The fingerprint (hex SHA-256) of the reference in this process's ``gru4rec_conformance.reference``.

    Bytes hashed, in order: for each case of :data:`CASES`, its name, the fitted weights (float32, sorted by
    name), the epoch losses, the scores of four prefixes and the evaluation metrics in the three tie modes; the
    weights and epoch losses of the two fits of :data:`LARGE`; then, for each loss, the oracle loss value and
    gradient on a fixed 6 × 10 score matrix. Deterministic on one machine and torch version (one thread, fixed
    seeds); about 10 s of CPU. Code paths that only larger tensors reach than these are not covered."""
    import numpy as np
    import torch

    from gru4rec_conformance.reference.gru4rec import GRU4Rec
    from gru4rec_conformance.reference.gru4rec.losses import loss_on_scores

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    h = hashlib.sha256(f"reference-fingerprint v{VERSION}".encode())

    def add(x: Any) -> None:
        a = np.ascontiguousarray(np.asarray(x))
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())

    try:
        train, test = _sessions(11, 60, 25), _sessions(12, 15, 25)
        test = test[test["ItemId"].isin(set(train["ItemId"]))]
        items = sorted(train["ItemId"].unique())
        prefixes = [[items[0], items[1]], [items[2]], [items[3], items[0], items[4]], [items[-1]]]
        for name, case in CASES.items():
            hp = {**BASE, **case}
            step_impl = hp.pop("step_impl", "auto")
            gru = GRU4Rec(step_impl=step_impl, **hp)
            rep = gru.fit(train)
            h.update(name.encode())
            for key, w in sorted(gru.get_weights().items()):
                h.update(key.encode())
                add(w)
            add(np.asarray(rep.epoch_losses, dtype=np.float64))
            add(gru.score_prefixes(prefixes))
            for mode in ("conservative", "standard", "median"):
                metrics = gru.evaluate(test, cutoffs=(1, 5, 10), mode=mode)
                add(np.asarray([metrics[k] for k in sorted(metrics)], dtype=np.float64))
        large = _sessions(13, 1500, 3000)
        for name, hp in LARGE.items():
            gru = GRU4Rec(seed=3, **hp)
            rep = gru.fit(large)
            h.update(name.encode())
            for key, w in sorted(gru.get_weights().items()):
                h.update(key.encode())
                add(w)
            add(np.asarray(rep.epoch_losses, dtype=np.float64))
        R = np.random.default_rng(5).normal(0.0, 2.0, size=(6, 10))
        for loss in LOSSES:
            value, grad = loss_on_scores(R.copy(), loss)
            add(np.asarray([value], dtype=np.float64))
            add(grad)
    finally:
        torch.set_num_threads(threads)
    return h.hexdigest()


def machine() -> str:
    """What the fingerprint depends on besides the code: CPU model, architecture and the vector instruction set
    torch dispatches to, torch version."""
    import torch

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    # the vector instruction set ATen dispatches its kernels to decides how they round (AVX512, AVX2, ...)
    isa = torch.backends.cpu.get_cpu_capability()
    return f"{model or platform.processor() or '?'} ({platform.machine()}, {isa}), torch {torch.__version__}"


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def tree_of(commit: str, root: Path = ROOT) -> str | None:
    """The git tree id of :data:`TREE` at ``commit`` (None when git cannot tell)."""
    return _git(root, "rev-parse", f"{commit}:{TREE}")


def read_ledger(path: Path = LEDGER) -> list[dict[str, Any]]:
    """The ledger's entries (``tree``, ``fingerprint``, ``machine``, ``version``, ``recorded``); [] without a
    ledger. Raises ValueError naming the file for one that is not the ledger's JSON."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a fingerprint ledger ({exc})") from exc
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(f"{path}: not a fingerprint ledger (no 'entries' list)")
    return entries


@functools.lru_cache(maxsize=256)
def _same(old_tree: str, new_tree: str, ledger_text: str) -> bool:
    entries = json.loads(ledger_text).get("entries", [])
    old = {(e.get("machine"), e.get("version"), e.get("fingerprint")) for e in entries if e.get("tree") == old_tree}
    new = {(e.get("machine"), e.get("version"), e.get("fingerprint")) for e in entries if e.get("tree") == new_tree}
    return bool(old & new)


def same_outputs(commit: str, root: Path = ROOT, ledger: Path | None = None) -> bool:
    """Whether the reference at ``commit`` computes the same bits as the reference at ``root``'s HEAD: the same
    tree, or two trees the ledger holds with the same fingerprint measured on the same machine. False when git or
    the ledger cannot tell."""
    old, new = tree_of(commit, root), tree_of("HEAD", root)
    if old is None or new is None:
        return False
    if old == new:
        return True
    path = ledger if ledger is not None else Path(root) / "reports" / "reference_fingerprints.json"
    try:
        text = path.read_text(encoding="utf-8")
        read_ledger(path)
    except (OSError, ValueError):
        return False
    return _same(old, new, text)


def _measure_commit(commit: str) -> str:
    """The fingerprint of the reference at ``commit``, measured in a subprocess on a ``git archive`` of it."""
    with tempfile.TemporaryDirectory(prefix="gru4rec-fingerprint-") as tmp:
        data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "reference"],
                              capture_output=True, check=True, timeout=120).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", tmp], input=data, check=True, timeout=120)
        # the archived reference/ shadows this checkout's: the package's other folders stay this checkout's
        code = (
            "import gru4rec_conformance.reference as r; "
            f"r.__path__[:] = [{tmp + '/reference'!r}]; "
            "from gru4rec_conformance.reports.reference_fingerprint import compute; print(compute())"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=900)
    return done.stdout.strip().splitlines()[-1]


def record(commit: str = "HEAD", path: Path = LEDGER) -> dict[str, Any]:
    """Measure the reference of ``commit`` on this machine and add its entry to the ledger (atomically; an
    identical entry is not added twice). HEAD is measured in this process and must have no uncommitted change
    under :data:`TREE`. Raises ValueError when git cannot name the tree or the work tree differs."""
    tree = tree_of(commit)
    if tree is None:
        raise ValueError(f"git cannot name the tree of {TREE} at {commit!r}")
    if commit == "HEAD":
        if _git(ROOT, "status", "--porcelain", "--", TREE):
            raise ValueError(f"{TREE} has uncommitted changes: the ledger names committed trees; commit first")
        fingerprint = compute()
    else:
        fingerprint = _measure_commit(commit)
    entry = {"tree": tree, "fingerprint": fingerprint, "machine": machine(), "version": VERSION,
             "recorded": _git(ROOT, "rev-parse", "--short", commit) or commit}  # fmt: skip
    entries = read_ledger(path)
    if not any({k: e.get(k) for k in ("tree", "fingerprint", "machine", "version")} ==
               {k: entry[k] for k in ("tree", "fingerprint", "machine", "version")} for e in entries):  # fmt: skip
        entries.append(entry)
        atomic_write_json(path, {"schema": 1, "entries": entries}, trailing_newline=True)
    return entry


def check(path: Path = LEDGER) -> str | None:
    """Recompute HEAD's entry on this machine: None when it agrees or the ledger has no entry of HEAD's tree for
    this machine (nothing to check), else a message. Raises ValueError as :func:`read_ledger`."""
    tree = tree_of("HEAD")
    here = machine()
    mine = [e for e in read_ledger(path) if e.get("tree") == tree and e.get("machine") == here
            and e.get("version") == VERSION]  # fmt: skip
    if not mine:
        return None
    got = compute()
    bad = [e for e in mine if e.get("fingerprint") != got]
    return (
        f"{path}: the entry of tree {tree} says {bad[0]['fingerprint']}, this machine computes {got}" if bad else None
    )


def main(argv: list[str] | None = None) -> int:
    """``show`` | ``record [--commit SHA]`` | ``check`` (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m gru4rec_conformance.reports.reference_fingerprint")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("show", help="print the fingerprint of the working tree's reference")
    rec = sub.add_parser("record", help="add the fingerprint of a committed reference to the ledger")
    rec.add_argument("--commit", default="HEAD")
    sub.add_parser("check", help="recompute HEAD's ledger entry on this machine")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "show":
            print(compute(), machine())
        elif args.cmd == "record":
            entry = record(args.commit)
            print(f"{entry['tree'][:12]} {entry['fingerprint'][:16]} on {entry['machine']} -> {LEDGER}")
        else:
            msg = check()
            print(msg or "ok")
            return 1 if msg else 0
    except (ValueError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
