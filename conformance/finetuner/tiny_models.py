"""Tiny random BERT, ALBERT, DistilBERT and RoBERTa models with small vocabularies built from given texts, saved
as local model directories (docs/finetuner.md, 'Tiny models'). Nothing is downloaded.

The base model (no classification head) is saved, like the MiniLM package's model, so that loading it for
sequence classification initialises the head from the run seed.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

FAMILIES = ("bert", "albert", "distilbert", "roberta")

_BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _words(texts: Iterable[str], lowercase: bool) -> list[str]:
    counts: Counter[str] = Counter()
    for t in texts:
        for w in re.findall(r"\w+|[^\w\s]", t.lower() if lowercase else t):
            counts[w] += 1
    return [w for w, _ in counts.most_common()]


def _tokenizer(family: str, texts: Sequence[str], vocab_size: int):
    from transformers import AlbertTokenizer, BertTokenizer, DistilBertTokenizer, RobertaTokenizer

    if family in ("bert", "distilbert"):
        words = _words(texts, lowercase=True)[: vocab_size - len(_BERT_SPECIALS) - 26]
        letters = [c for c in "abcdefghijklmnopqrstuvwxyz" if c not in words]
        pieces = [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"]
        vocab = {tok: i for i, tok in enumerate(dict.fromkeys(_BERT_SPECIALS + words + letters + pieces))}
        cls = BertTokenizer if family == "bert" else DistilBertTokenizer
        return cls(vocab=vocab, do_lower_case=True)
    if family == "albert":
        words = _words(texts, lowercase=True)[: vocab_size - 5 - 26]
        specials = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0)]
        scored = [("\u2581" + w, -float(i + 1)) for i, w in enumerate(words)]
        chars = [(c, -100.0) for c in "abcdefghijklmnopqrstuvwxyz"] + [("\u2581", -50.0)]
        return AlbertTokenizer(vocab=specials + scored + chars, do_lower_case=True)
    if family == "roberta":
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(
            list(texts),
            vocab_size=vocab_size,
            min_frequency=1,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
            show_progress=False,
        )
        import json
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            bpe.save_model(d)
            with open(os.path.join(d, "vocab.json"), encoding="utf-8") as f:
                vocab = json.load(f)
            with open(os.path.join(d, "merges.txt"), encoding="utf-8") as f:
                merges = [tuple(ln.split()) for ln in f if ln.strip() and not ln.startswith("#")]
        # tokenizers' BPE takes (left, right) pairs; transformers annotates merges as list[str]
        return RobertaTokenizer(vocab=vocab, merges=merges)  # type: ignore[arg-type]
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


def _config(family: str, vocab_size: int, tokenizer, max_positions: int):
    from transformers import AlbertConfig, BertConfig, DistilBertConfig, RobertaConfig

    if family == "bert":
        return BertConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            max_position_embeddings=max_positions,
            pad_token_id=tokenizer.pad_token_id,
        )
    if family == "albert":
        return AlbertConfig(
            vocab_size=vocab_size,
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            max_position_embeddings=max_positions,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
        )
    if family == "distilbert":
        return DistilBertConfig(
            vocab_size=vocab_size,
            dim=32,
            n_layers=2,
            n_heads=2,
            hidden_dim=37,
            max_position_embeddings=max_positions,
            pad_token_id=tokenizer.pad_token_id,
        )
    return RobertaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=max_positions + 2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        type_vocab_size=1,
    )


def make_tiny_model(
    family: str,
    directory: str | os.PathLike,
    texts: Sequence[str],
    *,
    seed: int = 0,
    vocab_size: int = 400,
    max_positions: int = 256,
) -> Path:
    """Build a tiny random ``family`` base model and its tokenizer (vocabulary made from ``texts``) and
    ``save_pretrained`` both into ``directory`` (created). Same arguments -> bitwise-identical weights.

    Returns the directory. Raises ``ValueError`` for an unknown family.
    """
    import torch
    from transformers import AutoModel

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    tok = _tokenizer(family, texts, vocab_size)
    tok.model_max_length = max_positions
    config = _config(family, len(tok.get_vocab()), tok, max_positions)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory
