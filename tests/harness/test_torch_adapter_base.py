"""The shared base of the torch adapters (``implementations._torchbase``): model access, weight hooks, optimizer
info, the fit spy's bookkeeping and the lane-parallel scoring helper, on a tiny torch module."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gru4rec_conformance.implementations._torchbase import (
    EpochCounts,
    FitObserver,
    OwnEvaluatorByCutoff,
    TorchModuleAdapter,
    act_family,
    constant_lr_info,
    item_indices,
    lane_parallel_scores,
    prefix_array,
    run_trainer_epochs,
)
from gru4rec_conformance.implementations.base import FitReport


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(4, 2)  # row 0 is padding
        self.out = torch.nn.Linear(2, 3)


class _Adapter(TorchModuleAdapter):
    name = "tiny"
    label = "tiny"

    def __init__(self) -> None:
        super().__init__()
        self.net: object = None
        self.opt: object = None

    def capabilities(self):
        return {}

    def build(self, seed, **hparams):
        pass

    def fit(self, train_df, n_epochs=None):
        torch.manual_seed(0)
        self.net = _Net()
        self.opt = torch.optim.Adagrad(self.net.parameters(), lr=0.1, initial_accumulator_value=0.5)
        self._item_ids = np.array([7, 8, 9])
        return FitReport()

    def score_prefixes(self, prefixes):
        raise NotImplementedError

    def _fitted_model(self):
        return self.net

    def _fitted_optimizer(self):
        return self.opt

    def _weight_rows(self):
        return {"emb.weight": slice(1, None)}


def test_before_fit_every_hook_names_the_adapter():
    a = _Adapter()
    with pytest.raises(RuntimeError, match=r"^tiny: call fit\(\) first"):
        a.get_weights()
    with pytest.raises(RuntimeError, match=r"^tiny\.optimizer_info: call fit\(\) first"):
        a.optimizer_info()
    with pytest.raises(RuntimeError, match=r"^tiny\.item_ids: call fit\(\) first"):
        a.item_ids()


def test_weights_show_the_rows_named_and_load_back_in_place():
    a = _Adapter()
    a.fit(None)
    w = a.get_weights()
    assert sorted(w) == ["emb.weight", "out.bias", "out.weight"]
    assert w["emb.weight"].shape == (3, 2)
    pad = a.net.emb.weight[0].detach().clone()
    a.set_weights({"emb.weight": np.full((3, 2), 2.0, dtype=np.float32)})
    assert torch.equal(a.net.emb.weight[0], pad)  # the row not shown is untouched
    assert np.all(a.get_weights()["emb.weight"] == 2.0)
    with pytest.raises(ValueError, match="unknown parameter name"):
        a.set_weights({"nope": np.zeros(1)})
    with pytest.raises(ValueError, match=r"emb\.weight has shape \(4, 2\), expected \(3, 2\)"):
        a.set_weights({"emb.weight": np.zeros((4, 2))})


def test_optimizer_info_reads_the_first_parameter_group():
    a = _Adapter()
    a.fit(None)
    info = a.optimizer_info()
    assert info["type"] == "Adagrad" and info["learning_rate"] == pytest.approx(0.1)
    assert info["initial_accumulator"] == pytest.approx(0.5) and info["momentum"] is None
    assert info["lr_schedule"] is None and info["grad_clip"] is None and info["weight_decay"] == 0.0
    lower = constant_lr_info(torch.optim.Adam(_Net().parameters(), lr=0.01))
    assert lower["type"] == "adam" and lower["momentum"] == 0.0 and "initial_accumulator" not in lower


def test_the_base_gives_only_the_hooks_it_implements():
    hooks = _Adapter.implemented_hooks()
    assert {"get_weights", "set_weights", "trace", "optimizer_info"} <= hooks
    assert not hooks & {"train_step", "train_forward", "loss_on_scores", "evaluate", "score_stream"}
    a = _Adapter()
    a.trace(True)
    assert a._trace_on is True


def test_fit_observer_counts_per_epoch_and_detach_restores_the_class_methods():
    class Loop:
        def step(self, n):
            return torch.tensor(float(n))

        def epoch(self, sizes):
            return [self.step(n) for n in sizes]

    loop = Loop()
    obs = FitObserver()
    step, epoch = loop.step, loop.epoch

    def counted(n):
        loss = step(n)
        obs.count(loss, n)
        return loss

    obs.wrap(loop, "step", counted)
    obs.wrap(loop, "epoch", lambda sizes: obs.run_epoch(epoch, sizes))
    loop.epoch([1, 3])
    loop.epoch([])
    obs.detach()
    assert "step" not in vars(loop) and "epoch" not in vars(loop)
    r = obs.report()
    assert r.epoch_losses[0] == pytest.approx((1 * 1 + 3 * 3) / 4) and np.isnan(r.epoch_losses[1])
    assert r.n_steps == [2, 0] and r.n_events_trained == [4, 0] and len(r.epoch_seconds) == 2


def test_run_trainer_epochs_records_the_epoch_loss_and_the_counts():
    counts = EpochCounts()
    step = counts.counting(lambda: None)
    report = FitReport()

    def epoch_run(epoch):
        for _ in range(epoch + 1):
            step()
        counts.events += 10
        return (0.5 * epoch, "other")

    run_trainer_epochs(report, 3, counts, epoch_run)
    assert report.epoch_losses == [0.0, 0.5, 1.0]
    assert report.n_steps == [1, 2, 3] and report.n_events_trained == [10, 10, 10]


@pytest.mark.parametrize("fixed_width", [False, True])
def test_lane_parallel_scores_match_one_sequence_at_a_time(fixed_width):
    n_items = 5
    rng = np.random.default_rng(0)
    table = torch.as_tensor(rng.normal(size=(n_items, n_items)), dtype=torch.float32)

    def step(inp, hidden):
        hidden = 0.5 * hidden + table[torch.as_tensor(inp)]
        return hidden, hidden

    seqs = [[1, 2], [], [3], [4, 0, 1], [2]]
    zero = np.arange(n_items, dtype=np.float32)
    got = lane_parallel_scores(seqs, n_items, 2, zero, lambda b: torch.zeros(2 if fixed_width else b, n_items), step,
                               fixed_width=fixed_width)  # fmt: skip
    for k, s in enumerate(seqs):
        h = torch.zeros(1, n_items)
        for i in s:
            _, h = step(np.array([i]), h)
        want = zero if not s else h[0].numpy()
        np.testing.assert_allclose(got[k], want, rtol=1e-6)


def test_item_indices_and_prefix_array_name_what_is_wrong():
    index = {10: 0, 20: 1}
    assert item_indices(index, [20, 10], "x").tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"^batch_inputs: item id\(s\) unknown to the trained model: \[30\]"):
        item_indices(index, [10, 30], "batch_inputs")
    assert prefix_array(index, [[10, 20], [20, 20]]).shape == (2, 2)
    with pytest.raises(ValueError, match="one common length >= 2"):
        prefix_array(index, [[10, 20], [10]])
    assert act_family("elu-0.5") == "elu" and act_family("tanh") == "tanh"


def test_own_evaluator_runs_once_per_cutoff():
    calls = []

    class _Eval(OwnEvaluatorByCutoff):
        name = "ev"
        label = "ev"
        model = None

        def capabilities(self):
            return {}

        def build(self, seed, **hparams):
            pass

        def fit(self, train_df, n_epochs=None):
            self.model = object()
            return FitReport()

        def item_ids(self):
            return np.arange(30)

        def score_prefixes(self, prefixes):
            raise NotImplementedError

        def _run_eval(self, test_df, batch_size, k, keep_rows):
            calls.append((k, keep_rows))
            return 0.1 * k, 0.01 * k, 5, [("row", k)] if keep_rows else []

    e = _Eval()
    with pytest.raises(RuntimeError, match=r"^ev: call fit\(\) first"):
        e.evaluate(None)
    e.fit(None)
    out = e.evaluate(None, cutoffs=(1, 5))
    assert out == {"recall@1": 0.1, "mrr@1": 0.01, "n_events": 5, "recall@5": 0.5, "mrr@5": 0.05}
    assert list(e.score_stream(None, 8)) == [("row", 20)]
    assert calls == [(1, False), (5, False), (20, True)]


def test_capability_flags_state_every_flag_and_refuse_unknown_names():
    from gru4rec_conformance.implementations.base import Capabilities, CapabilityError

    flags = Capabilities.flags("session_parallel", "bpreg")
    assert flags["session_parallel"] is True and flags["bpreg"] is True
    assert all(v is False for k, v in flags.items() if k not in ("session_parallel", "bpreg"))
    assert "losses" not in flags and "full_ranking" in flags
    caps = Capabilities.from_mapping({"losses": ["bpr-max"], **flags, "bpreg": False})
    assert caps.session_parallel and not caps.bpreg  # a flag given after the call overrides it
    with pytest.raises(CapabilityError, match="not flag feature"):
        Capabilities.flags("losses")


@pytest.mark.parametrize("none_mode", [False, True])
def test_layered_forward_result_puts_the_first_layer_first_in_the_no_embedding_mode(none_mode):
    from gru4rec_conformance.implementations._torchbase import layered_forward_result

    embed, layer = torch.ones(2, 3), torch.zeros(2, 4)
    scores = torch.arange(4.0, requires_grad=True).reshape(2, 2)
    out = layered_forward_result({"embed": embed, "layers": [layer]}, none_mode, scores, np.array([5, 6]), (2, 9), 1)
    assert (out["embedding_out"] is None) == none_mode
    assert [a.shape for a in out["layer_outputs"]] == ([(2, 3), (2, 4)] if none_mode else [(2, 4)])
    assert out["scores"].tolist() == [[0.0, 1.0], [2.0, 3.0]] and out["columns"].tolist() == [5, 6]
    assert out["score_tensor_shape"] == (2, 9) and out["output_rows_touched"] == 1
