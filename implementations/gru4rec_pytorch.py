"""Adapters of GRU4REC-pytorch (hungpthanh/GRU4REC-pytorch) and of the study's fork with its fix levels.

Registered names:

- ``gru4rec_pytorch``: upstream hungpthanh/GRU4REC-pytorch @666b842, as it is;
- ``gru4rec_pytorch:oob``, ``gru4rec_pytorch:inference_fix``, ``gru4rec_pytorch:major_fix``: the study's fork
  czappi44/GRU4REC-pytorch @eaad3eb with the flags its notebook (hidasib/gru4rec_third_party_comparison,
  ``example_gru4rec_pytorch.ipynb``) passes at each level: none; ``--eval_hidden_reset``;
  ``--eval_hidden_reset --use_correct_loss --use_correct_mask_reset``.

The code is located by ``implementations._checkout`` (env ``GRU4REC_PYTORCH_PATH`` /
``GRU4REC_PYTORCH_FORK_PATH`` or the cache folder) and driven through its Python API (docs/implementations.md,
'Code bases from GitHub'): ``lib.Dataset`` reads a temporary CSV in the format ``main.py`` uses, ``lib.GRU4REC``,
``lib.LossFunction``, ``lib.Optimizer`` and ``lib.Trainer.train_epoch`` train (``Trainer.train`` insists on
evaluating a validation set and writing checkpoints every epoch), ``lib.Evaluation.eval`` is the own
evaluator. Shims are listed in :meth:`GRU4RecPytorchAdapter.capabilities`; none changes what the code
computes.

Every optional hook reaches into the checkout's own objects: ``get_weights``/``set_weights`` read and write the
``lib.GRU4REC`` module's torch parameters; ``train_step`` runs the body of ``Trainer.train_epoch``'s loop with the
``lib.Optimizer`` and ``lib.LossFunction`` that ``fit`` built; ``train_forward`` runs the module's training-mode
forward and observes its sub-modules; ``trace`` observes ``train_epoch``; ``optimizer_info`` reads the torch
optimizer's parameter group.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
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

# Flags of czappi44/GRU4REC-pytorch main.py per fix level (example_gru4rec_pytorch.ipynb).
LEVEL_FLAGS = {
    "upstream": {},
    "oob": {"eval_hidden_reset": False, "use_correct_loss": False, "use_correct_mask_reset": False},
    "inference_fix": {"eval_hidden_reset": True, "use_correct_loss": False, "use_correct_mask_reset": False},
    "major_fix": {"eval_hidden_reset": True, "use_correct_loss": True, "use_correct_mask_reset": True},
}
LOSS_NAMES = {"cross-entropy": "CrossEntropy", "bpr-max": "BPR-max", "top1": "TOP1", "top1-max": "TOP1-max",
              "bpr": "BPR"}  # fmt: skip
_PACKAGES = ("lib",)


def _final_act_name(final_act: Any, elu_param: Any, loss: str) -> str:
    """The implementation's ``final_act`` string for the official names ``final_act``/``elu_param``.

    Without an explicit ``final_act``: cross-entropy → ``softmax`` (what the study passed for XE),
    bpr-max → ``elu-<elu_param>`` (``linear`` when 0), the other losses → ``tanh`` (main.py's default).
    """
    if final_act is None:
        if loss == "cross-entropy":
            return "softmax"
        return tb.elu_act_name(elu_param, 0.5, linear_at_zero=True) if loss == "bpr-max" else "tanh"
    return tb.official_act_name(final_act, elu_param, 0.5)


class GRU4RecPytorchAdapter(ItemMapIndex, OwnEvaluatorByCutoff, TorchModuleAdapter):
    """GRU4REC-pytorch (hungpthanh) and its fix-level fork (czappi44): see the module docstring."""

    name = "gru4rec_pytorch"
    label = "gru4rec_pytorch"
    isolated = True
    checkouts = ("gru4rec_pytorch", "gru4rec_pytorch_fork")
    worker_env = ("GRU4REC_PYTORCH_PATH", "GRU4REC_PYTORCH_FORK_PATH")
    homepage = "https://github.com/hungpthanh/GRU4REC-pytorch"
    description = "GRU4REC-pytorch (hungpthanh) @666b842, upstream as it is"
    study: ClassVar[Mapping[str, str] | None] = None  # subclasses in the study name their rows
    reproducibility = {
        "installs": "yes on a current stack (torch 2.13, numpy 2, pandas 3) although its README asks for "
        "PyTorch 0.4.1 / Python 3.5; no packaging (a folder of scripts)",
        "offline": "yes",
        "pinned": "no: README names versions, no requirements file; the study pinned its own conda env",
        "hyperparameters": "settable through main.py flags; n_sample, sample_alpha, bpreg, logq missing; "
        "momentum and eps accepted and ignored for Adagrad (GP-9)",
    }

    def __init__(self, device: str = "cpu", level: str = "upstream") -> None:
        super().__init__(device=device)
        if level not in LEVEL_FLAGS:
            raise ValueError(f"level: expected one of {sorted(LEVEL_FLAGS)}, got {level!r}")
        self.level = level
        self.fork = level != "upstream"
        self._checkout_key = "gru4rec_pytorch_fork" if self.fork else "gru4rec_pytorch"
        self._tmp: tp.TempDir | None = None
        self.model: Any = None  # the checkout's lib.GRU4REC (untyped third-party code)

    # -- declarations -------------------------------------------------------------------------------------
    def version(self) -> str:
        return located_version(self._checkout_key) + (f" level={self.level}" if self.fork else "")

    def capabilities(self) -> dict[str, Any]:
        locate(self._checkout_key)
        import torch

        acts = ["tanh", "relu", "softmax", "softmax_logit", "elu", "leaky"] + (["linear"] if self.fork else [])
        shims = [
            "training data written to a temporary CSV ("
            + (
                "TAB, SessionId/ItemId/Time, as the fork's main.py"
                if self.fork
                else "comma, SessionID/ItemID/Time, the upstream Dataset defaults"
            )
            + ") and read by lib.Dataset",
            "Trainer.train_epoch called once per epoch (Trainer.train also evaluates a validation set and "
            "writes a checkpoint every epoch)",
            "FitReport.n_steps / n_events_trained counted by wrapping the optimizer step (lanes per step)",
            "score_prefixes: prefixes run lane-parallel through model.forward from init_hidden() zeros, padded "
            "to the model's batch_size (fixed one-hot buffer and hidden-state size); padding lanes discarded",
            "score_prefixes of an empty prefix: final activation of h2o(0) (the zero state's scores)",
            "score_stream/evaluate: lib.Evaluation.eval run unchanged; per-event scores captured by wrapping "
            "lib.evaluate, lane session ids/positions read from the DataLoader generator's locals",
            "score_stream/evaluate with an evaluation batch size != training batch_size: model.batch_size and "
            "its one-hot buffer resized for the call (weights untouched); the implementation itself ties "
            "them (main.py evaluates with the training batch size)",
            "hyperparameters translated: layers=[d]*n -> hidden_size=d, num_layers=n; embedding=0 -> "
            "embedding_dim=-1 (one-hot), k -> k; loss names -> CrossEntropy/BPR-max/TOP1/TOP1-max/BPR; "
            "final_act default softmax for cross-entropy and elu-<elu_param> for bpr-max (the study's flags)",
            "seed: np.random.seed and torch.manual_seed as main.py does",
            "get_weights/set_weights: the GRU4REC module's torch parameters under their torch names (look_up.weight, "
            "gru.weight_ih_l<k>/weight_hh_l<k>/bias_ih_l<k>/bias_hh_l<k> with nn.GRU's [r; z; n] row blocks, "
            "h2o.weight, h2o.bias); item rows in item_ids() order (the module's item_idx order)",
            "train_step: the body of Trainer.train_epoch's loop (optim.zero_grad(), logit, hidden = model(input, "
            "hidden), loss = loss_func(logit[:, target]), backward, optim.step()) in train mode with the "
            "Optimizer and LossFunction fit built; train_step/train_forward size model.batch_size and its one-hot "
            "buffer to the call's lanes (weights untouched), as for evaluation",
            "train_forward: the module's forward in training mode from zero states; the GRU input (after the "
            "embedding dropout), the h2o input (the last layer's output after any hidden dropout) and the h2o "
            "output's shape captured by forward hooks; the loss of logit[:, target] as the trainer samples it; "
            "the loss gradient of h2o.weight by torch.autograd.grad (nothing updated); seed: torch.manual_seed "
            "inside torch.random.fork_rng (dropout draws from torch's global RNG)",
        ]
        flags = Capabilities.flags("session_parallel", "in_batch_negatives", "dropout_embed", "dropout_hidden",
                                   "separate_dropouts", "full_ranking", "fixed_batch_shape")  # fmt: skip
        return {
            "losses": sorted(LOSS_NAMES),
            "embedding_modes": ["none", "separate"],
            **flags,
            "final_acts": acts,
            "devices": ["cpu"],
            "framework": {"name": "torch", "version": torch.__version__},
            "shims": shims,
            "score_semantics": "post-activation",
            "eval_tie_mode": "standard",
            "gate_layout": ["reset", "update", "candidate"],
            # main.py defaults (upstream; the fork changed both dropouts to 0.0)
            "hyperparameters": {
                "layers": [100, 100, 100],
                "loss": "top1-max",
                "batch_size": 50,
                "learning_rate": 0.01,
                "momentum": 0.0,
                "dropout_p_embed": 0.0,
                "dropout_p_hidden": 0.0 if self.fork else 0.5,
                "embedding": 0,
                "final_act": None,
                "elu_param": None,
                "n_epochs": 5,
                "optimizer": "adagrad",
            },
        }

    # -- helpers ---------------------------------------------------------------------------------------
    def _lib(self):
        root = locate(self._checkout_key)
        import_path(root, _PACKAGES)
        import lib  # the implementation's package

        return lib

    def _flags(self) -> dict[str, bool]:
        return dict(LEVEL_FLAGS[self.level])

    def _dataset(self, df, name: str, itemmap=None):
        lib = self._lib()
        assert self._tmp is not None
        path = self._tmp.path / f"{name}.csv"
        if self.fork:
            tp.write_sessions(df, path, "\t")
            return lib.Dataset(str(path), sep="\t", session_key="SessionId", item_key="ItemId", time_key="Time",
                               itemmap=itemmap)  # fmt: skip
        tp.write_sessions(df, path, ",", ("SessionID", "ItemID", "Time"))
        return lib.Dataset(str(path), itemmap=itemmap)

    # -- required ------------------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        hp = self.resolve_hparams(hparams)
        acts = self.capabilities()["final_acts"]
        layers, loss, act, emb = tb.one_width_gru_hparams(hp, LOSS_NAMES, _final_act_name, acts, "final_act")
        opt = str(hp["optimizer"]).lower()
        opt_names = {"adagrad": "Adagrad", "adam": "Adam", "rmsprop": "RMSProp", "sgd": "SGD", "adadelta": "Adadelta"}
        if opt not in opt_names:
            raise Unsupported(f"optimizer:{opt}")
        self.hp = hp
        self.seed = int(seed)
        self.settings: dict[str, Any] = dict(
            hidden_size=layers[0], num_layers=len(layers), batch_size=int(hp["batch_size"]),
            dropout_input=float(hp["dropout_p_embed"]), dropout_hidden=float(hp["dropout_p_hidden"]),
            embedding_dim=emb if emb > 0 else -1, final_act=act, loss_type=LOSS_NAMES[loss],
            lr=float(hp["learning_rate"]), momentum=float(hp["momentum"]), optimizer_type=opt_names[opt],
            n_epochs=int(hp["n_epochs"]),
        )  # fmt: skip
        if self._tmp is None:
            self._tmp = tp.TempDir("gru4rec-pytorch-")
        self.model = None
        self._train: Any = None  # the checkout's lib.Dataset (untyped third-party code)

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        lib = self._lib()
        import torch

        df = tp.check_session_frame(train_df)
        s = self.settings
        tp.seed_everything(self.seed)
        train = self._dataset(df, "train")
        self._train = train
        n_items = len(train.items)
        kw = dict(final_act=s["final_act"], num_layers=s["num_layers"], use_cuda=False, batch_size=s["batch_size"],
                  dropout_input=s["dropout_input"], dropout_hidden=s["dropout_hidden"],
                  embedding_dim=s["embedding_dim"])  # fmt: skip
        flags = self._flags()
        if self.fork:
            kw["use_correct_loss"] = flags["use_correct_loss"]
        model = lib.GRU4REC(n_items, s["hidden_size"], n_items, **kw)
        self.model = model
        loss_kw = {"use_correct_loss": flags["use_correct_loss"]} if self.fork else {}
        self.loss_func = lib.LossFunction(loss_type=s["loss_type"], use_cuda=False, **loss_kw)
        self.optim = lib.Optimizer(model.parameters(), optimizer_type=s["optimizer_type"], lr=s["lr"],
                                   weight_decay=0, momentum=s["momentum"], eps=1e-6)  # fmt: skip
        assert self._tmp is not None  # build() created it; _dataset() above needs it too
        args = types.SimpleNamespace(k_eval=20, checkpoint_dir=str(self._tmp.path))
        tr_kw = {"use_correct_mask_reset": flags["use_correct_mask_reset"]} if self.fork else {}
        trainer = lib.Trainer(model, train_data=train, eval_data=None, optim=self.optim, use_cuda=False,
                              loss_func=self.loss_func, batch_size=s["batch_size"], args=args, **tr_kw)  # fmt: skip
        epochs = s["n_epochs"] if n_epochs is None else int(n_epochs)
        report = FitReport(trace=[] if self._trace_on else None)
        counts = EpochCounts()
        counting_step = counts.counting(self.optim.optimizer.step)
        lanes: dict[str, Any] = {}
        loader_cls = lib.DataLoader
        adapter = self

        # observes the lanes; yields exactly what the original yields. The base is the checkout's DataLoader,
        # known only at run time
        class SpyLoader(loader_cls):  # type: ignore[valid-type, misc]
            def __iter__(self):
                def seen(loc, item):
                    counts.events += int(len(item[0]))
                    lanes.update(loc)

                return tp.spy_generator(super().__iter__(), seen)

        forward = model.forward

        def traced_forward(inp, hidden):
            if adapter._trace_on and model.training:
                report.trace.append(adapter._step_trace(lanes, hidden))
            return forward(inp, hidden)

        def epoch_run(epoch: int) -> Any:
            with (
                tp.patched(self.optim.optimizer, "step", counting_step),
                tp.patched(lib, "DataLoader", SpyLoader),
                tp.patched(model, "forward", traced_forward),
            ):
                return trainer.train_epoch(epoch)

        tb.run_trainer_epochs(report, epochs, counts, epoch_run)
        model.eval()
        torch.set_grad_enabled(True)
        return report

    def _step_trace(self, loc: Mapping[str, Any], hidden) -> StepTrace:
        train = self._train
        return tb.lane_step_trace(loc, train.df[train.session_key].to_numpy(),
                                  lambda iters: train.click_offsets[train.session_idx_arr[iters]], hidden,
                                  self.settings["lr"])  # fmt: skip

    def _item_map(self) -> tuple[Any, str, str] | None:
        return None if self._train is None else (self._train.itemmap, self._train.item_key, "item_idx")

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("gru4rec_pytorch: call fit() first")
        import torch

        model = self.model
        model.eval()
        seqs = self._known_indices(prefixes)
        with torch.no_grad():
            zero_scores = model.final_activation(model.h2o(torch.zeros(1, model.hidden_size))).numpy()[0]
            return tb.lane_parallel_scores(seqs, len(self._index_of()), model.batch_size, zero_scores,
                                        lambda n: model.init_hidden(),
                                        lambda inp, hidden: model(torch.as_tensor(inp), hidden),
                                        fixed_width=True)  # fmt: skip

    # -- black-box+ ----------------------------------------------------------------------------------------
    def _run_eval(self, test_df, batch_size: int, k: int, keep_rows: bool):
        """One run of lib.Evaluation.eval; returns (mean loss, recall, mrr, rows) where rows are
        (session_id, position, target_item, scores_row) when ``keep_rows``."""
        lib = self._lib()
        model = self.model
        df = tp.check_session_frame(test_df, "test_df")
        test = self._dataset(df, "test", itemmap=self._train.itemmap)
        flags = self._flags()
        ev_kw = {"eval_hidden_reset": flags["eval_hidden_reset"],
                 "use_correct_mask_reset": flags["use_correct_mask_reset"]} if self.fork else {}  # fmt: skip
        evaluation = lib.Evaluation(model, self.loss_func, use_cuda=False, k=k, **ev_kw)
        labels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        rows: list[tuple] = []
        item_ids = self.item_ids()
        sess_col = test.df[test.session_key].to_numpy()
        items_col = test.df["item_idx"].to_numpy()
        loader_cls = lib.DataLoader

        class SpyLoader(loader_cls):  # type: ignore[valid-type, misc]  # the checkout's DataLoader, run-time base
            def __iter__(self):
                def seen(loc, item):
                    def first(iters):
                        return test.click_offsets[test.session_idx_arr[iters]]

                    labels.append(tb.lane_labels(loc, first, sess_col, items_col))

                return tp.spy_generator(super().__iter__(), seen)

        inner_evaluate = lib.evaluate

        def recording_evaluate(logit, target, k=20):
            if keep_rows:
                tb.add_score_rows(rows, labels[-1], item_ids, logit)
            return inner_evaluate(logit, target, k=k)

        old_b, old_buf = model.batch_size, model.onehot_buffer
        try:
            model.batch_size = int(batch_size)
            model.onehot_buffer = model.init_emb()
            with tp.patched(lib, "DataLoader", SpyLoader), tp.patched(lib, "evaluate", recording_evaluate):
                loss, recall, mrr = evaluation.eval(test, int(batch_size))
        finally:
            model.batch_size, model.onehot_buffer = old_b, old_buf
        n_events = int(sum(len(s) for s, _, _ in labels))
        return float(recall), float(mrr), n_events, rows

    # -- white-box -----------------------------------------------------------------------------------------
    def loss_on_scores(self, scores: Any, loss: str, **hparams: Any) -> tuple[float, Any]:
        lib = self._lib()

        R = np.asarray(scores, dtype=np.float32)
        if loss not in LOSS_NAMES:
            raise Unsupported(f"loss:{loss}")
        if loss == "cross-entropy" and (R.ndim != 2 or R.shape[0] != R.shape[1]):
            # SampledCrossEntropyLoss targets arange(n_columns): defined for in-batch negatives only
            raise Unsupported("extra_shared_negatives", "the cross-entropy loss takes a square B x B matrix")
        if float(hparams.get("bpreg", 0.0) or 0.0) != 0.0:
            raise Unsupported("bpreg", "BPR-max has no score regularisation term (GP-6)")
        unknown = set(hparams) - {"final_act", "elu_param", "bpreg"}
        if unknown:
            raise Unsupported(sorted(unknown)[0], "not a parameter of the implementation's losses")
        flags = self._flags()
        act_name = _final_act_name(hparams.get("final_act"), hparams.get("elu_param"), loss)
        kw = {"use_correct_loss": flags["use_correct_loss"]} if self.fork else {}
        holder = lib.GRU4REC(2, 1, 2, final_act=act_name, num_layers=1, use_cuda=False, batch_size=1,
                             dropout_hidden=0.0, **kw)  # fmt: skip
        if not hasattr(holder, "final_activation"):
            raise Unsupported(f"final_act:{tb.act_family(act_name)}")
        loss_kw = {"use_correct_loss": flags["use_correct_loss"]} if self.fork else {}
        fn = lib.LossFunction(loss_type=LOSS_NAMES[loss], use_cuda=False, **loss_kw)
        return tb.loss_and_gradient(R, lambda t: fn(holder.final_activation(t)))

    def optimizer_info(self) -> dict:
        """The torch optimizer's first parameter group (``lib.Optimizer.optimizer``), lower-case vocabulary."""
        self._require_evaluable()
        return tb.constant_lr_info(self.optim.optimizer)

    def _fitted_model(self) -> Any:
        """The checkout's ``lib.GRU4REC``, whose parameters ``get_weights`` shows as float32 arrays under their torch
        names: ``look_up.weight`` (n_items, embedding_dim; separate embedding only), ``gru.weight_ih_l<k>`` (3·d,
        n_in; n_in = n_items in the one-hot mode), ``gru.weight_hh_l<k>`` (3·d, d), ``gru.bias_ih_l<k>``/
        ``bias_hh_l<k>`` (3·d,), row blocks [r; z; n] of ``nn.GRU`` (= gate_layout), ``h2o.weight`` (n_items, d) and
        ``h2o.bias`` (n_items,). Item axes in :meth:`item_ids` order."""
        return self.model

    @contextmanager
    def _lanes(self, b: int) -> Iterator[Any]:
        """The model with ``batch_size`` and its one-hot buffer sized to ``b`` lanes, in train mode and with
        gradients on (the trainer's state; ``lib.Evaluation.eval`` switches them off), restored on exit."""
        import torch

        model = self._require_model()
        old_b, old_buf, was = model.batch_size, model.onehot_buffer, model.training
        try:
            model.batch_size = int(b)
            model.onehot_buffer = model.init_emb()
            model.train()
            with torch.enable_grad():
                yield model
        finally:
            model.batch_size, model.onehot_buffer = old_b, old_buf
            model.train(was)

    def train_step(self, batch_inputs: Any, batch_targets: Any, hidden: Any = None) -> float:
        """One update exactly as the body of ``Trainer.train_epoch``'s loop: ``optim.zero_grad()``, ``logit,
        hidden = model(input, hidden)``, ``loss = loss_func(logit[:, target])`` (in-batch negatives only),
        ``loss.backward()``, ``optim.step()``. ``hidden``: (num_layers, b, d) array or a list of per-layer (b, d)
        arrays (default zeros, as ``init_hidden``). Returns the loss."""
        import torch

        x = self._indices(batch_inputs, "batch_inputs")
        t = self._indices(batch_targets, "batch_targets")
        if len(x) != len(t):
            raise ValueError(f"batch_targets: expected {len(x)} item(s), got {len(t)}")
        with self._lanes(len(x)) as model:
            if hidden is None:
                h = model.init_hidden()
            else:
                h = tb.hidden_tensor(hidden)
            self.optim.zero_grad()
            logit, _ = model(torch.LongTensor(x), h.detach())
            loss = self.loss_func(logit[:, torch.LongTensor(t).view(-1)])
            loss.backward()
            self.optim.step()
        return float(loss.item())

    def train_forward(self, prefix_batch: Any, seed: int) -> dict:
        """The module's training-mode forward of b equally long sequences from zero states, scored as
        ``Trainer.train_epoch`` scores a step (``logit[:, target]``); the result describes the last transition and
        nothing is updated.

        Returns ``embedding_out`` (b, embedding_dim): the GRU's input after the embedding dropout (None in the
        one-hot mode, which has no embedding), ``layer_outputs``: the input of ``h2o`` (the last layer's output
        after any hidden dropout; below the last layer ``nn.GRU`` applies its dropout internally, so more layers
        raise Unsupported), ``scores`` (b, b) the post-activation training scores of ``columns`` (the lanes'
        targets), ``score_tensor_shape`` the shape of the ``h2o`` output the step computes, and
        ``output_rows_touched`` the rows of ``h2o.weight`` with a non-zero gradient of the step's loss."""
        import torch

        model = self._require_model()
        if int(model.num_layers) != 1:
            raise Unsupported("train_forward:layers", tb.ONE_LAYER_ONLY)
        arr = tb.prefix_array(self._index_of(), prefix_batch)
        b = len(arr)
        captured: dict[str, Any] = {}
        with torch.random.fork_rng(devices=[]), self._lanes(b) as model:
            torch.manual_seed(int(seed))
            h = model.init_hidden()
            with torch.no_grad():
                for k in range(arr.shape[1] - 2):
                    _, h = model(torch.LongTensor(arr[:, k]), h)
            handles = [
                model.gru.register_forward_pre_hook(lambda mod, a: captured.__setitem__("embed", a[0].detach())),
                model.h2o.register_forward_pre_hook(lambda mod, a: captured.__setitem__("layer", a[0].detach())),
                model.h2o.register_forward_hook(lambda mod, a, o: captured.__setitem__("shape", tuple(o.shape))),
            ]
            try:
                logit, _ = model(torch.LongTensor(arr[:, -2]), h.detach())
            finally:
                for hd in handles:
                    hd.remove()
            scores = logit[:, torch.LongTensor(arr[:, -1]).view(-1)]
            loss = self.loss_func(scores)
            (g,) = torch.autograd.grad(loss, [model.h2o.weight])
        embed = None if int(model.embedding_dim) == -1 else captured["embed"].reshape(b, -1).cpu().numpy()
        return {
            "embedding_out": embed,
            "layer_outputs": [captured["layer"].reshape(b, -1).cpu().numpy()],
            "scores": scores.detach().cpu().numpy(),
            "columns": self.item_ids()[arr[:, -1]],
            "score_tensor_shape": tuple(int(n) for n in captured["shape"]),
            "output_rows_touched": tp.rows_touched(g),
        }


class GRU4RecPytorchForkAdapter(GRU4RecPytorchAdapter):
    """The study's fork czappi44/GRU4REC-pytorch @eaad3eb at one fix level (class attribute ``level_name``)."""

    level_name = "oob"
    homepage = "https://github.com/czappi44/GRU4REC-pytorch"
    reproducibility = dict(GRU4RecPytorchAdapter.reproducibility,
                           pinned="no requirements file; the study's conda env (gru4rec_conda_pytorch_env.yaml) "
                                  "pins python 3.8, pytorch 1.12, numpy 1.23.4, pandas 1.5.0")  # fmt: skip

    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device=device, level=self.level_name)


