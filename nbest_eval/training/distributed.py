"""torch.distributed helpers of both adapters (the HF callback and evaluator, the fairseq sidecar under
torchrun): every rank calls them, in the same order. Imports torch: only adapters import this."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist


def world() -> Tuple[int, int]:
    """(rank, world size) of the default process group, (0, 1) when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def reduce_device(fallback: torch.device) -> torch.device:
    """Where a tensor must live for the default group's backend: CPU for gloo, else the model's."""
    backend = str(dist.get_backend()).lower()
    if "gloo" in backend or "mpi" in backend:
        return torch.device("cpu")
    if "nccl" in backend and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return fallback


def all_reduce(values: Sequence[float], op: str, device: torch.device) -> List[float]:
    """Sum (``op="sum"``) or max of a float vector over all ranks, in float64; local when not distributed."""
    if world()[1] == 1:
        return [float(v) for v in values]
    tensor = torch.tensor(list(values), dtype=torch.float64, device=reduce_device(device))
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return tensor.cpu().tolist()


def gather_to_rank0(obj: Any) -> Optional[List[Any]]:
    """Every rank's ``obj`` on rank 0 (in rank order), None on the other ranks."""
    rank, size = world()
    if size == 1:
        return [obj]
    out: List[Any] = [None] * size
    dist.all_gather_object(out, obj)  # works on gloo and nccl alike; the lists are small
    return out if rank == 0 else None


def object_group(timeout_s: float) -> Any:
    """A gloo group of all ranks whose collectives wait up to ``timeout_s`` (None when not distributed):
    for rank 0's news to the others while it waits on something slow (a sidecar), longer than the
    default group's timeout, and on the CPU whatever the default backend. Every rank calls it."""
    if world()[1] == 1:
        return None
    return dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))


def from_rank0(obj: Any, group: Any = None) -> Any:
    """Rank 0's ``obj`` (picklable) on every rank of ``group``; ``obj`` itself when not distributed."""
    if world()[1] == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=group)
    return box[0]
