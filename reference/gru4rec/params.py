"""Hyperparameters of the reference GRU4Rec: official names, defaults and ``set_params`` string semantics.

Source: docs/algorithm.md, 'Hyperparameters' (defaults of the official PyTorch port, hidasib/GRU4Rec_PyTorch_Official
d1fc311, ``GRU4Rec.__init__`` and ``GRU4Rec.set_params``). Extensions beyond the port are marked below.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import torch

#: Losses implemented. The port has cross-entropy and bpr-max; top1, top1-max and bpr are the original Theano
#: losses (docs/algorithm.md, 'Theano-only losses').
LOSSES = ("cross-entropy", "bpr-max", "top1", "top1-max", "bpr")

#: Official names and PyTorch-port defaults, plus ``final_act`` (Theano name, ``None`` = port behaviour),
#: ``seed`` and ``device`` (ours: explicit determinism, CPU by default).
DEFAULTS: dict[str, Any] = {
    "layers": [100],
    "loss": "cross-entropy",
    "batch_size": 64,
    "dropout_p_embed": 0.0,
    "dropout_p_hidden": 0.0,
    "learning_rate": 0.05,
    "momentum": 0.0,
    "sample_alpha": 0.5,
    "n_sample": 2048,
    "embedding": 0,
    "constrained_embedding": True,
    "n_epochs": 10,
    "bpreg": 1.0,
    "elu_param": 0.5,
    "logq": 0.0,
    "final_act": None,
    "seed": 42,
    "device": "cpu",
}

_FINAL_ACT_RE = re.compile(
    r"^(linear|relu|tanh|softmax|leaky-[0-9.eE+-]+|elu-[0-9.eE+-]+|selu-[0-9.eE+-]+-[0-9.eE+-]+)$"
)


def _to_bool(name: str, v: Any) -> bool:
    if isinstance(v, str):
        if v in ("True", "1"):
            return True
        if v in ("False", "0"):
            return False
        raise ValueError(f"parameter {name!r}: invalid boolean string {v!r} (use 'True'/'1' or 'False'/'0')")
    if isinstance(v, (bool, int)) and v in (0, 1):
        return bool(v)
    raise ValueError(f"parameter {name!r}: expected a boolean, got {v!r}")


def _to_layers(v: Any) -> list[int]:
    if isinstance(v, str):
        try:
            v = [int(x) for x in v.split("/")]
        except ValueError:
            raise ValueError(
                f"parameter 'layers': cannot parse {v!r}; use sizes separated by '/', e.g. '100/100'"
            ) from None
    elif isinstance(v, (int,)) and not isinstance(v, bool):
        v = [v]
    try:
        layers = [int(x) for x in v]
    except (TypeError, ValueError):
        raise ValueError(f"parameter 'layers': expected a list of positive ints, got {v!r}") from None
    if not layers or any(x <= 0 for x in layers) or any(float(x) != float(y) for x, y in zip(layers, v)):
        raise ValueError(f"parameter 'layers': expected a non-empty list of positive ints, got {v!r}")
    return layers


def _cast_like(name: str, current: Any, v: Any) -> Any:
    """Official rule: a value is cast to the type of the current attribute (strings included)."""
    if isinstance(current, bool):
        return _to_bool(name, v)
    if isinstance(current, int):
        try:
            if isinstance(v, float) and not float(v).is_integer():
                raise ValueError
            return int(v) if not isinstance(v, str) else int(v.strip())
        except (TypeError, ValueError):
            raise ValueError(f"parameter {name!r}: expected an int, got {v!r}") from None
    if isinstance(current, float):
        try:
            return float(v)
        except (TypeError, ValueError):
            raise ValueError(f"parameter {name!r}: expected a float, got {v!r}") from None
    return v


def coerce(name: str, v: Any, current: Any) -> Any:
    """Convert one value with the official ``set_params`` string semantics.

    - list parameters (``layers``): ``'a/b'`` → ``[a, b]``; an int → ``[int]``;
    - booleans: ``'True'``/``'1'``/``'False'``/``'0'``;
    - ``embedding='layersize'`` is kept and resolved to ``layers[0]`` by :func:`resolve`;
    - ``final_act``: a Theano final-activation name or ``None``/``'None'``;
    - ``device``: a string or ``torch.device``;
    - anything else is cast to the type of the current value (``'0.07'`` → 0.07).

    Raises ValueError naming the parameter when a value cannot be converted.
    """
    if name not in DEFAULTS:
        raise ValueError(f"unknown GRU4Rec parameter {name!r}; known: {', '.join(DEFAULTS)}")
    if name == "layers":
        return _to_layers(v)
    if name == "embedding":
        if v == "layersize":
            return "layersize"
        return _cast_like(name, 0, v)
    if name == "final_act":
        if v is None or v == "None" or v == "":
            return None
        if not isinstance(v, str) or not _FINAL_ACT_RE.match(v):
            raise ValueError(
                f"parameter 'final_act': unknown final activation {v!r} (linear, relu, tanh, softmax, "
                f"leaky-X, elu-X, selu-X-Y)"
            )
        return v
    if name == "device":
        if isinstance(v, torch.device):
            return str(v)
        if not isinstance(v, str):
            raise ValueError(f"parameter 'device': expected a device string, got {v!r}")
        try:
            torch.device(v)
        except RuntimeError as e:
            raise ValueError(f"parameter 'device': {e}") from None
        return v
    if name == "loss":
        if v not in LOSSES:
            raise ValueError(f"parameter 'loss': unknown loss {v!r}; one of {', '.join(LOSSES)}")
        return v
    if name == "seed":
        return _cast_like(name, 0, v)
    # Official semantics: cast to the type of the current value; numbers stay numbers even if the
    # current value is an int and the new one a float (e.g. momentum given as 0 then 0.4).
    if isinstance(current, bool):
        return _to_bool(name, v)
    if name in ("batch_size", "n_sample", "n_epochs"):
        return _cast_like(name, 0, v)
    return _cast_like(name, 0.0, v)


def resolve(hp: dict[str, Any]) -> dict[str, Any]:
    """Resolve ``embedding='layersize'`` and validate value ranges; returns a new dict.

    Raises ValueError naming the parameter for: empty/non-positive layers, batch_size < 1, n_sample < 0,
    n_epochs < 0, dropout outside [0, 1), learning_rate ≤ 0, momentum < 0, negative bpreg/elu_param/logq/
    sample_alpha, embedding < 0, a final_act incompatible with the loss, non-finite numbers.
    """
    hp = copy.deepcopy(hp)
    if hp["embedding"] == "layersize":
        hp["embedding"] = hp["layers"][0]
    for k in (
        "dropout_p_embed",
        "dropout_p_hidden",
        "learning_rate",
        "momentum",
        "sample_alpha",
        "bpreg",
        "elu_param",
        "logq",
    ):
        if not math.isfinite(hp[k]):
            raise ValueError(f"parameter {k!r}: must be finite, got {hp[k]!r}")
    checks = [
        ("batch_size", hp["batch_size"] >= 1, "must be >= 1"),
        ("n_sample", hp["n_sample"] >= 0, "must be >= 0"),
        ("n_epochs", hp["n_epochs"] >= 0, "must be >= 0"),
        ("dropout_p_embed", 0.0 <= hp["dropout_p_embed"] < 1.0, "must be in [0, 1)"),
        ("dropout_p_hidden", 0.0 <= hp["dropout_p_hidden"] < 1.0, "must be in [0, 1)"),
        ("learning_rate", hp["learning_rate"] > 0.0, "must be > 0"),
        ("momentum", hp["momentum"] >= 0.0, "must be >= 0"),
        ("sample_alpha", hp["sample_alpha"] >= 0.0, "must be >= 0"),
        ("bpreg", hp["bpreg"] >= 0.0, "must be >= 0"),
        ("elu_param", hp["elu_param"] >= 0.0, "must be >= 0"),
        ("logq", hp["logq"] >= 0.0, "must be >= 0"),
        ("embedding", hp["embedding"] >= 0, "must be >= 0 or 'layersize'"),
    ]
    for name, ok, msg in checks:
        if not ok:
            raise ValueError(f"parameter {name!r}: {msg}, got {hp[name]!r}")
    fa = hp["final_act"]
    if hp["loss"] == "cross-entropy" and fa not in (None, "softmax"):
        raise ValueError(f"parameter 'final_act': cross-entropy uses softmax, got {fa!r}")
    if hp["loss"] != "cross-entropy" and fa == "softmax":
        raise ValueError(
            f"parameter 'final_act': 'softmax' is only valid with loss='cross-entropy' (loss={hp['loss']!r})"
        )
    return hp
