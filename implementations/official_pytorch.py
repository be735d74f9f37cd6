"""Adapter of the official GRU4Rec PyTorch port (hidasib/GRU4Rec_PyTorch_Official @d1fc311).

Registered name: ``official_pytorch``. The port is the yardstick of conformance_checks.md §A.0: it must pass
every check the reference passes; where it does not, the registry (conformance/xfails/official_pytorch.toml)
names the port's own documented quirk.

Driven through its Python API exactly as ``run.py`` does: ``GRU4Rec(**params)``, ``fit(data)`` with the
default ``compatibility_mode=True`` initialisation, and ``evaluation.batch_eval`` with the conservative tie
mode the study used. The code is located by ``implementations._checkout`` (env ``OFFICIAL_GRU4REC_PATH``
or the cache folder). Its default initialisation fails under NumPy >= 2 (a float64 array is ``set_`` into
a float32 parameter), so its tox environment pins NumPy 1.26.
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from contextlib import redirect_stdout
from typing import Any

import numpy as np

from gru4rec_conformance.implementations._checkout import CHECKOUTS, import_path, locate
from gru4rec_conformance.implementations._thirdparty import (
    check_session_frame,
    layers_list,
    patched,
    seed_everything,
    spy_generator,
)
from gru4rec_conformance.implementations.base import Adapter, FitReport, Unsupported
from gru4rec_conformance.implementations.registry import register

_MODULES = ("gru4rec_pytorch", "evaluation")


class OfficialPytorchAdapter(Adapter):
    """hidasib/GRU4Rec_PyTorch_Official @d1fc311, driven like run.py."""

    name = "official_pytorch"
    role = "implementation"
    isolated = True
    checkouts = ("gru4rec_pytorch_official",)
    worker_env = ("OFFICIAL_GRU4REC_PATH",)
    homepage = "https://github.com/hidasib/GRU4Rec_PyTorch_Official"
    description = "Official GRU4Rec PyTorch port (hidasib) @d1fc311"
    study = None
    reproducibility = {
        "installs": "partly: runs with torch 2.13 and pandas 3, but its default compatibility-mode "
        "initialisation raises under NumPy >= 2 (float64 weights set_ into float32 parameters); NumPy 1.26 works",
        "offline": "yes",
        "pinned": "no requirements file (README: PyTorch, NumPy, pandas, optuna for paropt)",
        "hyperparameters": "all official hyperparameters settable (GRU4Rec(...) / set_params / run.py -ps)",
    }

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device=device)
        self.gru: Any = None  # the port's gru4rec_pytorch.GRU4Rec (untyped third-party code)
        self._opt: Any = None  # the port's IndexedAdagradM, seen at its first step (untyped third-party code)

    def _mods(self):
        root = locate("gru4rec_pytorch_official")
        import_path(root, _MODULES)
        import evaluation
        import gru4rec_pytorch

        return gru4rec_pytorch, evaluation

    def version(self) -> str:
        locate("gru4rec_pytorch_official")
        c = CHECKOUTS["gru4rec_pytorch_official"]
        return f"{c.repo}@{c.short}"

    def capabilities(self) -> dict[str, Any]:
        locate("gru4rec_pytorch_official")
        import torch

        return {
            "losses": ["cross-entropy", "bpr-max"],
            "embedding_modes": ["none", "separate", "shared"],
            "session_parallel": True,
            "in_batch_negatives": True,
            "extra_shared_negatives": True,
            "sample_alpha": True,
            "logq": True,
            "adagrad_momentum": True,
            "dropout_embed": True,
            "dropout_hidden": True,
            "separate_dropouts": True,
            "final_acts": ["softmax", "elu", "linear"],
            "bpreg": True,
            "full_ranking": True,
            "needs_categories": False,
            "fixed_batch_shape": False,
            "devices": ["cpu", "cuda"],
            "framework": {"name": "torch", "version": torch.__version__},
            "shims": [
                "FitReport: per-epoch loss recomputed per trained example (sum of the step losses' numerators / "
                "lanes) from the loss function's outputs; steps and lanes counted by wrapping the optimizer step "
                "and the loss function; epochs delimited by the iterator's calls",
                "score_prefixes: prefixes run lane-parallel through model.forward(training=False) from zero "
                "states; an empty prefix is scored from the zero state (score_items of a zero vector)",
                "score_stream: evaluation.batch_eval run unchanged; scores captured by wrapping model.forward, "
                "lane session ids/positions read from the SessionDataIterator generator's locals",
                "final_act translated to the port's rule: softmax <-> cross-entropy, elu -> elu_param "
                "(default 0.5), linear -> elu_param=0",
                "seed: torch.manual_seed and np.random.seed (the port uses the global generators; its "
                "compatibility-mode init reseeds NumPy with 42)",
                "stdout of fit/evaluation captured (the port prints progress)",
            ],
            "score_semantics": "raw",
            "eval_tie_mode": "conservative",
            "hyperparameters": {
                "layers": [100], "loss": "cross-entropy", "batch_size": 64, "dropout_p_embed": 0.0,
                "dropout_p_hidden": 0.0, "learning_rate": 0.05, "momentum": 0.0, "sample_alpha": 0.5,
                "n_sample": 2048, "embedding": 0, "constrained_embedding": True, "n_epochs": 10, "bpreg": 1.0,
                "elu_param": 0.5, "logq": 0.0, "final_act": None,
            },
        }  # fmt: skip

    # -- required ----------------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        g, _ = self._mods()
        import torch

        loss = str(hp.pop("loss"))
        final_act = hp.pop("final_act")
        if final_act is not None:
            fa = str(final_act)
            if fa == "softmax" and loss != "cross-entropy" or fa in ("elu", "linear") and loss != "bpr-max":
                raise Unsupported(f"final_act:{fa}", f"the port ties the final activation to the loss ({loss})")
            if fa == "linear":
                hp["elu_param"] = 0.0
            elif fa.startswith("elu-"):
                hp["elu_param"] = float(fa.split("-", 1)[1])
            elif fa not in ("elu", "softmax"):
                raise Unsupported(f"final_act:{fa}")
        if loss not in ("cross-entropy", "bpr-max"):
            raise Unsupported(f"loss:{loss}")
        hp["layers"] = layers_list(hp["layers"])
        self.seed = int(seed)
        seed_everything(self.seed)
        self.gru = g.GRU4Rec(loss=loss, device=torch.device(self.device), **hp)
        self._trained = False

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        g, _ = self._mods()
        df = check_session_frame(train_df)
        gru = self.gru
        if n_epochs is not None:
            gru.n_epochs = int(n_epochs)
        seed_everything(self.seed)
        report = FitReport()
        state: dict[str, Any] = {"t0": None}
        epoch = {"loss": 0.0, "lanes": 0, "steps": 0}

        def close_epoch():
            if state["t0"] is None:
                return
            report.epoch_losses.append(epoch["loss"] / max(epoch["lanes"], 1))
            report.n_steps.append(epoch["steps"])
            report.n_events_trained.append(epoch["lanes"])
            report.epoch_seconds.append(time.perf_counter() - state["t0"])
            epoch.update(loss=0.0, lanes=0, steps=0)

        inner_call = g.SessionDataIterator.__call__

        def epoch_call(it, *a, **k):  # fit() calls its iterator once per epoch
            close_epoch()
            state["t0"] = time.perf_counter()
            return inner_call(it, *a, **k)

        inner_loss = gru.loss_function

        def counting_loss(O, Y, M):
            value = inner_loss(O, Y, M)
            epoch["loss"] += float(value.detach())
            epoch["lanes"] += int(O.shape[0])
            return value

        inner_step = g.IndexedAdagradM.step
        adapter = self

        def counting_step(opt, *a, **k):
            adapter._opt = opt
            epoch["steps"] += 1
            return inner_step(opt, *a, **k)

        out = io.StringIO()
        with (
            patched(g.SessionDataIterator, "__call__", epoch_call),
            patched(gru, "loss_function", counting_loss),
            patched(g.IndexedAdagradM, "step", counting_step),
            redirect_stdout(out),
        ):
            gru.fit(df, compatibility_mode=True)
        close_epoch()
        if gru.n_epochs == 0 or not report.epoch_losses:
            report = FitReport()
        if getattr(gru, "error_during_train", False):
            raise FloatingPointError(f"the port stopped training on a NaN loss: {out.getvalue()[-300:]}")
        gru.model.eval()
        self._trained = True
        return report

    def item_ids(self) -> np.ndarray:
        return np.asarray(self.gru.data_iterator.itemidmap.index.values).astype(np.int64)

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        import torch

        gru = self.gru
        model = gru.model
        imap = gru.data_iterator.itemidmap
        index = dict(zip(np.asarray(imap.index.values).tolist(), np.asarray(imap.values).tolist()))
        seqs = [[index[int(i)] for i in p if int(i) in index] for p in prefixes]
        out = np.zeros((len(seqs), len(index)), dtype=np.float32)
        dev = torch.device(self.device)
        with torch.no_grad():
            zero = model.score_items(torch.zeros((1, gru.layers[-1]), device=dev), model.Wy.weight, model.By.weight)
            todo = [k for k, s in enumerate(seqs) if s]
            for k, s in enumerate(seqs):
                if not s:
                    out[k] = zero.cpu().numpy()[0]
            for c in range(0, len(todo), 512):
                chunk = todo[c : c + 512]
                H = [torch.zeros((len(chunk), d), device=dev) for d in gru.layers]
                for t in range(max(len(seqs[k]) for k in chunk)):
                    X = torch.tensor([seqs[k][t] if t < len(seqs[k]) else 0 for k in chunk], device=dev)
                    R = model.forward(X, H, None, training=False).cpu().numpy()
                    for lane, k in enumerate(chunk):
                        if t == len(seqs[k]) - 1:
                            out[k] = R[lane]
        return out

    # -- black-box+ ----------------------------------------------------------------------------------------
    def _batch_eval(self, test_df, cutoffs, batch_size, keep_rows: bool):
        g, ev = self._mods()
        gru = self.gru
        df = check_session_frame(test_df, "test_df")
        known = df[df["ItemId"].isin(gru.data_iterator.itemidmap.index.values)]
        session_ids = np.unique(known["SessionId"].to_numpy())
        item_ids = self.item_ids()
        labels: list[tuple] = []
        rows: list[tuple] = []
        inner_cls = ev.SessionDataIterator

        class SpyIterator(inner_cls):  # type: ignore[valid-type, misc]  # the port's iterator, run-time base
            def __call__(self, *a, **k):
                it = self

                def seen(loc, item):
                    iters = np.asarray(loc["iters"])
                    tgt = np.asarray(loc["start"]) + int(loc["i"]) + 1
                    sess = it.session_idx_arr[iters]
                    labels.append((session_ids[sess], tgt - it.offset_sessions[sess], it.data_items[tgt]))

                return spy_generator(super().__call__(*a, **k), seen)

        forward = gru.model.forward

        def recording_forward(X, H, Y, training=False):
            O = forward(X, H, Y, training=training)
            if keep_rows:
                sess, pos, tgt = labels[-1]
                sc = O.detach().cpu().numpy()
                for j in range(len(sess)):
                    rows.append((int(sess[j]), int(pos[j]), int(item_ids[tgt[j]]), sc[j].astype(np.float32)))
            return O

        with (
            patched(ev, "SessionDataIterator", SpyIterator),
            patched(gru.model, "forward", recording_forward),
            redirect_stdout(io.StringIO()),
        ):
            recall, mrr = ev.batch_eval(gru, df, cutoff=list(cutoffs), batch_size=int(batch_size), mode="conservative")
        n = int(sum(len(s) for s, _, _ in labels))
        return recall, mrr, n, rows

    def score_stream(self, test_df: Any, batch_size: int):
        _, _, _, rows = self._batch_eval(test_df, [1], batch_size, keep_rows=True)
        return iter(rows)

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict:
        recall, mrr, n, _ = self._batch_eval(test_df, [int(c) for c in cutoffs], batch_size, keep_rows=False)
        out: dict[str, Any] = {}
        for c in cutoffs:
            out[f"recall@{c}"] = float(recall[int(c)])
            out[f"mrr@{c}"] = float(mrr[int(c)])
        out["n_events"] = n
        return out

    # -- white-box -----------------------------------------------------------------------------------------
    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        g, _ = self._mods()
        import torch

        unknown = set(hparams) - {"bpreg", "elu_param", "logq", "final_act", "column_q"}
        if unknown:
            raise Unsupported(sorted(unknown)[0], "not a parameter of the port's losses")
        if loss not in ("cross-entropy", "bpr-max"):
            raise Unsupported(f"loss:{loss}")
        holder = g.GRU4Rec(loss=loss, device=torch.device("cpu"))
        n_rows, n_cols = np.asarray(scores).shape
        Y = None
        if float(hparams.get("logq", 0.0) or 0.0) > 0:
            if "column_q" not in hparams:
                raise ValueError("loss_on_scores: logq needs column_q (the support of each column's item)")
            # the port's own formula: P0[Y[:B]] for in-batch columns, P0[Y[B:]]**sample_alpha for the samples;
            # the given q are per column, so P0 = q over columns 0..B+S-1 and sample_alpha = 1
            holder.logq = float(hparams["logq"])
            holder.P0 = torch.tensor(np.asarray(hparams["column_q"], dtype=np.float32))
            holder.sample_alpha = 1.0
            Y = torch.arange(n_cols)
        if "bpreg" in hparams:
            holder.bpreg = float(hparams["bpreg"])
        fa = hparams.get("final_act")
        if fa == "linear":
            holder.elu_param = 0.0
        elif "elu_param" in hparams:
            holder.elu_param = float(hparams["elu_param"])
        R = torch.tensor(np.asarray(scores, dtype=np.float32), requires_grad=True)
        B = R.shape[0]
        value = holder.loss_function(R, Y, B) / B  # the step loss of fit(): summed over lanes, divided by B
        value.backward()
        assert R.grad is not None  # backward() of a loss computed from the leaf R fills R.grad
        return float(value.detach()), R.grad.numpy().copy()

    def optimizer_info(self) -> dict:
        if self._opt is None:
            raise RuntimeError("official_pytorch: call fit() with n_epochs >= 1 first")
        grp = self._opt.param_groups[0]
        return {"type": "adagrad", "learning_rate": float(grp["lr"]), "lr_schedule": "constant",
                "initial_accumulator": 0.0, "eps": float(grp["eps"]), "momentum": float(grp["momentum"]),
                "grad_clip": None}  # fmt: skip


register(OfficialPytorchAdapter)
