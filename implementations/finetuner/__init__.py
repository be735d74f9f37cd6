"""Fine-tuner adapters (family ``finetuner``): the reference, the HF Trainer recipe, the studied GitHub code
bases and the mutants. ``ADAPTERS`` maps each name to its import path; ``load(name)`` imports the class."""

from __future__ import annotations

import importlib

from .base import FEATURES, MODEL_FAMILIES, FinetunerAdapter, Unsupported, register, registered

ADAPTERS = {
    "reference": "implementations.finetuner.reference:ReferenceAdapter",
    "hf_trainer": "implementations.finetuner.hf_trainer:HFTrainerAdapter",
    "munikar": "implementations.finetuner.third_party:MunikarAdapter",
    "cheang_bert": "implementations.finetuner.third_party:CheangBertAdapter",
    "minzoni_bert": "implementations.finetuner.third_party:MinzoniBertAdapter",
}


def _mutant_paths() -> dict[str, str]:
    from .mutants import MUTANTS

    return {name: f"{cls.__module__}:{cls.__qualname__}" for name, cls in MUTANTS.items()}


def names() -> list[str]:
    """Every adapter name (the implementations and the mutants)."""
    return sorted({**ADAPTERS, **_mutant_paths()})


def load(name: str) -> type:
    """The adapter class named ``name`` or given as ``module:Class``. Raises ``ValueError`` naming the
    known adapters for an unknown name."""
    path = ADAPTERS.get(name) or _mutant_paths().get(name) or (name if ":" in name else None)
    if path is None:
        raise ValueError(f"unknown fine-tuner implementation {name!r}; known: {', '.join(names())}")
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(module), cls)


__all__ = ["ADAPTERS", "FEATURES", "MODEL_FAMILIES", "FinetunerAdapter", "Unsupported", "load", "names",
           "register", "registered"]
