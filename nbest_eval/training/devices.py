"""The training scripts' ``--device`` and ``--precision`` (``scripts/staple_en_pt.py``,
``scripts/train_hf.py``, ``examples/fairseq_demo.py``): declared once, the device resolved as asked
(auto: the GPU when torch sees one), a precision that a framework cannot train in on the CPU refused
before training starts, and fairseq-train's words for both. Imports torch only to resolve the device."""

from __future__ import annotations

import argparse
from typing import List, Optional

from ..data import InputError

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("fp32", "bf16", "fp16")
#: what each framework trains in on the CPU: fairseq's --bf16/--fp16 optimizer asks for a CUDA device,
#: and the Trainer's fp16 autocast stays float32 on the CPU (its bf16 works there)
CPU_PRECISIONS = {"fairseq": ("fp32",), "hf": ("fp32", "bf16")}


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="where training and validation run; auto: cuda when torch sees a GPU, else cpu "
                             "(default: %(default)s)")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="training precision: fp32, or mixed precision in bf16 or fp16; n-best validation "
                             "generates in it too (default: %(default)s)")


def resolve_device(choice: str) -> str:
    """``cpu`` or ``cuda`` for ``--device choice``; cuda where torch sees none is an error."""
    import torch

    if choice not in DEVICES:
        raise InputError(f"--device {choice!r} is none of {', '.join(DEVICES)}")
    available = torch.cuda.is_available()
    if choice == "auto":
        return "cuda" if available else "cpu"
    if choice == "cuda" and not available:
        raise InputError("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False); "
                         "use --device cpu or auto")
    return choice


def check_precision(framework: str, device: str, precision: str) -> None:
    """InputError for a precision that ``framework`` cannot train in on ``device``."""
    if precision not in PRECISIONS:
        raise InputError(f"--precision {precision!r} is none of {', '.join(PRECISIONS)}")
    allowed = CPU_PRECISIONS[framework]
    if device == "cpu" and precision not in allowed:
        name = "fairseq" if framework == "fairseq" else "the Hugging Face Trainer"
        raise InputError(f"--precision {precision} needs --device cuda: {name} trains in "
                         f"{' or '.join(allowed)} on the CPU")


def sidecar_device(device: str, asked: Optional[str] = None) -> str:
    """Where ``--nbest-mode async``'s sidecar generates: ``asked``, else beside training (on the GPU: the same one)."""
    return asked or ("cuda:0" if device == "cuda" else "cpu")


def fairseq_words(device: str, precision: str) -> List[str]:
    """fairseq-train's options for a resolved ``device`` and ``precision`` (fairseq without ``--cpu``
    trains on the GPU)."""
    check_precision("fairseq", device, precision)
    return {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"]}[precision] + (["--cpu"] if device == "cpu" else [])
