"""Where a Hugging Face model is (the torch.distributed helpers both adapters use are in
:mod:`nbest_eval.training.distributed`)."""

from __future__ import annotations

from typing import Any

import torch


def model_device(model: Any) -> torch.device:
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")