class GRU4RecPytorchOOB(GRU4RecPytorchForkAdapter):
    """czappi44/GRU4REC-pytorch, out of the box (no fix flag)."""

    level_name = "oob"
    name = "gru4rec_pytorch:oob"
    description = "czappi44/GRU4REC-pytorch @eaad3eb (the study's fork), OOB: no fix flag"
    study = {"implementation": "GRU4REC-pytorch", "variant": "OOB"}


class GRU4RecPytorchInferenceFix(GRU4RecPytorchForkAdapter):
    """czappi44/GRU4REC-pytorch, inference fix (--eval_hidden_reset)."""

    level_name = "inference_fix"
    name = "gru4rec_pytorch:inference_fix"
    description = "czappi44/GRU4REC-pytorch @eaad3eb (the study's fork), inference fix: --eval_hidden_reset"
    study = {"implementation": "GRU4REC-pytorch", "variant": "OOB Correct Eval"}


class GRU4RecPytorchMajorFix(GRU4RecPytorchForkAdapter):
    """czappi44/GRU4REC-pytorch, major fix (--eval_hidden_reset --use_correct_loss --use_correct_mask_reset)."""

    level_name = "major_fix"
    name = "gru4rec_pytorch:major_fix"
    description = (
        "czappi44/GRU4REC-pytorch @eaad3eb (the study's fork), major fix: --eval_hidden_reset "
        "--use_correct_loss --use_correct_mask_reset"
    )
    study = {"implementation": "GRU4REC-pytorch", "variant": "Correct full"}


for _cls in (GRU4RecPytorchAdapter, GRU4RecPytorchOOB, GRU4RecPytorchInferenceFix, GRU4RecPytorchMajorFix):
    register(_cls)
