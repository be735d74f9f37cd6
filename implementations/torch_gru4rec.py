"""Adapters of Torch-GRU4Rec (yeganegi-reza/Torch-GRU4Rec) and of the study's fork.

Registered names:

- ``torch_gru4rec``: upstream yeganegi-reza/Torch-GRU4Rec @744f6b3, as it is;
- ``torch_gru4rec:oob``: the study's fork czappi44/Torch-GRU4Rec @d183c13 (typo fix, ``linear`` final
  activation, a ``main.py``); the study ran it at OOB only (no fix flags exist).

Driven through the ``Modules`` package (docs/implementations.md, 'Code bases from GitHub'): ``Dataset.Dataset`` reads a
temporary CSV, ``Dataset.DataGenerator`` is the session-parallel iterator with its sample store,
``Model.GRU4Rec``, ``Loss.LossFunction``, ``Optimizer.Optimizer``, and ``Trainer.trainEpoch`` per epoch
(``Trainer.train`` evaluates a validation generator every epoch and crashes without one, TG-6);
``Evaluation.evalute`` is the own evaluator. The official loss name ``cross-entropy`` is translated to the
pairing the study used (``lossType='nll'`` with ``finalAct='softmax_logit'``); Torch-GRU4Rec's own
``'cross-entropy'`` loss raises NameError upstream (TG-1).

Every optional hook reaches into the checkout's own objects (translation only, shims declared in
``capabilities()``): ``get_weights``/``set_weights`` read and write the ``Model.GRU4Rec`` module's torch
parameters; ``train_step`` runs the body of ``Trainer.trainEpoch``'s loop with the ``Optimizer`` and
``LossFunction`` that ``fit`` built; ``train_forward`` runs the module's training-mode forward and observes its
sub-modules; ``trace`` observes ``trainEpoch``; ``optimizer_info`` reads the torch optimizer's parameter group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from gru4rec_conformance.implementations import _thirdparty as tp
from gru4rec_conformance.implementations import _torchbase as tb
from gru4rec_conformance.implementations._checkout import import_path, locate, located_version
from gru4rec_conformance.implementations._torchbase import (
    EpochCounts,
    ItemMapIndex,
    OwnEvaluatorByCutoff,
    TorchModuleAdapter,
)
from gru4rec_conformance.implementations.base import Capabilities, FitReport, StepTrace, Unsupported
from gru4rec_conformance.implementations.registry import register

LOSS_NAMES = {"cross-entropy": "nll", "bpr-max": "bpr-max", "top1": "top1", "top1-max": "top1-max", "bpr": "bpr"}
_PACKAGES = ("Modules",)


def _final_act_name(final_act: Any, elu_param: Any, loss: str) -> str:
    """Torch-GRU4Rec's ``finalAct`` for the official names; XE → ``softmax_logit`` (the study's pairing with
    ``nll``), otherwise ``elu-<elu_param>`` with the implementation's default ``elu-1``."""
    if final_act is None:
        return "softmax_logit" if loss == "cross-entropy" else tb.elu_act_name(elu_param, 1.0, linear_at_zero=True)
    return tb.official_act_name(final_act, elu_param, 1.0)


