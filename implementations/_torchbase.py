"""The common part of the GRU4Rec adapters whose implementation trains one torch ``nn.Module``.

:class:`TorchModuleAdapter` gives such an adapter its model access (``_require_model``), the weight hooks
(``get_weights``/``set_weights`` over the module's ``named_parameters()``), the ``trace`` switch and
``optimizer_info`` read from the torch optimizer's first parameter group. :class:`FitObserver` is the per-epoch
bookkeeping of a fit spy (the loss, step, event and second counts of ``FitReport``) with the removal of its
instance wrappers. :class:`OwnEvaluatorByCutoff` runs an implementation's own evaluator once per cutoff (the
TensorFlow and Keras adapters use it too: it needs no torch).

Everything here *observes and translates*, as the adapters do (implementations/README.md): nothing changes what the
implementation computes. An adapter keeps what is its own: which module and optimizer it reads, which rows of
which parameter it shows, and how its optimizer settings are named.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from gru4rec_conformance.implementations._thirdparty import (
    TempDir,
    layers_list,
    load_parameter_arrays,
    parameter_arrays,
)
from gru4rec_conformance.implementations.base import (
    Adapter,
    FitReport,
    StepTrace,
    Unsupported,
    installed_version,
    require_installed,
)

__all__ = [
    "TorchModuleAdapter",
    "PackagedTorchAdapter",
    "torch_framework",
    "raw_gru_declarations",
    "constant_lr_info",
    "FitObserver",
    "OwnEvaluatorByCutoff",
    "ItemMapIndex",
    "hidden_tensor",
    "item_indices",
]

NOT_FITTED = "call fit() first (n_epochs=0 initialises without training)"


class TorchModuleAdapter(Adapter):
    """Base of an adapter whose implementation is one torch ``nn.Module`` trained by a torch optimizer.

    A subclass sets :attr:`label` (the name its error messages start with) and overrides :meth:`_fitted_model`
    (the module, ``None`` before ``fit``) and :meth:`_fitted_optimizer` (the torch optimizer, ``None`` before
    ``fit``); where the implementation pads its item tables, :meth:`_weight_rows` names the rows shown. It may
    override :meth:`optimizer_info` where its optimizer is described otherwise.

    Hooks given here: ``get_weights``, ``set_weights``, ``trace`` (sets ``self._trace_on``, read by the
    subclass's ``fit``) and ``optimizer_info``.
    """

    label: ClassVar[str] = ""
    """The name error messages start with, e.g. ``"torch_gru4rec"`` (default: the class name)."""

    def __init__(self, device: str = "cpu", **options: Any) -> None:
        super().__init__(device=device, **options)
        self._trace_on = False

    def _label(self) -> str:
        return self.label or type(self).__name__

    _item_ids: Any = None
    """The trained items' ids in score-column order, set by ``fit`` (returned by the default :meth:`item_ids`)."""

    def item_ids(self) -> Any:
        """``self._item_ids`` (int64 (n_items,)); RuntimeError ``"<label>.item_ids: call fit() first"`` before."""
        if self._item_ids is None:
            raise RuntimeError(f"{self._label()}.item_ids: call fit() first")
        return self._item_ids

    # -- what a subclass says ------------------------------------------------------------------------------
    def _fitted_model(self) -> Any:
        """The implementation's trained ``nn.Module``, or None before ``fit``."""
        raise NotImplementedError

    def _fitted_optimizer(self) -> Any:
        """The torch optimizer ``fit`` built, or None before ``fit``."""
        raise NotImplementedError

    def _weight_rows(self) -> Mapping[str, Any] | None:
        """Parameter name → the rows (axis 0) ``get_weights`` shows (a slice or an int array); the others whole."""
        return None

    def _parameters(self) -> dict[str, Any]:
        """Name shown by ``get_weights`` → torch parameter; default the module's ``named_parameters()``."""
        return dict(self._require_model().named_parameters())

    def _to_shown(self, name: str, a: np.ndarray) -> np.ndarray:
        """A parameter's copy (rows as :meth:`_weight_rows`) in the layout ``get_weights`` shows; default as is."""
        return a

    def _from_shown(self, name: str, a: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`_to_shown`, for ``set_weights``; default as is."""
        return a

    def _lr_schedule(self) -> Any:
        """``optimizer_info``'s ``lr_schedule``: None (no schedule) unless the implementation has one."""
        return None

    def _grad_clip(self) -> Any:
        """``optimizer_info``'s ``grad_clip``: None (no clipping) unless the implementation clips."""
        return None

    # -- hooks -----------------------------------------------------------------------------------------------
    def _require_model(self) -> Any:
        """The fitted module; RuntimeError ``"<label>: call fit() first (...)"`` before ``fit``."""
        model = self._fitted_model()
        if model is None:
            raise RuntimeError(f"{self._label()}: {NOT_FITTED}")
        return model

    def get_weights(self) -> dict[str, Any]:
        """Copies of the module's parameters as numpy arrays under their torch names (:meth:`_parameters`; rows as
        :meth:`_weight_rows`, layout as :meth:`_to_shown`)."""
        return parameter_arrays(self._parameters(), self._weight_rows(), self._to_shown)

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load arrays (all or a subset) in the layout of :meth:`get_weights` into the module's parameters, in place
        (the optimizer's state is kept; rows not shown are untouched).

        Raises:
            ValueError: an unknown name or a shape that differs from :meth:`get_weights`'s.
        """
        load_parameter_arrays(self._parameters(), weights, self._weight_rows(), self._from_shown)

    def trace(self, enable: bool = True) -> None:
        self._trace_on = bool(enable)

    _tmp: Any = None
    """A private temporary folder the adapter writes the implementation's input files to (a
    :class:`~gru4rec_conformance.implementations._thirdparty.TempDir` or a path), removed by :meth:`close`."""

    def close(self) -> None:
        """Remove ``self._tmp`` (if any)."""
        if self._tmp is None:
            return
        if isinstance(self._tmp, TempDir):
            self._tmp.close()
        else:
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp = None

    def optimizer_info(self) -> dict[str, Any]:
        """The optimizer's class name, ``lr_schedule`` (:meth:`_lr_schedule`), the first parameter group's
        ``initial_accumulator_value``, ``eps`` and ``momentum`` (None where the class has none), ``grad_clip``
        (:meth:`_grad_clip`), ``weight_decay`` and learning rate. RuntimeError before ``fit``."""
        opt = self._fitted_optimizer()
        if opt is None:
            raise RuntimeError(f"{self._label()}.optimizer_info: call fit() first")
        g = opt.param_groups[0]
        return {
            "type": type(opt).__name__,
            "lr_schedule": self._lr_schedule(),
            "initial_accumulator": g.get("initial_accumulator_value"),
            "eps": g.get("eps"),
            "momentum": g.get("momentum"),
            "grad_clip": self._grad_clip(),
            "weight_decay": float(g.get("weight_decay", 0.0)),
            "learning_rate": float(g["lr"]),
        }


class PackagedTorchAdapter(TorchModuleAdapter):
    """A :class:`TorchModuleAdapter` whose implementation is a package installed from PyPI (cornac, recbole,
    recpack, torch-rechub).

    A subclass sets :attr:`package`. Given here: ``version()`` (the installed distribution's version, ``"not
    installed"`` without it), :meth:`_require_package` (the subclass's ``capabilities()`` calls it first, so that an
    environment without the package gives an UNAVAILABLE verdict), the ``hparams`` (``{}``), ``seed`` (0) and item
    index ``_index`` (``{}``) that the subclass's ``build`` sets through :meth:`_new_build` (``fit`` fills the index),
    and ``isolated`` (third-party code runs in a worker).
    """

    isolated = True  # third-party code runs in a worker
    package: ClassVar[tuple[str, str, str]] = ("", "", "")
    """(import name, distribution name, how to provide it), e.g. ``("cornac", "cornac", "run the checks with
    `tox -e cornac` ...")``: the arguments of :func:`require_installed`."""

    def __init__(self, device: str = "cpu", **options: Any) -> None:
        super().__init__(device=device, **options)
        self.hparams: dict[str, Any] = {}
        self.seed = 0
        self._index: dict[int, int] = {}
        """Item id → the implementation's item index of the trained items (set by ``fit``; ``{}`` before)."""

    def version(self) -> str:
        return installed_version(self.package[1])

    def _require_package(self) -> None:
        """ImplementationUnavailable (with :attr:`package`'s way to provide it) when the module is missing."""
        require_installed(*self.package)

    def _new_build(self, hp: dict[str, Any], seed: int) -> None:
        """Keep a ``build``'s resolved hyperparameters ``hp`` and ``seed`` and forget the trained items
        (``_item_ids`` None, ``_index`` {}); the subclass drops its own fitted objects."""
        self.hparams = hp
        self.seed = int(seed)
        self._item_ids = None
        self._index = {}


def torch_framework() -> dict[str, str]:
    """The ``framework`` capability of a torch implementation: ``{"name": "torch", "version": <installed>}``."""
    return {"name": "torch", "version": installed_version("torch")}


def raw_gru_declarations() -> dict[str, Any]:
    """The ``capabilities()`` entries of a packaged torch GRU4Rec that scores with the raw output layer, has no
    tie-aware evaluator of its own and runs ``nn.GRU`` (gates in its [r; z; n] order)."""
    return {"score_semantics": "raw", "eval_tie_mode": None, "gate_layout": ["reset", "update", "candidate"]}


def constant_lr_info(opt: Any) -> dict[str, Any]:
    """``optimizer_info`` of a torch optimizer run at a constant learning rate without clipping, in the lower-case
    vocabulary (``type`` ``"adagrad"``; ``momentum`` 0.0 and ``eps`` NaN where the class has none;
    ``initial_accumulator`` only for a class that has one)."""
    g = opt.param_groups[0]
    info = {"type": type(opt).__name__.lower(), "learning_rate": float(g["lr"]), "lr_schedule": "constant",
            "momentum": float(g.get("momentum", 0.0)), "eps": float(g.get("eps", float("nan"))),
            "grad_clip": None}  # fmt: skip
    if "initial_accumulator_value" in g:
        info["initial_accumulator"] = float(g["initial_accumulator_value"])
    return info


class FitObserver:
    """Per-epoch bookkeeping of a fit spy: ``losses`` (mean loss per event), ``steps``, ``events``, ``seconds``, and
    the instance attributes it replaced, removed by :meth:`detach` (the class methods apply again).

    A subclass wraps the implementation's methods with :meth:`wrap`, times an epoch with :meth:`run_epoch`
    and counts a step with :meth:`count`; ``trace`` is the list of :class:`StepTrace` (None when not tracing).
    """

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.steps: list[int] = []
        self.events: list[int] = []
        self.seconds: list[float] = []
        self.trace: list[StepTrace] | None = None
        self._wrapped: list[tuple[Any, str]] = []
        self._hooks: list[Any] = []
        self._sum, self._n, self._k = 0.0, 0, 0

    def wrap(self, obj: Any, name: str, fn: Callable[..., Any]) -> None:
        """Set ``obj.name = fn`` on the instance (the original stays on the class); undone by :meth:`detach`."""
        setattr(obj, name, fn)
        self._wrapped.append((obj, name))

    def hook(self, handle: Any) -> None:
        """Keep a torch hook handle, removed by :meth:`detach`."""
        self._hooks.append(handle)

    def count(self, loss: Any, n: int) -> None:
        """One optimizer step of ``n`` events whose mean loss is the torch scalar ``loss``."""
        self._sum += float(loss.detach()) * n
        self._n += n
        self._k += 1

    def run_epoch(self, train_epoch: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one epoch of the implementation and record its seconds, its mean loss per event (NaN without
        events), its steps and events, as counted by :meth:`count`. Returns what ``train_epoch`` returns."""
        self._sum, self._n, self._k = 0.0, 0, 0
        t0 = time.perf_counter()
        out = train_epoch(*args, **kwargs)
        self.seconds.append(time.perf_counter() - t0)
        self.losses.append(self._sum / self._n if self._n else float("nan"))
        self.steps.append(self._k)
        self.events.append(self._n)
        return out

    def detach(self) -> None:
        """Remove the instance wrappers (the class methods apply again) and the hooks."""
        for obj, name in self._wrapped:
            obj.__dict__.pop(name, None)
        self._wrapped = []
        for handle in self._hooks:
            handle.remove()
        self._hooks = []

    def report(self) -> FitReport:
        return FitReport(
            epoch_losses=list(self.losses),
            n_steps=list(self.steps),
            n_events_trained=list(self.events),
            epoch_seconds=list(self.seconds),
            trace=self.trace,
        )


class ItemMapIndex:
    """Item translation of an adapter whose implementation keeps its own item map (a frame of item id → item
    index, built by its dataset during ``fit``). A subclass gives :meth:`_item_map` and ``label`` (the name its
    error messages start with); put it before :class:`TorchModuleAdapter` in the bases so that its
    :meth:`item_ids` applies."""

    label: ClassVar[str] = ""

    def _item_map(self) -> tuple[Any, str, str] | None:
        """(item map frame, item id column, item index column), or None before ``fit``."""
        raise NotImplementedError

    def _mapped(self) -> tuple[np.ndarray, dict[int, int]]:
        m = self._item_map()
        if m is None:
            raise RuntimeError(f"{self.label}: call fit() first")
        return item_map_ids(*m)

    def item_ids(self) -> np.ndarray:
        """The trained items' ids in index order (int64); RuntimeError ``"<label>: call fit() first"`` before."""
        return self._mapped()[0]

    def _index_of(self) -> dict[int, int]:
        """Item id → the implementation's item index."""
        return self._mapped()[1]

    def _indices(self, ids: Any, what: str) -> np.ndarray:
        """Item ids → the implementation's item indices (int64); ValueError for an id unknown to training."""
        return item_indices(self._index_of(), ids, what)

    def _known_indices(self, prefixes: Sequence[Sequence[int]]) -> list[list[int]]:
        """Each prefix as the item indices of its items known to training (unknown ones dropped)."""
        index = self._index_of()
        return [[index[int(i)] for i in p if int(i) in index] for p in prefixes]


class OwnEvaluatorByCutoff(Adapter):
    """``score_stream`` and ``evaluate`` of an adapter that runs the implementation's own evaluator once per
    cutoff (as the study's scripts do). A subclass gives :meth:`_run_eval` and ``label`` (the name its error
    messages start with)."""

    label: ClassVar[str] = ""

    def _run_eval(self, test_df: Any, batch_size: int, k: int, keep_rows: bool) -> tuple[float, float, int, list]:
        """One run of the own evaluator at cutoff ``k``: (recall, mrr, n_events, rows), rows (session_id, position,
        target_item, scores_row) when ``keep_rows``."""
        raise NotImplementedError

    def _evaluable(self) -> Any:
        """What the evaluator runs (None before ``fit``): ``self.model`` unless the subclass says otherwise."""
        return getattr(self, "model", None)

    def _stream_cutoff(self) -> int:
        """The cutoff of the evaluator run that ``score_stream`` reads the scores from."""
        return min(20, len(self.item_ids()))

    def _require_evaluable(self) -> None:
        if self._evaluable() is None:
            raise RuntimeError(f"{self.label}: call fit() first")

    def score_stream(self, test_df: Any, batch_size: int) -> Iterator[tuple[Any, ...]]:
        self._require_evaluable()
        _, _, _, rows = self._run_eval(test_df, batch_size, k=self._stream_cutoff(), keep_rows=True)
        return iter(rows)

    def evaluate(self, test_df: Any, cutoffs: Sequence[int] = (1, 5, 10, 20), batch_size: int = 512) -> dict:
        self._require_evaluable()
        out: dict[str, Any] = {}
        for c in cutoffs:  # one evaluator run per cutoff, as the study's scripts do
            recall, mrr, n, _ = self._run_eval(test_df, batch_size, k=int(c), keep_rows=False)
            out[f"recall@{c}"], out[f"mrr@{c}"], out["n_events"] = recall, mrr, n
        return out


def item_indices(index: Mapping[int, int], ids: Any, what: str) -> np.ndarray:
    """Item ids → the implementation's item indices (``index``: id → index) as int64 (n,).

    Raises:
        ValueError: ``"<what>: item id(s) unknown to the trained model: [...]"`` (the first five unknown ids).
    """
    ids = np.asarray(ids).ravel()
    out = [index.get(int(i)) for i in ids]
    if None in out:
        bad = [int(i) for i in ids if int(i) not in index][:5]
        raise ValueError(f"{what}: item id(s) unknown to the trained model: {bad}")
    return np.asarray(out, dtype=np.int64)


def hidden_tensor(hidden: Any) -> Any:
    """A float32 torch tensor (layers, b, d) from a ``train_step`` ``hidden``: one array, or a list of per-layer
    (b, d) arrays."""
    import torch

    if isinstance(hidden, (list, tuple)):
        return torch.as_tensor(np.stack([np.asarray(a) for a in hidden]), dtype=torch.float32)
    return torch.as_tensor(np.asarray(hidden), dtype=torch.float32)


def prefix_array(index: Mapping[int, int], prefix_batch: Any) -> np.ndarray:
    """``train_forward``'s ``prefix_batch`` (b equally long item-id sequences, length >= 2) as an int64 (b, L) array
    of the implementation's item indices (``index``: id → index).

    Raises:
        ValueError: an unknown item id, or sequences that are missing, of unequal lengths or shorter than 2.
    """
    seqs = [item_indices(index, s, "prefix_batch") for s in prefix_batch]
    if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
        raise ValueError("prefix_batch: expected b >= 1 item sequences of one common length >= 2")
    return np.stack(seqs)


def lane_parallel_scores(
    seqs: Sequence[Sequence[int]],
    n_items: int,
    lanes: int,
    zero_scores: Any,
    init_hidden: Callable[[int], Any],
    step: Callable[[np.ndarray, Any], tuple[Any, Any]],
    fixed_width: bool = False,
) -> np.ndarray:
    """Scores (len(seqs), n_items) float32 of the last position of every item-index sequence, run ``lanes`` at a
    time through ``step(inputs (w,) int64, hidden) -> (scores (w, n_items) tensor, hidden)`` from
    ``init_hidden(n_sequences_in_the_chunk)``; ``w`` is the chunk's size, or ``lanes`` with ``fixed_width`` (padding
    lanes get item 0 and are discarded). An empty sequence gets ``zero_scores`` (the zero state's scores)."""
    out = np.zeros((len(seqs), n_items), dtype=np.float32)
    todo = [k for k, s in enumerate(seqs) if s]
    for k, s in enumerate(seqs):
        if not s:
            out[k] = zero_scores
    for c in range(0, len(todo), lanes):
        chunk = todo[c : c + lanes]
        longest = max(len(seqs[k]) for k in chunk)
        hidden = init_hidden(len(chunk))
        for t in range(longest):
            inp = np.zeros(lanes if fixed_width else len(chunk), dtype=np.int64)
            for lane, k in enumerate(chunk):
                if t < len(seqs[k]):
                    inp[lane] = seqs[k][t]
            logit, hidden = step(inp, hidden)
            for lane, k in enumerate(chunk):
                if t == len(seqs[k]) - 1:
                    out[k] = logit[lane].numpy()
    return out


def add_score_rows(rows: list, labels: tuple[Any, Any, Any], item_ids: np.ndarray, scores: Any) -> None:
    """Append one (session_id, position, target_item, scores_row float32) row per lane of an evaluation step:
    ``labels`` = (session ids, positions, target item indices) of its lanes, ``scores`` its (lanes, n) tensor."""
    sess, pos, tgt = labels
    sc = scores.detach().cpu().numpy()
    for j in range(len(sess)):
        rows.append((int(sess[j]), int(pos[j]), int(item_ids[tgt[j]]), sc[j].astype(np.float32)))


def lane_labels(loc: Mapping[str, Any], first: Callable[[np.ndarray], Any], sessions: Any, items: Any) -> tuple:
    """(session ids, positions, target item indices) of the lanes of a session-parallel iterator's step, from its
    locals at ``yield`` (``start``, ``i``, ``iters``): the target row is ``start + i + 1``; ``first(iters)`` gives
    the lanes' sessions' first rows; ``sessions``/``items`` are the data's session-id and item-index columns."""
    tgt = np.asarray(loc["start"]) + int(loc["i"]) + 1
    return sessions[tgt], tgt - first(np.asarray(loc["iters"])), items[tgt]


def lane_step_trace(
    loc: Mapping[str, Any],
    sessions: np.ndarray,
    first: Callable[[np.ndarray], Any],
    hidden: Any,
    learning_rate: float,
    negatives: Any = None,
) -> StepTrace:
    """The :class:`StepTrace` of a training step of a session-parallel iterator, from its locals at ``yield``
    (``iters``, ``start``, ``i``; the step's input events are the rows ``start + i``): ``sessions`` is the data's
    session-id column, ``first(iters)`` the lanes' sessions' first rows, ``hidden`` the step's input state (its
    first layer's (b, d) norms), ``negatives`` the step's negative item ids (None: none)."""
    iters = np.asarray(loc["iters"])
    rows = np.asarray(loc["start"]) + int(loc.get("i", 0))
    norms = hidden[0].detach().norm(dim=1).cpu().numpy().astype(np.float64)
    negs = np.zeros(0, dtype=np.int64) if negatives is None else np.asarray(negatives, dtype=np.int64)
    return StepTrace(session_ids=sessions[rows].astype(np.int64), positions=(rows - first(iters)).astype(np.int64),
                     h_in_norms=norms, n_active=int(len(iters)), negative_ids=negs,
                     learning_rate=float(learning_rate))  # fmt: skip


ONE_LAYER_ONLY = (
    "nn.GRU applies the hidden dropout between its stacked layers internally: the outputs of layers below the "
    "last are not observable"
)


def act_family(act: str) -> str:
    """The family of an implementation's final-activation name: ``"elu-0.5"`` → ``"elu"``, ``"leaky-0.01"`` →
    ``"leaky"``, any other name as it is."""
    for prefix in ("elu", "leaky"):
        if act.startswith(prefix + "-"):
            return prefix
    return act


def elu_act_name(elu_param: Any, default: float, linear_at_zero: bool = False) -> str:
    """``"elu-<elu_param>"`` (``default`` when ``elu_param`` is None); with ``linear_at_zero``, ``"linear"`` unless the
    parameter is positive (an implementation's default activation, where ELU with alpha 0 is the identity)."""
    ep = default if elu_param is None else float(elu_param)
    return f"elu-{ep:g}" if ep > 0 or not linear_at_zero else "linear"


def official_act_name(final_act: Any, elu_param: Any, elu_default: float) -> str:
    """An implementation's final-activation name for an explicit official ``final_act``: ``elu`` →
    ``elu-<elu_param>`` (``elu_default`` when None), ``leaky`` → ``leaky-0.01``, any other name as it is."""
    name = str(final_act)
    if name == "elu":
        return elu_act_name(elu_param, elu_default)
    if name == "leaky":
        return "leaky-0.01"
    return name


def one_width_gru_hparams(
    hp: Mapping[str, Any],
    loss_names: Mapping[str, str],
    act: Callable[[Any, Any, str], str],
    allowed_acts: Sequence[str],
    act_word: str,
) -> tuple[list[int], str, str, int]:
    """The official hyperparameters an ``nn.GRU`` model of one layer width takes: ``(layers, loss, final_act,
    embedding)``, where ``act(final_act, elu_param, loss)`` names the implementation's final activation and
    ``embedding`` ``"layersize"`` becomes ``layers[0]``.

    Raises:
        Unsupported: ``layers:unequal``, ``loss:<name>`` (not in ``loss_names``), ``final_act:<family>`` (not in
            ``allowed_acts``; the message calls the setting ``act_word``).
    """
    layers = layers_list(hp["layers"])
    if len(set(layers)) != 1:
        raise Unsupported("layers:unequal", f"nn.GRU stacks layers of one size; got {layers}")
    loss = str(hp["loss"])
    if loss not in loss_names:
        raise Unsupported(f"loss:{loss}")
    name = act(hp["final_act"], hp["elu_param"], loss)
    allowed = set(allowed_acts)
    if act_family(name) not in allowed:
        raise Unsupported(f"final_act:{act_family(name)}", f"{act_word} {name!r} not in {sorted(allowed)}")
    emb = hp["embedding"]
    if isinstance(emb, str):
        emb = layers[0] if emb == "layersize" else int(emb)
    return layers, loss, name, int(emb)


class EpochCounts:
    """Optimizer steps and trained events of the running epoch, counted by wrappers around the implementation's
    own calls (:meth:`counting` wraps its optimizer step; a data spy adds to ``events``)."""

    def __init__(self) -> None:
        self.steps = 0
        self.events = 0

    def counting(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """``step`` that also counts one optimizer step per call."""

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.steps += 1
            return step(*args, **kwargs)

        return counted


def run_trainer_epochs(report: FitReport, epochs: int, counts: EpochCounts, run_epoch: Callable[[int], Any]) -> None:
    """Run ``run_epoch(epoch)`` (the implementation's own epoch, its spies installed) ``epochs`` times and append
    to ``report`` per epoch: the loss it returns (the first element of a tuple), ``counts``' steps and events and
    the seconds."""
    for epoch in range(epochs):
        counts.steps = counts.events = 0
        t0 = time.perf_counter()
        out = run_epoch(epoch)
        loss = out[0] if isinstance(out, tuple) else out
        report.epoch_losses.append(float(loss))
        report.n_steps.append(counts.steps)
        report.n_events_trained.append(counts.events)
        report.epoch_seconds.append(time.perf_counter() - t0)


def loss_and_gradient(scores: Any, loss_of: Callable[[Any], Any]) -> tuple[float, np.ndarray]:
    """``loss_on_scores``'s (value, d value / d scores): ``loss_of`` (the implementation's loss, as a function of a
    score tensor) on ``scores`` as a leaf tensor, float32 for float32 scores and float64 otherwise; the gradient
    has the scores' shape and that dtype."""
    import torch

    arr = np.asarray(scores)
    t = torch.tensor(arr, dtype=torch.float32 if arr.dtype == np.float32 else torch.float64, requires_grad=True)
    value = loss_of(t)
    value.backward()
    assert t.grad is not None  # backward() of a loss computed from the leaf t fills t.grad
    return float(value.detach()), t.grad.detach().cpu().numpy().copy()


def diagonal_split(R: Any) -> tuple[Any, Any]:
    """A (b, K) score tensor whose diagonal holds the targets as (positive (b, 1), negative (b, K-1)) scores: the
    diagonal, and each row's other columns in order."""
    import torch

    b, n_cols = R.shape
    mask = ~torch.eye(b, n_cols, dtype=torch.bool)
    return torch.diagonal(R).unsqueeze(-1), R[mask].view(b, n_cols - 1)


def refuse_loss_arguments(hparams: Mapping[str, Any], what: str) -> None:
    """For an implementation whose loss takes no argument: accept the values that describe what it computes
    (``final_act`` None or ``"linear"``; ``logq``, ``bpreg``, ``elu_param`` zero; ``batch_size``, ``n_targets``,
    ``column_q`` None).

    Raises:
        Unsupported: ``logq``, ``bpreg``, ``final_act:elu`` or ``loss_on_scores:<name>`` for any other value
            (``"<what> cannot take <name>=<value>"``).
    """
    for k, val in hparams.items():
        if (k == "final_act" and val in (None, "linear")) or (k in ("logq", "bpreg", "elu_param") and not val):
            continue
        if k in ("batch_size", "n_targets", "column_q") and val is None:
            continue
        name = {"logq": "logq", "bpreg": "bpreg", "elu_param": "final_act:elu"}.get(k, f"loss_on_scores:{k}")
        raise Unsupported(name, f"{what} cannot take {k}={val!r}")


def item_map_ids(item_map: Any, id_col: str, index_col: str) -> tuple[np.ndarray, dict[int, int]]:
    """From an implementation's item map (a frame of item id → item index): the ids in index order (int64) and
    the dict id → index."""
    ids = item_map.sort_values(index_col)[id_col].to_numpy().astype(np.int64)
    return ids, dict(zip(item_map[id_col].to_numpy().tolist(), item_map[index_col].to_numpy().tolist()))


def layered_forward_result(
    captured: Mapping[str, Any], none_mode: bool, scores: Any, columns: Any, score_shape: Any, rows: int
) -> dict[str, Any]:
    """``train_forward``'s result for a model in the official layout, from forward hooks: ``captured["embed"]``
    (the input embedding's output, (b, k); in the no-embedding mode the first layer's output, which then leads
    ``layer_outputs``) and ``captured["layers"]`` (the later layers' outputs); ``scores`` the step's (b, n) score
    tensor of ``columns``, the shape of the score tensor the step computes and the output rows it touches."""
    embed: Any = captured.get("embed")
    layers = ([embed] if none_mode else []) + list(captured["layers"])
    return {
        "embedding_out": None if none_mode or embed is None else embed.cpu().numpy(),
        "layer_outputs": [t.cpu().numpy() for t in layers],
        "scores": scores.detach().cpu().numpy(),
        "columns": columns,
        "score_tensor_shape": score_shape,
        "output_rows_touched": rows,
    }
