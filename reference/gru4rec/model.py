"""The GRU4Rec network: embedding modes, GRU layers, dropout placement, scoring, initialisation
(docs/algorithm.md, 'Embedding modes' to 'Initialisation').

Parameters live in a plain ``dict[str, torch.Tensor]`` (``GRU4RecModel.params``), named and laid out as in the
official PyTorch port so that weights transfer one to one:

============================  ==================  =====================================================
name                          shape               meaning / gate layout
============================  ==================  =====================================================
``E``                         (n_items, k)        separate embedding (embedding = k > 0), sparse rows
``GE.Wx0``                    (n_items, 3·d0)     no-embedding first layer input weights, column blocks
                                                  [candidate | reset | update], sparse rows
``GE.Wrz0``                   (d0, 2·d0)          its recurrent weights, column blocks [reset | update]
``GE.Wh0``                    (d0, d0)            its candidate recurrent weights (applied to r ⊙ h)
``GE.Bh0``                    (3·d0,)             its single bias, blocks as ``GE.Wx0``
``G.{l}.weight_ih``           (3·d_l, n_in)       torch.nn.GRUCell layout, row blocks [r; z; n]
``G.{l}.weight_hh``           (3·d_l, d_l)        row blocks [r; z; n]
``G.{l}.bias_ih``/``bias_hh``  (3·d_l,)            row blocks [r; z; n]
``Wy``                        (n_items, d_last)   output weights (also the input embedding when constrained)
``By``                        (n_items, 1)        output bias (``get_weights`` exposes it as (n_items,))
============================  ==================  =====================================================

``l`` is the layer index; in no-embedding mode layer 0 is the ``GE`` layer and ``G`` starts at 1. Sparse
parameters (``E``, ``GE.Wx0``, ``Wy``, ``By``) receive row-sparse gradients (lazy optimizer updates).

Differences from the port: no-embedding mode works with any number of layers (the port indexes its layer
list wrongly from the second layer on); initialisation is Glorot-uniform *per gate block* with the correct
fan-in/fan-out for every shape (the port's compatibility init, which fails on numpy 2, builds input weights
of the wrong shape when n_input ≠ layer size; its fallback init scales along the wrong axis); dropout masks
come from an explicit generator.
"""

from __future__ import annotations

import math

import torch