class TorchGRU4RecAdapter(ItemMapIndex, OwnEvaluatorByCutoff, TorchModuleAdapter):
    """Torch-GRU4Rec upstream (yeganegi-reza) @744f6b3."""

    name = "torch_gru4rec"
    label = "torch_gru4rec"
    isolated = True
    checkouts = ("torch_gru4rec", "torch_gru4rec_fork")
    worker_env = ("TORCH_GRU4REC_PATH", "TORCH_GRU4REC_FORK_PATH")
    homepage = "https://github.com/yeganegi-reza/Torch-GRU4Rec"
    description = "Torch-GRU4Rec (yeganegi-reza) @744f6b3, upstream as it is"
    study: ClassVar[Mapping[str, str] | None] = None  # subclasses in the study name their rows
    checkout_key = "torch_gru4rec"
    reproducibility = {
        "installs": "yes on a current stack (torch 2.13, numpy 2, pandas 3); README asks for PyTorch 1.3.1, "
        "Python 3.7, pandas 0.24.2, numpy 1.16.2; no packaging (a folder of modules and a notebook)",
        "offline": "yes",
        "pinned": "no requirements file (versions named in the README only)",
        "hyperparameters": "settable through fitAndEvalute / the modules; momentum accepted and ignored for "
        "Adagrad (TG-3); Adagrad eps hard-coded 1e-6; GRU without biases",
    }

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device=device)
        self._tmp: tp.TempDir | None = None
        self.model: Any = None  # the checkout's Modules.Model.GRU4Rec (untyped third-party code)
        self._train: Any = None  # the checkout's Modules.Dataset.Dataset (untyped third-party code)
        self._gen: Any = None  # the checkout's training Modules.Dataset.DataGenerator (untyped third-party code)

    @property
    def fork(self) -> bool:
        return self.checkout_key.endswith("_fork")

    def version(self) -> str:
        return located_version(self.checkout_key)

    def capabilities(self) -> dict[str, Any]:
        locate(self.checkout_key)
        import torch

        acts = ["tanh", "relu", "softmax", "softmax_logit", "elu", "leaky"] + (["linear"] if self.fork else [])
        sep = "TAB (the fork's main.py)" if self.fork else "comma (Dataset's default)"
        flags = Capabilities.flags("session_parallel", "in_batch_negatives", "extra_shared_negatives",
                                   "sample_alpha", "dropout_embed", "dropout_hidden", "separate_dropouts", "bpreg",
                                   "full_ranking")  # fmt: skip
        return {
            "losses": sorted(LOSS_NAMES),
            "embedding_modes": ["none", "separate"],
            **flags,
            "final_acts": acts,
            "devices": ["cpu"],
            "framework": {"name": "torch", "version": torch.__version__},
            "shims": [
                f"data written to a temporary CSV, {sep}, SessionId/ItemId/Time, read by Modules.Dataset.Dataset",
                "Trainer.trainEpoch called once per epoch (Trainer.train requires a validation generator, TG-6)",
                "loss 'cross-entropy' -> lossType 'nll' with finalAct 'softmax_logit' (the study's pairing; the "
                "module's own 'cross-entropy' loss raises NameError upstream, TG-1)",
                "FitReport.n_steps / n_events_trained counted by wrapping the optimizer step (lanes per step)",
                "score_prefixes: prefixes run lane-parallel through model.forward from initHidden zeros in "
                "chunks of at most the training batch size (one-hot buffer size)",
                "score_prefixes of an empty prefix: finalAct(linear(0)) (the zero state's scores)",
                "score_stream/evaluate: Evaluation.evalute run unchanged on a DataGenerator(nSample=0, "
                "timeSort=False) as the fork's main.py builds it; per-event scores captured by wrapping "
                "Metrics.calc, lane session ids/positions read from the generator's locals",
                "hyperparameters translated: layers=[d]*n -> hiddenSize=d, nLayers=n; embedding=0 -> "
                "embeddingDim=-1 (one-hot)",
                "seed: np.random.seed and torch.manual_seed (the module samples with NumPy's global generator)",
                "get_weights/set_weights: the GRU4Rec module's torch parameters under their torch names "
                "(embedding.weight, gru.weight_ih_l<k>/weight_hh_l<k> with nn.GRU's [r; z; n] row blocks, "
                "linear.weight, linear.bias); item rows in item_ids() order (the module's ItemIdx order)",
                "train_step: the body of Trainer.trainEpoch's loop (model.train(), forward(input, hidden, target) with "
                "target = the targets + the DataGenerator's next sample-store row, drawn as its __iter__ draws it, "
                "loss (len(input) / batchSize) * lossFunc(logit), backward, optim.step(), optim.zero_grad()) with "
                "the Optimizer, LossFunction and DataGenerator fit built",
                "train_forward: the module's forward in training mode from initHidden zeros; embedding output after "
                "dropoutEmb, the last layer's output after dropoutH, the full linear output's shape captured by "
                "forward hooks; the loss gradient of linear.weight by torch.autograd.grad (nothing updated); seed: "
                "torch.manual_seed inside torch.random.fork_rng (dropout draws from torch's global RNG)",
            ],
            "score_semantics": "post-activation",
            "eval_tie_mode": "standard",
            "gate_layout": ["reset", "update", "candidate"],
            "hyperparameters": {
                "layers": [100],
                "loss": "bpr-max",
                "batch_size": 32,
                "learning_rate": 0.05,
                "momentum": 0.0,
                "dropout_p_embed": 0.0,
                "dropout_p_hidden": 0.0,
                "embedding": 0,
                "final_act": None,
                "elu_param": None,
                "n_sample": 2048,
                "sample_alpha": 0.75,
                "bpreg": 1.0,
                "n_epochs": 10,
                "optimizer": "adagrad",
            },
        }

    # -- helpers -----------------------------------------------------------------------------------------
    def _modules(self):
        root = locate(self.checkout_key)
        import_path(root, _PACKAGES)
        import Modules.Dataset
        import Modules.Evaluation
        import Modules.Loss
        import Modules.Metrics
        import Modules.Model
        import Modules.Optimizer
        import Modules.Trainer

        return Modules

    def _dataset(self, df, name: str, item_map=None):
        M = self._modules()
        assert self._tmp is not None
        path = self._tmp.path / f"{name}.csv"
        sep = "\t" if self.fork else ","
        tp.write_sessions(df, path, sep)
        return M.Dataset.Dataset(str(path), sep=sep, itemMap=item_map)

    # -- required ----------------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        acts = self.capabilities()["final_acts"]
        layers, loss, act, emb = tb.one_width_gru_hparams(hp, LOSS_NAMES, _final_act_name, acts, "finalAct")
        self.hp = hp
        self.seed = int(seed)
        self.settings: dict[str, Any] = dict(
            hiddenSize=layers[0], nLayers=len(layers), batchSize=int(hp["batch_size"]),
            dropoutHidden=float(hp["dropout_p_hidden"]), dropoutEmbed=float(hp["dropout_p_embed"]),
            embeddingDim=emb if emb > 0 else -1, finalAct=act, lossType=LOSS_NAMES[loss],
            lr=float(hp["learning_rate"]), momentum=float(hp["momentum"]), optimizerType=str(hp["optimizer"]),
            nSample=int(hp["n_sample"]), sampleAlpha=float(hp["sample_alpha"]), bpreg=float(hp["bpreg"]),
            nEpochs=int(hp["n_epochs"]),
        )  # fmt: skip
        if self._tmp is None:
            self._tmp = tp.TempDir("torch-gru4rec-")
        self.model = None
        self._train = None
        self._gen = None

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        M = self._modules()
        df = tp.check_session_frame(train_df)
        s = self.settings
        tp.seed_everything(self.seed)
        train = self._dataset(df, "train")
        self._train = train
        adapter = self
        lanes: dict[str, Any] = {}
        counts = EpochCounts()

        # the base is the checkout's DataGenerator, imported at run time
        class SpyGenerator(M.Dataset.DataGenerator):  # type: ignore[name-defined]
            def __iter__(self):
                def seen(loc, item):
                    counts.events += int(len(item[0]))
                    lanes.clear()
                    lanes.update(loc)
                    lanes["_target"] = item[1]

                return tp.spy_generator(super().__iter__(), seen)

        gen = SpyGenerator(train, batchSize=s["batchSize"], nSample=s["nSample"], sampleAlpha=s["sampleAlpha"],
                           timeSort=True, trainRandomOrder=False)  # fmt: skip
        self._gen = gen
        n_items = train.nItems
        model = M.Model.GRU4Rec(inputSize=n_items, outputSize=n_items, hiddenSize=s["hiddenSize"],
                                nLayers=s["nLayers"], batchSize=s["batchSize"], negative=True,
                                embeddingDim=s["embeddingDim"], dropoutHidden=s["dropoutHidden"],
                                dropoutEmbed=s["dropoutEmbed"], finalAct=s["finalAct"], cuda=False)  # fmt: skip
        self.model = model
        self.loss_func = M.Loss.LossFunction(lossType=s["lossType"], useCuda=False, bpreg=s["bpreg"])
        self.optim = M.Optimizer.Optimizer(model.parameters(), optimizerType=s["optimizerType"], lr=s["lr"],
                                           momentum=s["momentum"], weightDecay=0)  # fmt: skip
        assert self._tmp is not None  # build() created it; _dataset() above needs it too
        trainer = M.Trainer.Trainer(model, trainGenerator=gen, validGenerator=None, optim=self.optim,
                                    lossFunc=self.loss_func, topN=20, resultDir=str(self._tmp.path))  # fmt: skip
        epochs = s["nEpochs"] if n_epochs is None else int(n_epochs)
        report = FitReport(trace=[] if self._trace_on else None)
        counting_step = counts.counting(self.optim.optimizer.step)
        forward = model.forward

        def traced_forward(inp, hidden, target=None):
            if adapter._trace_on and model.training:
                report.trace.append(adapter._step_trace(lanes, hidden))
            return forward(inp, hidden, target)

        def epoch_run(epoch: int) -> Any:
            with tp.patched(self.optim.optimizer, "step", counting_step), tp.patched(model, "forward", traced_forward):
                return trainer.trainEpoch(epoch)

        tb.run_trainer_epochs(report, epochs, counts, epoch_run)
        model.eval()
        return report

    def _step_trace(self, loc: Mapping[str, Any], hidden) -> StepTrace:
        train = self._train
        n_lanes, target = len(loc["iters"]), np.asarray(loc["_target"])  # targets, then the shared negatives
        negs = self.item_ids()[target[n_lanes:]] if len(target) > n_lanes else None
        return tb.lane_step_trace(loc, train.data[train.sessionKey].to_numpy(),
                                  lambda iters: train.offsetSessions[np.asarray(loc["sessionIdxArr"])[iters]],
                                  hidden, self.settings["lr"], negs)  # fmt: skip

    def _item_map(self) -> tuple[Any, str, str] | None:
        return None if self._train is None else (self._train.itemMap, self._train.itemKey, "ItemIdx")

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("torch_gru4rec: call fit() first")
        import torch

        model = self.model
        model.eval()
        seqs = self._known_indices(prefixes)
        with torch.no_grad():
            zero = model.finalAct(model.linear(torch.zeros(1, model.hiddenSize))).numpy()[0]
            return tb.lane_parallel_scores(seqs, len(self._index_of()), int(model.batchSize), zero, model.initHidden,
                                        lambda inp, hidden: model(torch.as_tensor(inp), hidden))  # fmt: skip

    # -- black-box+ ----------------------------------------------------------------------------------------
    def _run_eval(self, test_df, batch_size: int, k: int, keep_rows: bool):
        M = self._modules()
        df = tp.check_session_frame(test_df, "test_df")
        test = self._dataset(df, "test", item_map=self._train.itemMap)
        labels: list[tuple] = []
        rows: list[tuple] = []
        item_ids = self.item_ids()
        sess_col = test.data[test.sessionKey].to_numpy()
        items_col = test.data["ItemIdx"].to_numpy()

        # the base is the checkout's DataGenerator, imported at run time
        class SpyGenerator(M.Dataset.DataGenerator):  # type: ignore[name-defined]
            def __iter__(self):
                def seen(loc, item):
                    def first(iters):
                        return test.offsetSessions[np.asarray(loc["sessionIdxArr"])[iters]]

                    labels.append(tb.lane_labels(loc, first, sess_col, items_col))

                return tp.spy_generator(super().__iter__(), seen)

        gen = SpyGenerator(test, batchSize=int(batch_size), nSample=0, sampleAlpha=0.0, timeSort=False,
                           trainRandomOrder=False)  # fmt: skip
        inner = M.Metrics.calc

        def recording_calc(logits, targets, k=20):
            if keep_rows:
                tb.add_score_rows(rows, labels[-1], item_ids, logits)
            return inner(logits, targets, k=k)

        evaluation = M.Evaluation.Evaluation(self.model, k=k)
        with tp.patched(M.Metrics, "calc", recording_calc):
            _, recall, mrr = evaluation.evalute(gen)
        return float(recall), float(mrr), int(sum(len(s) for s, _, _ in labels)), rows

    # -- white-box -----------------------------------------------------------------------------------------
    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        M = self._modules()

        R = np.asarray(scores, dtype=np.float32)
        if loss not in LOSS_NAMES:
            raise Unsupported(f"loss:{loss}")
        unknown = set(hparams) - {"final_act", "elu_param", "bpreg"}
        if unknown:
            raise Unsupported(sorted(unknown)[0], "not a parameter of the implementation's losses")
        act = _final_act_name(hparams.get("final_act"), hparams.get("elu_param"), loss)
        holder = M.Model.GRU4Rec(inputSize=2, outputSize=2, hiddenSize=1, finalAct=act, cuda=False)
        if isinstance(holder.finalAct, str):
            raise Unsupported(f"final_act:{tb.act_family(act)}")
        fn = M.Loss.LossFunction(lossType=LOSS_NAMES[loss], useCuda=False, bpreg=float(hparams.get("bpreg", 1.0)))
        return tb.loss_and_gradient(R, lambda t: fn(holder.finalAct(t)))

    def optimizer_info(self) -> dict:
        """The torch optimizer's first parameter group (``Optimizer.optimizer``), lower-case vocabulary."""
        self._require_evaluable()
        return tb.constant_lr_info(self.optim.optimizer)

    def _fitted_model(self) -> Any:
        """The checkout's ``Model.GRU4Rec``, whose parameters ``get_weights`` shows as float32 arrays under their
        torch names: ``embedding.weight`` (n_items, embeddingDim; separate embedding only), ``gru.weight_ih_l<k>``
        (3·d, n_in; n_in = n_items in the one-hot mode) and ``gru.weight_hh_l<k>`` (3·d, d), row blocks [r; z; n] of
        ``nn.GRU`` (= gate_layout; the GRU has no biases, TG-5), ``linear.weight`` (n_items, d) and
        ``linear.bias`` (n_items,). Item axes in :meth:`item_ids` order."""
        return self.model

    def _next_sample(self) -> np.ndarray:
        """The next extra-negative row as the training DataGenerator's ``__iter__`` draws it (its sample store and
        pointer, refilled by its own ``generateNegSamples`` when used up; one fresh draw without a store); empty
        when nSample = 0."""
        gen = self._gen
        if not gen.nSample:
            return np.zeros(0, dtype=np.int64)
        if gen.sampleStore:
            if gen.samplePointer == gen.generatelength:
                gen.negativSamples = gen.generateNegSamples(gen.pop, gen.generatelength)
                gen.samplePointer = 0
            sample = gen.negativSamples[gen.samplePointer]
            gen.samplePointer += 1
        else:
            sample = gen.generateNegSamples(gen.pop, 1)
        return np.asarray(sample, dtype=np.int64)

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One update exactly as the body of ``Trainer.trainEpoch``'s loop: ``model.train()``, ``logit, hidden =
        model(input, hidden, target)`` with target = the targets followed by the generator's next sample row,
        ``loss = (len(input) / batchSize) * lossFunc(logit)`` (batchSize: the generator's), and unless the loss is
        NaN ``loss.backward()``, ``optim.step()``, ``optim.zero_grad()``. ``hidden``: (nLayers, b, d) array or a
        list of per-layer (b, d) arrays (default ``initHidden`` zeros). Returns the loss."""
        import torch

        model = self._require_model()
        x = self._indices(batch_inputs, "batch_inputs")
        t = self._indices(batch_targets, "batch_targets")
        if len(x) != len(t):
            raise ValueError(f"batch_targets: expected {len(x)} item(s), got {len(t)}")
        if hidden is None:
            h = model.initHidden(len(x))
        else:
            h = tb.hidden_tensor(hidden)
        y = np.hstack([t, self._next_sample()])
        model.train()
        logit, _ = model(torch.LongTensor(x), h, torch.LongTensor(y))
        loss = (float(len(x)) / float(self._gen.batchSize)) * self.loss_func(logit)
        if ~np.isnan(loss.item()):
            loss.backward()
            self.optim.step()
            self.optim.zero_grad()
        model.eval()
        return float(loss.item())

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """The module's training-mode forward (``model.train()``, ``model(input, hidden, target)``) of b equally
        long sequences from ``initHidden`` zeros; the result describes the last transition and nothing is updated.

        Returns ``embedding_out`` (b, embeddingDim): the embedding after ``dropoutEmb`` (None in the one-hot mode,
        which has no embedding), ``layer_outputs``: the GRU output after ``dropoutH`` (one layer; below the last
        layer ``nn.GRU`` applies its dropout internally, so more layers raise Unsupported), ``scores`` (b, b+S) the
        post-activation training scores of ``columns`` (targets, then the generator's next sample row),
        ``score_tensor_shape`` the shape of the ``linear`` output the step computes, ``output_rows_touched`` the
        rows of ``linear.weight`` with a non-zero gradient of the step's loss."""
        import torch

        model = self._require_model()
        if int(model.nLayers) != 1:
            raise Unsupported("train_forward:layers", tb.ONE_LAYER_ONLY)
        arr = tb.prefix_array(self._index_of(), prefix_batch)
        b = len(arr)
        captured: dict[str, Any] = {}

        def keep(key):
            # nn.GRU returns (output, h_n): its output (1, b, d) is kept
            return lambda mod, a, o: captured.__setitem__(key, (o[0] if isinstance(o, tuple) else o).detach())

        mods = {"embed": getattr(model, "embedding", None), "embed_drop": getattr(model, "dropoutEmb", None),
                "gru": model.gru, "hidden_drop": getattr(model, "dropoutH", None), "linear": model.linear}  # fmt: skip
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model.train()
            try:
                h = model.initHidden(b)
                with torch.no_grad():
                    for k in range(arr.shape[1] - 2):
                        _, h = model(torch.LongTensor(arr[:, k]), h, torch.LongTensor(arr[:, k + 1]))
                y = np.hstack([arr[:, -1], self._next_sample()])
                handles = [m.register_forward_hook(keep(key)) for key, m in mods.items() if m is not None]
                try:
                    logit, _ = model(torch.LongTensor(arr[:, -2]), h, torch.LongTensor(y))
                finally:
                    for hd in handles:
                        hd.remove()
                loss = (float(b) / float(self._gen.batchSize)) * self.loss_func(logit)
                (g,) = torch.autograd.grad(loss, [model.linear.weight])
            finally:
                model.eval()
        embed = captured.get("embed_drop", captured.get("embed"))
        layer = captured.get("hidden_drop")
        if layer is None:
            layer = captured["gru"].reshape(b, -1)
        return {
            "embedding_out": None if embed is None else embed.reshape(b, -1).cpu().numpy(),
            "layer_outputs": [layer.cpu().numpy()],
            "scores": logit.detach().cpu().numpy(),
            "columns": self.item_ids()[y],
            "score_tensor_shape": tuple(int(n) for n in captured["linear"].shape),
            "output_rows_touched": tp.rows_touched(g),
        }


class TorchGRU4RecOOB(TorchGRU4RecAdapter):
    """The study's fork czappi44/Torch-GRU4Rec @d183c13 (OOB, the only level the study ran)."""

    name = "torch_gru4rec:oob"
    checkout_key = "torch_gru4rec_fork"
    homepage = "https://github.com/czappi44/Torch-GRU4Rec"
    description = "czappi44/Torch-GRU4Rec @d183c13 (the study's fork: typo fix, linear final act), OOB"
    study = {"implementation": "Torch-GRU4Rec", "variant": "OOB"}


register(TorchGRU4RecAdapter)
register(TorchGRU4RecOOB)
