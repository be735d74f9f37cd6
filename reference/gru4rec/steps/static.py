"""Fixed-shape training step of the reference GRU4Rec: the same updates as ``GRU4Rec._step``, in a form a CUDA graph
can capture and replay (the GPU fast path; docs/algorithm.md, 'The session-parallel iterator' to 'Optimizer';
docs/performance.md, 'What one step costs').

The standard step (:class:`~.standard.StandardStep`) changes tensor shapes whenever the batch shrinks at the end of an
epoch, copies every run's lane inputs from NumPy to the device (a host synchronisation on CUDA for pageable
memory) and updates the embedding tables through ``torch.unique`` (data-dependent shapes). On a GPU such a step is
bound by Python and kernel-launch overheads (the official port: about 4.4 ms per minibatch whatever its size). Here
every step has the same shapes and reads its inputs from fixed device buffers:

- **lanes**: always B = ``batch_size`` lanes. In the shrinking tail of an epoch the b < B active lanes are the
  first b (the same compaction as the standard loop's ``H[keep]``); the B − b padded lanes repeat the input and
  target item of lane 0, their hidden state is zeroed before every step, their loss rows are multiplied by 0 and
  their target columns are masked out of every active row's softmax (cross-entropy: −∞ before the softmax;
  BPR-max: out of the negative softmax). Their gradients are therefore exactly zero, and because they repeat an
  active lane's items they touch no row that the active lanes do not touch (a touched row with a zero gradient would
  still see its momentum decay).
- **lane changes**: a keep index (B,) and a state multiplier (B,) per step (1 = carry the state, 0 = a new session
  or a padded lane), applied as ``H = H[keep] * multiplier``.
- **inputs**: the iterator's steps are laid out on the host in blocks of K steps (items, keep index, multiplier,
  active-lane mask; the shared samples from the sample cache) and copied to device buffers once per block (from
  pinned memory, asynchronously); the step picks row ``k`` of each block with a device-side counter.
- **dropout**: the masks are drawn from the dropout generator with exactly the shapes and in the order of the
  standard step ((b, d) per site, b = active lanes) into fixed buffers before each step, so the random stream is
  identical to the standard loop's on every device.
- **row-sparse tables** (``Wy``, ``By``, ``E``, ``GE.Wx0``): the lookups' gradients are summed into a dense
  gradient buffer per table with ``index_add_`` (duplicate rows summed, in the standard order), gathered back per
  index entry, and applied with :meth:`IndexedAdagradM.update_rows_dup` (every duplicate writes the same value:
  one lazy update per distinct touched row, no ``torch.unique``); the touched rows of the buffer are then zeroed.
- no ``.item()``/``.cpu()`` inside a step; the NaN check stays every ``nan_check_interval`` steps, as in the standard
  loop.

On CUDA (``use_cuda_graph``) the step is run eagerly for a few warm-up steps on a side stream, then captured once
per ``fit`` and replayed for every further step. On CPU the same step runs eagerly: results are identical to the
standard step bit for bit while all B lanes are active, and within float32 rounding (≤ 1e-6 relative) in the
shrinking tail, where padded shapes change the order of some reductions. ``tests/reference/test_ref_static_step.py``
proves this over whole epochs for every embedding mode, loss, dropout and momentum setting.

Supported: the stock components (iterator, sampler, model, optimizer, evaluator-independent) with the
cross-entropy and BPR-max losses and no per-step trace; :func:`unsupported_reason` says why anything else falls back
to the standard step. The model is read only through :class:`~.base.StepHost`.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import torch

from ..data import SessionParallelIterator
from ..losses import EPS_LOG, BPRMaxLoss, CrossEntropyLoss
from ..model import GRU4RecModel
from ..optim import IndexedAdagradM
from ..sampling import SampleCache
from .base import EpochTotals, StepHost, TrainingStep

__all__ = ["StaticStep", "unsupported_reason", "NEG", "GRAPH_WARMUP_STEPS", "RE_IMPLEMENTED_SEAMS"]

#: score of a masked (padded) column: exp(NEG − row max) underflows to exactly 0; finite, so masked entries times a
#: zero weight stay 0 (−∞ · 0 would be NaN)
NEG = -1e30

#: warm-up steps run eagerly on a side stream before the CUDA graph is captured
GRAPH_WARMUP_STEPS = 3

#: ``GRU4Rec`` seams whose arithmetic the static step re-implements: a model overriding one keeps the standard step
RE_IMPLEMENTED_SEAMS = ("_step", "_apply_keep", "_reset_lanes", "_sample_block", "_columns", "_collect_grads")


def unsupported_reason(host: StepHost) -> str | None:
    """Why ``host`` (a ``GRU4Rec``) cannot use the static step (None: it can). The static step re-implements the
    loop around the standard components, so any overridden component or seam (a mutant) keeps the standard step."""
    overridden = host.overridden_methods(RE_IMPLEMENTED_SEAMS)
    if overridden:
        return f"{type(host).__name__}.{overridden[0]} is overridden"
    stock = {
        "iterator_class": SessionParallelIterator,
        "sampler_class": SampleCache,
        "model_class": GRU4RecModel,
        "optimizer_class": IndexedAdagradM,
    }
    for attr, base in stock.items():
        if getattr(host, attr) is not base:
            return f"{attr} is {getattr(host, attr).__name__}, not the stock {base.__name__}"
    loss = host.get_params()["loss"]
    cls_loss = host.loss_classes.get(loss)
    if loss == "cross-entropy" and cls_loss is CrossEntropyLoss:
        return None
    if loss == "bpr-max" and cls_loss is BPRMaxLoss:
        return None
    return (
        f"loss {loss!r} ({getattr(cls_loss, '__name__', cls_loss)}) has no static form (cross-entropy and "
        "bpr-max with the stock loss classes only)"
    )


class StaticStep(TrainingStep):
    """Runs training epochs of a built ``GRU4Rec`` with the fixed-shape step (see the module docstring).

    Args:
        gru: a built ``GRU4Rec`` (:class:`~.base.StepHost`: model, optimizer, sampler, iterator, loss and
            generators exist).
        use_cuda_graph: capture and replay the step as a CUDA graph (only on a CUDA device; None = when the device
            is CUDA). A capture failure falls back to the eager static step with a warning; ``info`` says which.
        block_steps: steps per host-to-device input block (None: about 2^20 ids per block, at most 4096 steps).

    Attributes:
        info: {'step_impl': 'static', 'cuda_graph': bool, 'graph_error': str | None, 'block_steps': int, and
            'capture_seconds' (host time of the capture, inside the first epoch's time) once captured}.

    Raises ValueError when ``gru`` cannot use the static step (:func:`unsupported_reason`) or ``use_cuda_graph``
    is requested off CUDA.
    """

    name = "static"

    def __init__(self, gru: StepHost, use_cuda_graph: bool | None = None, block_steps: int | None = None) -> None:
        why = unsupported_reason(gru)
        if why is not None:
            raise ValueError(f"parameter 'step_impl': the static step cannot run this model: {why}")
        self.gru = gru
        self.dev = gru.device
        if use_cuda_graph is None:
            use_cuda_graph = self.dev.type == "cuda"
        if use_cuda_graph and self.dev.type != "cuda":
            raise ValueError("use_cuda_graph: CUDA graphs need device='cuda'")
        self.use_cuda_graph = bool(use_cuda_graph)
        hp = gru.get_params()
        model = gru.model
        self.B = B = int(hp["batch_size"])
        self.S = S = int(hp["n_sample"])
        self.K = int(block_steps) if block_steps else max(1, min(4096, (1 << 20) // (2 * B + S + 1)))
        K, dev = self.K, self.dev
        self.p_embed, self.p_hidden = gru._dropout_rates()
        # dropout sites in the order the standard forward draws them, with their widths
        sites = []
        first = model.layers[0] if model.mode == "none" else model.n_input
        if self.p_embed > 0:
            sites.append(("embed", first, self.p_embed))
        if self.p_hidden > 0:
            sites.extend((f"hidden.{l}", model.layers[l], self.p_hidden) for l in range(model.start, len(model.layers)))
        self.sites = sites
        self.noise = {key: torch.zeros((B, d), dtype=torch.float32, device=dev) for key, d, _ in sites}
        # per-block inputs (device) and their host staging
        self.X = torch.zeros((K, B), dtype=torch.int64, device=dev)
        self.T = torch.zeros((K, B), dtype=torch.int64, device=dev)
        self.KEEP = torch.zeros((K, B), dtype=torch.int64, device=dev)
        self.MULT = torch.zeros((K, B), dtype=torch.float32, device=dev)
        self.VALID = torch.zeros((K, B), dtype=torch.float32, device=dev)
        self.SAMP = torch.zeros((K, S), dtype=torch.int64, device=dev) if S > 0 else None
        self.k = torch.zeros(1, dtype=torch.int64, device=dev)
        self.pad_tail = torch.zeros(S, dtype=torch.bool, device=dev)
        self.H = model.zero_state(B)
        self.acc_loss = torch.zeros((), dtype=torch.float64, device=dev)
        # dense gradient buffers of the row-sparse tables (zero between steps)
        self.G = {name: torch.zeros_like(model.params[name]) for name in self._row_tables()}
        self.names = model.param_names()
        self.graph: torch.cuda.CUDAGraph | None = None
        self.info: dict[str, Any] = {"step_impl": "static", "cuda_graph": False, "graph_error": None, "block_steps": K}
        self._graph_steps_seen = 0

    def _row_tables(self) -> list[str]:
        m = self.gru.model
        tables = ["Wy", "By"]
        if m.mode == "separate":
            tables.append("E")
        if m.mode == "none":
            tables.append("GE.Wx0")
        return tables

    # ------------------------------------------------------------------ the fixed-shape step
    def _loss_rows(self, R: torch.Tensor, y: torch.Tensor, padcol: torch.Tensor) -> torch.Tensor:
        """Per-row loss (B,) of the stock loss on R (B, B+S) with the padded target columns masked out; the
        arithmetic of ``CrossEntropyLoss.__call__`` / ``BPRMaxLoss.__call__`` row by row."""
        lf = self.gru.loss_function
        if isinstance(lf, CrossEntropyLoss):
            Rq = lf.logq_correction(R, y, self.B)
            P = lf.softmax(Rq.masked_fill(padcol, NEG))
            return -torch.log(torch.diagonal(P) + EPS_LOG)
        O = lf.activation(R)
        softmax_scores = lf.softmax_neg(O.masked_fill(padcol, NEG))
        target_scores = torch.diagonal(O).reshape(-1, 1)
        return -torch.log(
            torch.sum(torch.sigmoid(target_scores - O) * softmax_scores, dim=1) + EPS_LOG
        ) + lf.bpreg * torch.sum((O**2) * softmax_scores, dim=1)

    def _step(self) -> None:
        model = self.gru.model
        k = self.k
        x = self.X.index_select(0, k)[0]
        t = self.T.index_select(0, k)[0]
        keep = self.KEEP.index_select(0, k)[0]
        mult = self.MULT.index_select(0, k)[0][:, None]
        valid = self.VALID.index_select(0, k)[0]
        H = [h.index_select(0, keep) * mult for h in self.H]
        if self.SAMP is not None:
            y = torch.cat([t, self.SAMP.index_select(0, k)[0]])
            padcol = torch.cat([valid == 0, self.pad_tail])[None, :]
        else:
            y = t
            padcol = (valid == 0)[None, :]
        masks = {key: (self.noise[key] >= p).to(torch.float32).div_(1.0 - p) for key, _, p in self.sites}
        rows: list = []
        R, H_new, _ = model.forward_train(x, y, H, self.p_embed, self.p_hidden, None, masks=masks, rows=rows)
        loss_sum = torch.sum(self._loss_rows(R, y, padcol) * valid)
        L = loss_sum / self.B
        params = [model.params[n] for n in self.names]
        grads = torch.autograd.grad(L, params + [leaf for _, _, leaf in rows], allow_unused=True)
        opt = self.gru.optimizer
        clr = opt.current_lr()
        with torch.no_grad():
            for name, g in zip(self.names, grads[: len(self.names)]):
                if g is not None and name not in self.G:
                    opt.update_dense(name, g, clr)
            idx_parts: dict = {}
            for (name, flat, _), g in zip(rows, grads[len(self.names) :]):
                if g is None:
                    continue
                self.G[name].index_add_(0, flat, g.reshape(flat.shape[0], -1))
                idx_parts.setdefault(name, []).append(flat)
            for name, parts in idx_parts.items():
                idx = torch.cat(parts) if len(parts) > 1 else parts[0]
                G = self.G[name]
                opt.update_rows_dup(name, idx, G.index_select(0, idx), clr)
                G.index_fill_(0, idx, 0.0)
            for h, hn in zip(self.H, H_new):
                h.copy_(hn)
            self.acc_loss += loss_sum.detach()
            k.add_(1)

    # ------------------------------------------------------------------ CUDA graph
    def _run_step(self) -> None:
        if not self.use_cuda_graph:
            self._step()
            return
        if self.graph is not None:
            self.graph.replay()
            return
        if self._graph_steps_seen < GRAPH_WARMUP_STEPS:
            self._graph_steps_seen += 1
            side = torch.cuda.Stream(device=self.dev)
            side.wait_stream(torch.cuda.current_stream(self.dev))
            with torch.cuda.stream(side):
                self._step()
            torch.cuda.current_stream(self.dev).wait_stream(side)
            return
        t0 = time.perf_counter()
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._step()
        except Exception as exc:  # capture failed: nothing was executed; run this step eagerly from now on
            self.use_cuda_graph = False
            self.info["graph_error"] = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"reference GRU4Rec: CUDA graph capture of the static step failed ({exc}); "
                "continuing with the eager static step",
                RuntimeWarning,
                stacklevel=3,
            )
            torch.cuda.synchronize(self.dev)
            self._step()
            return
        self.graph = graph
        self.info["cuda_graph"] = True
        self.info["capture_seconds"] = time.perf_counter() - t0
        graph.replay()  # capture records without executing: this replay is the step

    # ------------------------------------------------------------------ host side
    def _upload(self, n: int, arrays: dict, samples: torch.Tensor | None) -> None:
        pin = self.dev.type == "cuda"
        for name, arr in arrays.items():
            src = torch.from_numpy(arr[:n])
            if pin:
                src = src.pin_memory()
            getattr(self, name)[:n].copy_(src, non_blocking=pin)
        if samples is not None and self.SAMP is not None:  # both exist exactly when n_sample > 0
            self.SAMP[:n].copy_(samples)
        self.k.zero_()

    def train_epoch(self, epoch: int) -> EpochTotals:
        """One epoch; returns (Σ loss over steps and lanes, steps, trained events), as the standard step.
        Raises ``TrainingDivergedError`` on a NaN loss (checked every ``nan_check_interval`` steps)."""
        gru = self.gru
        B, K = self.B, self.K
        for h in self.H:
            h.zero_()
        self.acc_loss.zero_()
        host: dict[str, np.ndarray] = {
            "X": np.zeros((K, B), np.int64),
            "T": np.zeros((K, B), np.int64),
            "KEEP": np.zeros((K, B), np.int64),
            "MULT": np.zeros((K, B), np.float32),
            "VALID": np.zeros((K, B), np.float32),
        }
        lanes = np.arange(B, dtype=np.int64)
        b_of_step = np.zeros(K, dtype=np.int64)
        n_steps = n_events = 0
        since_check = 0
        fill = 0
        opt = gru.optimizer
        gen = gru.dropout_generator

        def flush() -> None:
            nonlocal fill, since_check
            if fill == 0:
                return
            samples = gru._sample_block(fill, B)
            self._upload(fill, host, samples)
            for j in range(fill):
                b = int(b_of_step[j])
                for key, d, _ in self.sites:
                    torch.rand((b, d), dtype=torch.float32, generator=gen, out=self.noise[key][:b])
                self._run_step()
                opt.n_updates += 1
            since_check += fill
            if since_check >= gru.nan_check_interval:
                gru._check_nan(self.acc_loss, epoch, n_steps)
                since_check = 0
            fill = 0

        for run in gru.iterator:
            b, n = run.n_lanes, run.n_steps
            done = 0
            while done < n:
                m = min(n - done, K - fill)
                rows = slice(fill, fill + m)
                xin = run.in_items[done : done + m]
                xout = run.out_items[done : done + m]
                host["X"][rows, :b] = xin
                host["X"][rows, b:] = xin[:, :1]
                host["T"][rows, :b] = xout
                host["T"][rows, b:] = xout[:, :1]
                host["KEEP"][rows] = lanes
                host["VALID"][rows, :b] = 1.0
                host["VALID"][rows, b:] = 0.0
                host["MULT"][rows] = host["VALID"][rows]
                if done == 0:  # the run's first step: survivors compacted, new sessions start from zero
                    if run.keep is not None:
                        host["KEEP"][fill, :b] = run.keep
                        host["KEEP"][fill, b:] = 0
                    reset = gru.iterator.reset_mask(run, 0)
                    if reset is not None:
                        host["MULT"][fill, :b] = (~np.asarray(reset, dtype=bool)).astype(np.float32)
                b_of_step[rows] = b
                fill += m
                done += m
                n_steps += m
                n_events += m * b
                if fill == K:
                    flush()
        flush()
        gru._check_nan(self.acc_loss, epoch, n_steps)
        return EpochTotals(float(self.acc_loss), n_steps, n_events)