class GRU4RecModel:
    """GRU4Rec network state and forward passes.

    Args:
        n_items: number of item columns (N_I).
        layers: GRU layer sizes [d_0, ..., d_last].
        embedding: separate embedding size k (0 = none); ignored when ``constrained_embedding``.
        constrained_embedding: share the output weights ``Wy`` as input embedding (embedding size d_last).
        generator: CPU torch.Generator for the initialisation.
        device: where the parameters live.

    Extension points (override in a subclass): :meth:`init_block`, :meth:`init_bias`, :meth:`dropout_mask`,
    :meth:`score_train`.
    """

    def __init__(
        self,
        n_items: int,
        layers: list[int],
        embedding: int,
        constrained_embedding: bool,
        generator: torch.Generator,
        device: torch.device | str = "cpu",
    ):
        self.n_items = int(n_items)
        self.layers = list(layers)
        if constrained_embedding:
            self.mode = "shared"
            self.n_input = self.layers[-1]
        elif embedding:
            self.mode = "separate"
            self.n_input = int(embedding)
        else:
            self.mode = "none"
            self.n_input = self.n_items
        self.start = 1 if self.mode == "none" else 0
        self.device = torch.device(device)
        self.params: dict[str, torch.Tensor] = {}
        self.reset_parameters(generator)
        self.to(self.device)

    # ------------------------------------------------------------------ initialisation
    def init_block(self, rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
        """One weight block, Glorot-uniform U(−s, s), s = √(6/(rows+cols)) (docs/algorithm.md, 'Initialisation'), float32 on CPU."""
        s = math.sqrt(6.0 / (rows + cols))
        return (torch.rand((rows, cols), generator=generator, dtype=torch.float32) * 2 - 1) * s

    def init_bias(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """A bias vector: zeros (docs/algorithm.md, 'Initialisation')."""
        return torch.zeros(n, dtype=torch.float32)

    def layer_input_size(self, layer: int) -> int:
        return self.n_input if layer == 0 else self.layers[layer - 1]

    def reset_parameters(self, generator: torch.Generator) -> None:
        """(Re)initialise every parameter; the draw order is fixed, so a seed gives the same weights."""
        p: dict[str, torch.Tensor] = {}
        N = self.n_items
        if self.mode == "separate":
            p["E"] = self.init_block(N, self.n_input, generator)
        if self.mode == "none":
            d0 = self.layers[0]
            p["GE.Wx0"] = torch.cat([self.init_block(N, d0, generator) for _ in range(3)], dim=1)
            p["GE.Wrz0"] = torch.cat([self.init_block(d0, d0, generator) for _ in range(2)], dim=1)
            p["GE.Wh0"] = self.init_block(d0, d0, generator)
            p["GE.Bh0"] = self.init_bias(3 * d0, generator)
        for l in range(self.start, len(self.layers)):
            d, n_in = self.layers[l], self.layer_input_size(l)
            p[f"G.{l}.weight_ih"] = torch.cat([self.init_block(d, n_in, generator) for _ in range(3)], dim=0)
            p[f"G.{l}.weight_hh"] = torch.cat([self.init_block(d, d, generator) for _ in range(3)], dim=0)
            p[f"G.{l}.bias_ih"] = self.init_bias(3 * d, generator)
            p[f"G.{l}.bias_hh"] = self.init_bias(3 * d, generator)
        p["Wy"] = self.init_block(N, self.layers[-1], generator)
        p["By"] = self.init_bias(N, generator).reshape(N, 1)
        self.params = {k: v.contiguous().requires_grad_(True) for k, v in p.items()}

    def to(self, device) -> GRU4RecModel:
        self.device = torch.device(device)
        self.params = {k: v.detach().to(self.device).requires_grad_(True) for k, v in self.params.items()}
        return self

    def param_names(self) -> list[str]:
        return list(self.params)

    def shapes(self) -> dict[str, tuple]:
        return {k: tuple(v.shape) for k, v in self.params.items()}

    # ------------------------------------------------------------------ building blocks
    def dropout_mask(self, shape, p: float, generator: torch.Generator | None) -> torch.Tensor | None:
        """Inverted-dropout multiplier: keep with probability 1−p, kept units scaled by 1/(1−p); None when p = 0
        (docs/algorithm.md, 'Dropout'). Drawn as U[0,1) ≥ p (much faster on CPU than ``bernoulli_``; same distribution)."""
        if p <= 0:
            return None
        m = torch.rand(shape, dtype=torch.float32, device=self.device, generator=generator) >= p
        return m.to(torch.float32).div_(1.0 - p)

    def gather_rows(self, name: str, idx: torch.Tensor, rows: list) -> torch.Tensor:
        """Rows ``idx`` of the row-sparse table ``name`` as a new leaf that receives their gradient; the
        (name, flat indices, leaf) triple is appended to ``rows`` for the optimizer's lazy update."""
        flat = idx.reshape(-1)
        leaf = self.params[name].detach().index_select(0, flat).requires_grad_(True)
        rows.append((name, flat, leaf))
        return leaf.reshape(*idx.shape, -1)

    def ge_layer(self, Vx_rows: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
        """Original (Theano) GRU cell of the no-embedding first layer; Vx_rows = GE.Wx0[x] (one-hot × W)."""
        p = self.params
        Vx = Vx_rows + p["GE.Bh0"]
        Vrz = torch.mm(H, p["GE.Wrz0"])
        vx_x, vx_r, vx_z = Vx.chunk(3, 1)
        vh_r, vh_z = Vrz.chunk(2, 1)
        r = torch.sigmoid(vx_r + vh_r)
        z = torch.sigmoid(vx_z + vh_z)
        h = torch.tanh(torch.mm(r * H, p["GE.Wh0"]) + vx_x)
        return (1.0 - z) * H + z * h

    def cell(self, l: int, X: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
        """torch.nn.GRUCell arithmetic of layer l (reset gate after the recurrent matrix)."""
        p = self.params
        return torch.gru_cell(
            X, H, p[f"G.{l}.weight_ih"], p[f"G.{l}.weight_hh"], p[f"G.{l}.bias_ih"], p[f"G.{l}.bias_hh"]
        )

    def score_train(self, h: torch.Tensor, y: torch.Tensor, O: torch.Tensor, Bo: torch.Tensor) -> torch.Tensor:
        """Training scores of the sampled columns only: R = h·O^T + b_O^T, O = Wy[y], b_O = By[y] (docs/algorithm.md, 'Forward pass and
        scores').

        h: (b, d_last); y: (K,) item columns; O: (K, d_last); Bo: (K, 1). Returns (b, K)."""
        return torch.addmm(Bo.T, h, O.T)

    def score_all(self, h: torch.Tensor) -> torch.Tensor:
        """Scores of every item column: (b, n_items) = h·Wy^T + By^T (raw logits, as the port)."""
        p = self.params
        return torch.addmm(p["By"].T, h, p["Wy"].T)

    # ------------------------------------------------------------------ forward passes
    def forward_train(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        H: list[torch.Tensor],
        p_embed: float,
        p_hidden: float,
        generator: torch.Generator | None,
        masks: dict[str, torch.Tensor | None] | None = None,
        capture: bool = False,
        rows: list | None = None,
    ):
        """Training-mode forward of one step.

        Args:
            x: (b,) int64 input item columns; y: (K,) int64 scored columns [targets ; samples] (any shape is
                gathered; ``score_train`` defines how O of shape y.shape + (d,) is scored).
            H: hidden state per layer, (b, d_l) float32 (not modified).
            p_embed, p_hidden: dropout rates; generator: drives the masks.
            masks: explicit dropout multipliers instead of random ones, keys ``'embed'`` and ``'hidden.{l}'``
                (a missing key or None = no dropout at that site).
            capture: also return the intermediate outputs.
            rows: a list that receives the (table name, indices, leaf) triples of the row-sparse lookups (see
                :meth:`gather_rows`); the trainer takes their gradients from there.

        Returns ``(R, H_new, captured)``: R (b, K) scores, H_new the new per-layer states (post-dropout, still
        attached to the graph), captured = {'embedding_out', 'layer_outputs'} or None.

        Dropout placement (the port, docs/algorithm.md, 'Dropout'): ``dropout_p_embed`` on the input embedding (shared/separate
        modes) or, in no-embedding mode, on the first layer's output; ``dropout_p_hidden`` on the output of
        every other GRU layer; the dropped-out output is stored as the next hidden state.
        """
        rows = [] if rows is None else rows

        def drop(t: torch.Tensor, key: str, rate: float) -> torch.Tensor:
            m = masks.get(key) if masks is not None else self.dropout_mask(t.shape, rate, generator)
            return t if m is None else t * m

        H_new = list(H)
        embedding_out = None
        layer_outputs = []
        if self.mode == "shared":
            E = self.gather_rows("Wy", x, rows)
        elif self.mode == "separate":
            E = self.gather_rows("E", x, rows)
        O = self.gather_rows("Wy", y, rows)
        Bo = self.gather_rows("By", y, rows)
        if self.mode == "none":
            Xh = self.ge_layer(self.gather_rows("GE.Wx0", x, rows), H[0])
            Xh = drop(Xh, "embed", p_embed)
            H_new[0] = Xh
            layer_outputs.append(Xh)
        else:
            Xh = drop(E, "embed", p_embed)
            embedding_out = Xh
        for l in range(self.start, len(self.layers)):
            Xh = drop(self.cell(l, Xh, H[l]), f"hidden.{l}", p_hidden)
            H_new[l] = Xh
            layer_outputs.append(Xh)
        R = self.score_train(Xh, y, O, Bo)
        captured = {"embedding_out": embedding_out, "layer_outputs": layer_outputs} if capture else None
        return R, H_new, captured

    @torch.no_grad()
    def forward_eval(self, x: torch.Tensor, H: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Inference step (no dropout): returns the last layer output (b, d_last) and the new states."""
        p = self.params
        H_new = list(H)
        if self.mode == "none":
            Xh = self.ge_layer(p["GE.Wx0"][x], H[0])
            H_new[0] = Xh
        elif self.mode == "shared":
            Xh = p["Wy"][x]
        else:
            Xh = p["E"][x]
        for l in range(self.start, len(self.layers)):
            Xh = self.cell(l, Xh, H[l])
            H_new[l] = Xh
        return Xh, H_new

    def zero_state(self, b: int) -> list[torch.Tensor]:
        return [torch.zeros((b, d), dtype=torch.float32, device=self.device) for d in self.layers]
