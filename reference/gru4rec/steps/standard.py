"""The standard training step of the reference GRU4Rec (docs/algorithm.md, 'The session-parallel iterator' to
'Optimizer'; the official port's loop).

Each session-parallel run moves the lanes' hidden states (``_apply_keep``), copies the run's items to the device,
draws the run's shared samples (``_sample_block``) and applies one update per step (``_step``) after zeroing the
lanes whose session starts (``_reset_lanes``). Tensor shapes follow the shrinking batch at the end of an epoch. All
arithmetic goes through the host's seams, so a ``GRU4Rec`` subclass that overrides one of them (a mutant) trains
with its override. Free of host synchronisation except the NaN check every ``nan_check_interval`` steps and, with a
per-step ``trace``, one sync per step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..records import StepTrace
from .base import EpochTotals, StepHost, TrainingStep

__all__ = ["StandardStep"]


class StandardStep(TrainingStep):
    """Trains epochs of a built model with its own seams (see the module docstring).

    Args:
        host: a built ``GRU4Rec`` (:class:`~.base.StepHost`).
        trace: optional callable receiving a :class:`~..records.StepTrace` per step (costs a host sync per step).
        reason: why this step was chosen, reported in ``info['reason']``.

    Attributes:
        info: ``{'step_impl': 'standard', 'reason': reason}``.
    """

    name = "standard"

    def __init__(self, host: StepHost, trace: Callable[[StepTrace], None] | None = None, reason: str = "") -> None:
        self.host = host
        self.trace = trace
        self.info = {"step_impl": "standard", "reason": reason}

    def train_epoch(self, epoch: int) -> EpochTotals:
        host, trace = self.host, self.trace
        dev = host.device
        iterator = host.iterator
        H = host.model.zero_state(iterator.n_lanes)
        acc = torch.zeros((), dtype=torch.float64, device=dev)
        n_steps = n_events = 0
        since_check = 0
        for run in iterator:
            H = host._apply_keep(H, run.keep)
            xin = torch.as_tensor(run.in_items, device=dev)
            xout = torch.as_tensor(run.out_items, device=dev)
            samples = host._sample_block(run.n_steps, run.n_lanes)
            for i in range(run.n_steps):
                m = iterator.reset_mask(run, i)
                if m is not None:
                    H = host._reset_lanes(H, m)
                s = samples[i] if samples is not None else None
                if trace is None:
                    loss, H = host._step(xin[i], xout[i], s, H)
                else:
                    h_norm = torch.cat(H, dim=1).norm(dim=1).cpu().numpy()
                    lr = host.optimizer.current_lr()
                    loss, H, info = host._step(xin[i], xout[i], s, H, want_info=True)
                    data = host.data
                    trace(
                        StepTrace(
                            epoch=epoch,
                            step=n_steps + i,
                            session_ids=data.session_ids[run.lane_sessions],
                            positions=run.start_pos + i,
                            h_in_norms=h_norm,
                            n_active=run.n_lanes,
                            negative_ids=(data.item_ids[s.cpu().numpy()] if s is not None else data.item_ids[:0]),
                            learning_rate=lr,
                            score_shape=info["score_shape"],
                            output_rows_touched=info["output_rows_touched"],
                        )
                    )
                acc += loss
            n_steps += run.n_steps
            n_events += run.n_steps * run.n_lanes
            since_check += run.n_steps
            if since_check >= host.nan_check_interval:
                host._check_nan(acc, epoch, n_steps)
                since_check = 0
        host._check_nan(acc, epoch, n_steps)
        return EpochTotals(float(acc), n_steps, n_events)
