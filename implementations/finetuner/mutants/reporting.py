"""Reporting mutants (caught by FT-9 and FT-16..FT-21, docs/checks.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gru4rec_conformance.reference.finetuner import ReferenceFineTuner
from gru4rec_conformance.reference.finetuner.metrics import describe, mean_cross_entropy

from ._common import MutantAdapter, mutant, tuned_mutant


class _LossOverBatchSize(ReferenceFineTuner):
    def _metrics(self, logits, examples):
        res = super()._metrics(logits, examples)
        bs, n = self.config.eval_batch_size, len(examples)
        batch_means = [mean_cross_entropy(logits[i : i + bs], examples.labels[i : i + bs]) for i in range(0, n, bs)]
        res["mean_ce"] = float(sum(batch_means) / n)  # sum of batch-mean losses / N
        return res


MutantLossOverBatchSize = tuned_mutant(_LossOverBatchSize, "mutant_ft9_loss_over_batch_size",
                                       defect="reported loss = sum of per-batch mean losses / number of examples")  # fmt: skip


@mutant("mutant_ft16_pickle_no_run_id",
        defect="whole-module torch.save pickle under a file name without run id or seed")  # fmt: skip
class MutantPickleNoRunId(MutantAdapter):
    def _run_once(self, spec, train, val, test, cfg, *, seed, run_id, out_dir):
        rec = super()._run_once(spec, train, val, test, cfg, seed=seed, run_id=run_id, out_dir=None)
        if out_dir is not None:
            path = Path(out_dir) / "model__root__fine.pickle"
            torch.save(self.tuner.model, path)
            rec["artifact_dir"] = rec["selected_checkpoint"] = str(path)
            rec["artifacts"] = [str(path)]
        return rec


class _CasedTokenizer(ReferenceFineTuner):
    def __init__(self, spec, num_labels=5, *, device="cpu"):
        super().__init__(spec, num_labels, device=device)
        from transformers import AutoTokenizer

        lower = bool(getattr(self.tokenizer, "do_lower_case", True))
        self.tokenizer = AutoTokenizer.from_pretrained(spec.path, local_files_only=True, do_lower_case=not lower)


MutantTokenizerDrift = tuned_mutant(_CasedTokenizer, "mutant_ft17_tokenizer_drift",
                                    defect="a tokenizer with the other lower-casing than the requested model's is loaded (cased vs uncased)")  # fmt: skip


class _PaperOptimizer(ReferenceFineTuner):
    def _optimizer(self, cfg):
        return torch.optim.Adam(self.model.parameters(), lr=1e-5)  # whatever the config says

    def _scheduler(self, optimizer, cfg, total_steps):
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)


MutantFixedPaperOptimizer = tuned_mutant(_PaperOptimizer, "mutant_ft18_fixed_paper_optimizer",
                                         defect="Adam lr 1e-5 without warmup or decay used whatever the configuration (and the manifest) says")  # fmt: skip


class _NoCollapseFlag(ReferenceFineTuner):
    def _collapse_reasons(self, metrics, examples):
        return []


MutantCollapseUnflagged = tuned_mutant(_NoCollapseFlag, "mutant_ft19_collapse_unflagged",
                                       defect="constant-prediction runs are not flagged as collapsed")  # fmt: skip


@mutant("mutant_ft20_equal_length_aggregate",
        defect="aggregate over runs with population std (ddof=0) of per-epoch curves cut to the shortest run")  # fmt: skip
class MutantEqualLengthAggregate(MutantAdapter):
    def aggregate(self, runs):
        agg = super().aggregate(runs)
        for key, field in (("test_accuracy", "accuracy"), ("test_macro_f1", "macro_f1")):
            v = np.array([r["test"][field] for r in runs])
            agg[key] = {**describe(v), "std": float(np.std(v))}
        shortest = min(len(r["epochs"]) for r in runs)
        agg["mean_val_curve"] = np.mean(
            [[e["val_accuracy"] for e in r["epochs"][:shortest]] for r in runs], axis=0
        ).tolist()
        return agg


class _AdHocMetrics(ReferenceFineTuner):
    def _metrics(self, logits, examples):
        from sklearn.metrics import f1_score

        res = super()._metrics(logits, examples)
        cm = np.asarray(res["confusion_matrix"])
        with_margins = np.zeros((cm.shape[0] + 1, cm.shape[1] + 1), dtype=int)
        with_margins[:-1, :-1] = cm
        with_margins[-1, :-1], with_margins[:-1, -1], with_margins[-1, -1] = cm.sum(0), cm.sum(1), cm.sum()
        res["confusion_matrix"] = with_margins.tolist()
        res["macro_f1"] = float(f1_score(examples.labels, res["predictions"], average="weighted", zero_division=0))
        return res


MutantAdhocMetrics = tuned_mutant(_AdHocMetrics, "mutant_ft21_adhoc_metrics",
                                  defect="confusion matrix with margins, and weighted F1 reported as macro-F1")  # fmt: skip


class _BatchMeanAccuracy(ReferenceFineTuner):
    def _metrics(self, logits, examples):
        res = super()._metrics(logits, examples)
        bs, y, p = self.config.eval_batch_size, np.asarray(examples.labels), np.asarray(res["predictions"])
        # mean of per-batch accuracies: equals the accuracy only when the batch size divides n
        res["accuracy"] = float(np.mean([np.mean(p[i : i + bs] == y[i : i + bs]) for i in range(0, len(y), bs)]))
        return res


MutantBatchMeanAccuracy = tuned_mutant(_BatchMeanAccuracy, "mutant_ft21_batch_mean_accuracy",
                                       defect="accuracy reported as the mean of per-batch accuracies (wrong when the eval batch size does not divide n)")  # fmt: skip


MUTANTS = [
    MutantLossOverBatchSize,
    MutantPickleNoRunId,
    MutantTokenizerDrift,
    MutantFixedPaperOptimizer,
    MutantCollapseUnflagged,
    MutantEqualLengthAggregate,
    MutantAdhocMetrics,
    MutantBatchMeanAccuracy,
]
