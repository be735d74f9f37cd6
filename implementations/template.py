"""Adapter template for maintainers of a GRU4Rec reimplementation who gate their CI on this suite.

Copy this file into your own repository, rename the class, and replace each method body with calls into
your implementation. It runs as it is: the "implementation" here is a first-order Markov chain (item-to-item
transition counts), which stands in for your model, so you can try the whole flow before writing anything.
With the suite installed (``pip install <gru4rec_conformance wheel>``), from any folder:

    pytest --pyargs gru4rec_conformance.conformance \
        --impl gru4rec_conformance.implementations.template:TemplateAdapter --gate

or inside a checkout of the suite:

    pytest conformance/gru4rec --impl gru4rec_conformance.implementations.template:TemplateAdapter --gate

With your own adapter (no change to this suite's registry needed), from your repository with the suite installed:

    pytest --pyargs gru4rec_conformance.conformance --impl your_package.conformance:YourAdapter \
        --xfails your_package/conformance_xfails.toml --gate

or from a checkout of the suite:

    PYTHONPATH=path/to/your/repo pytest conformance/gru4rec --impl your_package.conformance:YourAdapter \
        --xfails path/to/your/repo/your_package/conformance_xfails.toml --gate

The steps, xfail files included: docs/gating.md of the suite.

Rules (implementations/README.md): the adapter *translates* (I/O, id mapping, padding) and never fixes a
defect of the code it wraps; every shim is listed in ``capabilities()["shims"]``; anything your
implementation cannot express raises :class:`~gru4rec_conformance.implementations.base.Unsupported` (never ignore a
hyperparameter); optional hooks you do not override are reported as unsupported and their checks skip.
The full protocol, with shapes and dtypes, is documented on
:class:`gru4rec_conformance.implementations.base.Adapter`.

This Markov chain is not a GRU4Rec: the suite's checks fail on it where a GRU is required. That is the
point of a gate; declare known failures in your xfail file (conformance/xfails/README.md).

Worked example: the parts of an adapter for a typical PyTorch GRU4Rec (``mypkg.Model(n_items, hidden, emb, ...)``
with ``mypkg.train(model, frame, epochs, ...)``); the names ``mypkg``, ``model.gru``, ``model.out`` are made up. The
meaning and units of every hyperparameter and the hooks' shapes are tabulated in implementations/README.md::

    def capabilities(self):
        return {
            "losses": ["cross-entropy", "bpr-max"], "embedding_modes": ["none", "separate"],
            "session_parallel": True, "in_batch_negatives": True, "extra_shared_negatives": True,
            "dropout_embed": True, "dropout_hidden": True, "separate_dropouts": True, "bpreg": True,
            "final_acts": ["linear", "elu"], "full_ranking": True, "gate_layout": ["reset", "update", "candidate"],
            # declared names with *your* defaults; values are official GRU4Rec units (README table)
            "hyperparameters": {"layers": [100], "embedding": 0, "batch_size": 32, "learning_rate": 0.05,
                                "loss": "cross-entropy", "n_sample": 2048, "dropout_p_embed": 0.0,
                                "dropout_p_hidden": 0.0, "bpreg": 1.0, "final_act": None, "elu_param": 0.5,
                                "n_epochs": 10},
        }

    def build(self, seed, **hparams):
        hp = self.resolve_hparams(hparams)       # undeclared *name* -> Unsupported("<name>")
        if len(hp["layers"]) != 1:               # declared name, one *value* the code cannot run
            raise Unsupported(f"layers:{hp['layers']}", "mypkg builds one GRU layer")
        if hp["n_sample"] == 0:
            raise Unsupported("n_sample:0", "mypkg always samples negatives")
        fa = hp["final_act"]                     # None: ELU(elu_param), and linear when elu_param == 0
        if fa is not None and fa.split("-")[0] not in ("linear", "elu"):
            raise Unsupported(f"final_act:{fa.split('-')[0]}", "only linear and ELU outputs")
        import mypkg                             # third-party imports inside methods
        self.model = mypkg.Model(n_items=None, hidden=hp["layers"][0], emb=hp["embedding"], seed=seed,
                                 p_in=hp["dropout_p_embed"], p_out=hp["dropout_p_hidden"])
        self.hp = hp

    def get_weights(self):                       # HP-2 reads shapes only: (3·d, ·) gates, (n_items, d) output
        g = self.model.gru
        return {"Wx": g.weight_ih_l0.detach().numpy(), "Wh": g.weight_hh_l0.detach().numpy(),
                "bx": g.bias_ih_l0.detach().numpy(), "bh": g.bias_hh_l0.detach().numpy(),  # 1-D (3·d,)
                "Wy": self.model.out.weight.detach().numpy()[self._columns]}  # rows in item_ids() order

    def loss_on_scores(self, scores, loss, **hp):   # scores (b, b+S): diagonal = positives, last S = shared
        import mypkg, torch
        unknown = set(hp) - {"bpreg", "elu_param", "final_act", "logq", "column_q"}
        if unknown:
            raise Unsupported(sorted(unknown)[0])
        R = torch.tensor(scores, dtype=torch.float64, requires_grad=True)
        value = mypkg.losses[loss](R, **hp)     # your loss code, with your own output transform
        value.backward()
        return float(value), R.grad.numpy()

    def train_forward(self, prefix_batch, seed):   # b sequences of one length >= 2; the last step only
        out = self.model.forward_train(self._to_index(prefix_batch), seed=seed)
        return {"embedding_out": out.emb[:, -2].numpy(), "layer_outputs": [out.h[:, -2].numpy()],
                "scores": out.scores[:, -1].numpy()}   # (b, n_in), [(b, d)], (b, b+S)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from gru4rec_conformance.implementations.base import Adapter, Capabilities, FitReport


class TemplateAdapter(Adapter):
    """Template adapter: a first-order Markov chain standing in for the implementation under test."""

    # -- declarations (read without building a model) -------------------------------------------------
    name = "template"
    family = "gru4rec"
    role = "example"  # your adapter: "implementation"
    isolated = True  # third-party code runs in a worker subprocess (timeouts, crash containment)
    worker_env = ()  # extra environment variables your code needs in the worker, e.g. ("MYPKG_HOME",)
    description = "First-order Markov chain standing in for an implementation (adapter template)"
    homepage = "https://example.org/your-gru4rec"
    reproducibility = {
        "installs": "numpy only",
        "offline": "yes",
        "pinned": "no pins needed",
        "hyperparameters": "n_epochs settable; nothing else exists",
    }

    def version(self) -> str:
        # Your package's version, e.g. importlib.metadata.version("yourpkg"), or the pinned commit.
        return "0+template"

    def capabilities(self) -> dict[str, Any]:
        # Declare only what your implementation really has; the suite probes declarations both ways.
        return {
            "losses": [],
            "embedding_modes": [],
            **Capabilities.flags("full_ranking"),
            "devices": ["cpu"],
            "framework": {"name": "numpy", "version": np.__version__},
            "shims": [],
            "hyperparameters": {"n_epochs": 1},
            "score_semantics": "raw",
        }

    # -- required surface -------------------------------------------------------------------------------
    def build(self, seed: int, **hparams: Any) -> None:
        # resolve_hparams raises Unsupported for any name not declared above (HP-4: loud, not ignored).
        self.hparams = self.resolve_hparams(hparams)
        self.seed = int(seed)
        self._items: np.ndarray | None = None
        self._counts: np.ndarray | None = None  # transition counts, aligned with _pairs
        self._pairs = np.empty(0, dtype=np.int64)  # observed (src, dst) positions as src·n + dst, ascending
        self._prior: np.ndarray | None = None
        self._index: dict[int, int] = {}

    def fit(self, train_df: Any, n_epochs: int | None = None) -> FitReport:
        epochs = self.hparams["n_epochs"] if n_epochs is None else int(n_epochs)
        df = train_df.sort_values(["SessionId", "Time"], kind="stable")
        self._items = np.unique(df["ItemId"].to_numpy(dtype=np.int64))
        self._index = {int(i): k for k, i in enumerate(self._items)}
        idx = np.searchsorted(self._items, df["ItemId"].to_numpy(dtype=np.int64))
        sess = df["SessionId"].to_numpy()
        same = sess[1:] == sess[:-1]
        src, dst = idx[:-1][same], idx[1:][same]
        n = len(self._items)
        # Transition counts kept sparse (one entry per observed pair, sorted by src·n + dst): a dense n × n table
        # would make the cost of a fit grow with the square of the catalogue (SC-1 measures exactly that).
        pairs, pair_of, pair_base = np.unique(src * n + dst, return_inverse=True, return_counts=True)
        self._pairs = pairs
        self._counts = np.zeros(len(pairs), dtype=np.float64)
        out_base = np.bincount(src, minlength=n).astype(np.float64)
        out_counts = np.zeros(n, dtype=np.float64)
        self._prior = np.zeros(n, dtype=np.float64)
        report = FitReport()
        for _ in range(epochs):
            start = time.perf_counter()
            # Loss of this epoch under the model before the update: add-one smoothed NLL per transition.
            probs = (self._counts[pair_of] + 1.0) / (out_counts[src] + n)
            self._counts += pair_base
            out_counts += out_base
            self._prior += np.bincount(dst, minlength=n)
            report.epoch_losses.append(float(-np.log(probs).mean()) if len(src) else 0.0)
            report.n_steps.append(1)  # one counting pass per epoch
            report.n_events_trained.append(int(len(src)))
            report.epoch_seconds.append(time.perf_counter() - start)
        return report

    def item_ids(self) -> np.ndarray:
        if self._items is None:
            raise RuntimeError("TemplateAdapter.item_ids: call fit() first")
        return self._items

    def score_prefixes(self, prefixes: Sequence[Sequence[int]]) -> np.ndarray:
        if self._counts is None or self._items is None or self._prior is None:
            raise RuntimeError("TemplateAdapter.score_prefixes: call fit() first")
        out = np.empty((len(prefixes), len(self._items)), dtype=np.float32)
        for row, prefix in enumerate(prefixes):
            known = [i for i in prefix if i in self._index]
            # Unknown items are dropped; an empty prefix is scored from the "zero state" (here: the prior).
            if not known:
                out[row] = self._prior
                continue
            n = len(self._items)
            first = self._index[known[-1]] * n  # the pairs of this source item: codes first .. first + n - 1
            lo, hi = np.searchsorted(self._pairs, [first, first + n])
            out[row] = 0.0
            out[row, self._pairs[lo:hi] - first] = self._counts[lo:hi]
        return out

    # -- optional hooks ---------------------------------------------------------------------------------
    # Override only the hooks your implementation really has (score_stream, evaluate, loss_on_scores,
    # train_forward, get_weights/set_weights, train_step, trace, optimizer_info; see
    # implementations.base.Adapter). A hook you override counts as declared ("hook:<name>"): raising
    # Unsupported from it then fails the check. Hooks you leave out are skipped with the reason.
    # Arguments, shapes, dtypes and units of each hook: implementations/README.md ("Hooks: ..."); a worked
    # example for a torch model is at the end of this module's docstring.
