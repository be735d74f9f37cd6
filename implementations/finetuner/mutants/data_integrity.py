"""Data-integrity mutants (caught by FT-6, FT-8, FT-22 and FT-26, docs/checks.md)."""

from __future__ import annotations

import numpy as np
import torch

from gru4rec_conformance.datasets.sst5 import Examples
from gru4rec_conformance.reference.finetuner import ReferenceFineTuner
from gru4rec_conformance.reference.finetuner.trainer import resolve_max_length

from ._common import MutantAdapter, mutant, tuned_mutant


class _DropBadLengths(ReferenceFineTuner):
    def _drop_bad(self, examples: Examples) -> Examples:
        L = resolve_max_length(self.tokenizer, self.config.max_length)
        lengths = [len(x) for x in self.tokenizer(list(examples.texts), add_special_tokens=True)["input_ids"]]
        data = list(range(len(examples)))
        for x in data:  # deleting while iterating skips each deleted item's neighbour, as in the studied code
            if lengths[x] > L:
                data.remove(x)
        return examples.subset(data)

    def fit(self, train, val, config=None):
        from gru4rec_conformance.reference.finetuner import FinetuneConfig

        self.config = config if isinstance(config, FinetuneConfig) else FinetuneConfig.from_mapping(config or {})
        return super().fit(self._drop_bad(train), self._drop_bad(val), self.config)

    def evaluate(self, examples):
        return super().evaluate(self._drop_bad(examples))


MutantDropLongExamples = tuned_mutant(_DropBadLengths, "mutant_ft6_drop_long_examples",
                                      defect="examples longer than the max length deleted from train/dev/test while iterating")  # fmt: skip


class _TupleUnpack(ReferenceFineTuner):
    def _step_loss(self, batch):
        loss, logits = self.model(**batch)  # a ModelOutput unpacks to its key strings
        return loss


@mutant("mutant_ft8_tuple_unpack",
        defect="model output tuple-unpacked (loss, logits = model(...)), which yields the key strings",
        message="output contract broken: one training step")  # fmt: skip
class MutantTupleUnpack(MutantAdapter):
    tuner_cls = _TupleUnpack


def _forward_logits(tuner, features, batch_size, generator, logits_of):
    """The reference's ``_forward_logits`` with two of its choices as parameters: ``generator`` orders the
    minibatches (None: input order) and ``logits_of(model output)`` reads the logits tensor."""
    assert tuner.model is not None  # predict/evaluate/fit require a built model
    tuner.model.eval()
    out = []
    with torch.no_grad():
        for _, batch in tuner._batches(features, batch_size, generator):
            batch.pop("labels", None)
            output = tuner.model(**{k: v.to(tuner.device) for k, v in batch.items()})
            out.append(logits_of(output).float().cpu().numpy())
    return np.concatenate(out, axis=0) if out else np.zeros((0, tuner.num_labels), np.float32)


def _first_unpacked(output):
    logits, *_ = output  # a ModelOutput unpacks to its key strings: the key 'logits'
    return logits


class _EvalOutputUnpacked(ReferenceFineTuner):
    def _forward_logits(self, features, batch_size):
        return _forward_logits(self, features, batch_size, None, _first_unpacked)


@mutant("mutant_ft8_eval_output_unpacked",
        defect="eval-mode model output unpacked (logits, *_ = model(...)), which yields the key string 'logits'",
        message="output contract broken: predict")  # fmt: skip
class MutantEvalOutputUnpacked(MutantAdapter):
    tuner_cls = _EvalOutputUnpacked


@mutant("mutant_ft22_binary_keeps_neutral", defect="binary view maps neutral to positive instead of dropping it")
class MutantBinaryKeepsNeutral(MutantAdapter):
    def binary_view(self, examples):
        return Examples(
            examples.split, examples.ids, examples.texts, tuple(int(y > 1) for y in examples.labels), 2, examples.source
        )


class _ShuffledPredictionLoader(ReferenceFineTuner):
    def _forward_logits(self, features, batch_size):
        # a shuffling evaluation loader (shuffle=True, as the studied code's dev/test DataLoaders); the order is
        # never undone
        return _forward_logits(self, features, batch_size, torch.Generator().manual_seed(0), lambda o: o.logits)


MutantShuffledPredictions = tuned_mutant(_ShuffledPredictionLoader, "mutant_ft26_shuffled_predictions",
                                         defect="prediction/evaluation loader shuffles the examples, so predictions are misaligned with the inputs", message="predictions are not in input order")  # fmt: skip


class _TestEvaluatedThrice(ReferenceFineTuner):
    def evaluate(self, examples):
        # the evaluation loop runs over the split three times and keeps every pass's rows (an epoch loop around
        # it that is never left): three predictions, ids and labels per example
        self._require_model()
        enc = self.encode(examples.texts)
        logits = np.concatenate([self._forward_logits(enc.features(), self.config.eval_batch_size)] * 3)
        thrice = Examples(examples.split, examples.ids * 3, examples.texts * 3, examples.labels * 3,
                          examples.num_labels, examples.source)  # fmt: skip
        self.split_log.append({"split": examples.split, "purpose": "evaluate", "epoch": None})
        res = self._metrics(logits, thrice)
        res["ids"] = list(thrice.ids)
        res["n_truncated"] = enc.n_truncated
        return res


MutantTestEvaluatedThrice = tuned_mutant(_TestEvaluatedThrice, "mutant_ft6_test_evaluated_thrice",
                                         defect="the test split is evaluated three times and every pass's predictions are returned", message="predictions for 35 test examples (3× as many)")  # fmt: skip


MUTANTS = [
    MutantDropLongExamples,
    MutantTestEvaluatedThrice,
    MutantTupleUnpack,
    MutantEvalOutputUnpacked,
    MutantBinaryKeepsNeutral,
    MutantShuffledPredictions,
]
