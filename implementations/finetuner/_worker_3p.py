"""Worker that runs a studied SST-5 code base as it is, in its own process and interpreter.

    python -m gru4rec_conformance.implementations.finetuner._worker_3p JOB.json

The job names the code base, its checkout, the local model directory, the training arguments the code's own
``train`` function takes, and texts to predict. Data are already written (by the adapter) as PTB trees in
``$HOME/stanford_sentiment_treebank/``, where ``pytreebank.load_sst()`` finds them without downloading.

Shims (translation only, declared by the adapters): hub model names are mapped to the local model directory
in ``from_pretrained``; the model object returned by ``from_pretrained`` is kept to predict after training;
each ``DataLoader`` creation is recorded (which split, how many examples) to observe split accesses;
outgoing network connections are refused and recorded; loguru output is captured to read the epoch logs.
The studied code itself is executed unchanged: the package modules (munikarmanish/bert-sentiment) are
imported, the notebooks' code cells are extracted at run time and executed in order up to the driver cell.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

NOTEBOOKS = {"cheang_bert": "Models/BERT-Base-Uncased.ipynb", "minzoni_bert": "Models/BERT-Base-Uncased.ipynb"}


def _guard(attempts: list) -> None:
    real_connect = socket.socket.connect

    def connect(self, address):
        if self.family == getattr(socket, "AF_UNIX", None):
            return real_connect(self, address)
        attempts.append(["connect", repr(address)])
        raise OSError(f"network refused by the conformance worker: {address!r}")

    def getaddrinfo(host, *a, **kw):
        attempts.append(["getaddrinfo", str(host)])
        raise socket.gaierror(f"network refused by the conformance worker: {host!r}")

    socket.socket.connect = connect  # type: ignore[method-assign]  # the guard patches the class on purpose
    socket.getaddrinfo = getaddrinfo


def _redirect_from_pretrained(classes, mapping: dict, keep: list) -> None:
    for cls in classes:
        func = cls.from_pretrained.__func__

        def from_pretrained(klass, name, *args, _func=func, **kw):
            obj = _func(klass, mapping.get(name, name), *args, **kw)
            if hasattr(obj, "parameters"):
                keep.append(obj)
            return obj

        cls.from_pretrained = classmethod(from_pretrained)


def _notebook_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        src = "".join(c["source"])
        if re.search(r"=\s*train\(|^\s*train\(", src, flags=re.M):
            break  # the driver cell: the adapter calls train() itself with the suite's arguments
        cells.append("\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("!", "%"))))
    return cells


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    out = Path(job["out"])
    attempts: list = []
    _guard(attempts)
    result: dict = {"error": None, "dataloaders": [], "network_attempts": attempts}
    env_before = dict(os.environ)
    import torch

    torch.set_num_threads(int(job.get("threads", 1)))
    from loguru import logger

    log_path = out / "loguru.log"
    logger.add(str(log_path), format="{message}", level="INFO")
    keep: list = []
    mapping = dict.fromkeys(job["hub_names"], job["model_dir"])
    if job["impl"] == "munikar":
        import pytorch_transformers as lib

        _redirect_from_pretrained([lib.BertTokenizer, lib.BertConfig, lib.BertForSequenceClassification], mapping, keep)
    else:
        import transformers as lib

        _redirect_from_pretrained([lib.BertTokenizer, lib.BertConfig, lib.BertForSequenceClassification], mapping, keep)

    namespace: dict = {}
    real_loader = torch.utils.data.DataLoader

    def split_of(dataset):
        sst = namespace.get("sst") or {}
        for name, trees in sst.items():
            if getattr(dataset, "sst", None) is trees:
                return name
        return "?"

    class RecordingLoader(torch.utils.data.DataLoader):  # torch's own (= real_loader): patched only below
        def __init__(self, dataset, *a, **kw):
            result["dataloaders"].append(
                {"split": split_of(dataset), "n": len(dataset), "shuffle": bool(kw.get("shuffle", False))}
            )
            super().__init__(dataset, *a, **kw)

    torch.utils.data.DataLoader = RecordingLoader  # type: ignore[misc]  # the shim patches torch on purpose
    cwd = out / "cwd"
    cwd.mkdir(exist_ok=True)
    os.chdir(cwd)
    try:
        if job["impl"] == "munikar":
            sys.path.insert(0, job["checkout"])
            import bert_sentiment.data as data_mod
            import bert_sentiment.train as train_mod

            namespace.update(vars(data_mod))
            namespace.update(vars(train_mod))
            namespace["sst"] = data_mod.sst
            train_fn, dataset_cls = train_mod.train, data_mod.SSTDataset
        else:
            for src in _notebook_cells(Path(job["checkout"]) / NOTEBOOKS[job["impl"]]):
                exec(compile(src, f"{job['impl']}-cell", "exec"), namespace)
            train_fn, dataset_cls = namespace["train"], namespace["SSTDataset"]
        try:
            ret = train_fn(**job["train_kwargs"])
            result["returned"] = _plain(ret)
        except Exception as exc:  # the code base's own failure is the finding
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["traceback"] = traceback.format_exc()[-4000:]
        if keep:
            model = keep[-1]
            if job.get("state_in"):
                model.load_state_dict(torch.load(job["state_in"], weights_only=True))
            if job.get("state_out"):
                torch.save(model.state_dict(), job["state_out"])
            if job.get("predict_trees"):
                result.update(_predict(model, namespace, dataset_cls, job))
    except Exception as exc:
        result["error"] = result["error"] or f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-4000:]
    finally:
        torch.utils.data.DataLoader = real_loader  # type: ignore[misc]  # undo the patch
    result["log"] = log_path.read_text(encoding="utf-8") if log_path.exists() else ""
    result["env_changes"] = {
        k: os.environ.get(k) for k in set(os.environ) | set(env_before) if os.environ.get(k) != env_before.get(k)
    }
    result["files"] = sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*") if p.is_file())
    (out / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return 0


def _plain(o):
    if isinstance(o, (list, tuple)):
        return [_plain(x) for x in o]
    if isinstance(o, (int, float, str)) or o is None:
        return o
    return repr(o)


def _predict(model, namespace, dataset_cls, job) -> dict:
    """Encode the texts with the code base's own dataset class and run the model as its evaluation does."""
    import pytreebank
    import torch

    trees = pytreebank.import_tree_corpus(job["predict_trees"])
    namespace["sst"]["predict"] = trees
    ds = dataset_cls("predict", root=True, binary=False)
    ids = [list(map(int, x)) for x, _ in ds.data]
    model.eval()
    logits = []
    with torch.no_grad():
        for i in range(len(ds)):  # one at a time: the code's rows differ in length when cut to n - 1
            logits.extend(model(ds[i][0].unsqueeze(0))[0].float().tolist())
    res: dict[str, Any] = {"encoded": ids, "logits": logits}
    if job.get("evaluate") and "evaluate_one_epoch" in namespace:
        try:
            loss, acc = namespace["evaluate_one_epoch"](
                model, torch.nn.CrossEntropyLoss(), None, ds, batch_size=job["train_kwargs"].get("batch_size", 8)
            )
            res["own_evaluation"] = {"loss": float(loss), "accuracy": float(acc), "n": len(ds)}
        except Exception as exc:  # the code's own evaluation failing is a finding, predictions still stand
            res["own_evaluation_error"] = f"{type(exc).__name__}: {exc}"
    return res


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
