"""Fine-tuner adapters (family ``finetuner``): the protocol (``base``), the reference, the HF Trainer recipe,
the studied GitHub code bases (``third_party``) and the mutants. Importing this package registers the family;
the harness's discovery imports the adapter modules and their ``@register`` decorators list them."""

from .base import FINETUNER_KINDS, MODEL_FAMILIES, FinetunerAdapter, FinetunerCapabilities, Unsupported

__all__ = ["FINETUNER_KINDS", "MODEL_FAMILIES", "FinetunerAdapter", "FinetunerCapabilities", "Unsupported"]
