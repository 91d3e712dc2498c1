"""Resampling within memory: sacrebleu's draws, made in bounded chunks, and the memory a
resampling needs, refused up front when it is too much.

sacrebleu draws every resample at once, ``default_rng(seed).choice(n, (samples, n))`` (the paired
bootstrap) or ``default_rng(seed).integers(2, (trials, n), dtype=bool)`` (approximate
randomization): a (samples x prompts) matrix, 16 GB for a million resamples of 500 prompts. Here
the same generator makes the rows a chunk at a time, and each chunk is turned into scores before
the next is drawn, so only the scores (one number per resample and series) stay in memory. The
numbers are the same: bounded integers come one by one from the generator's stream, whatever the
chunks; booleans come 32 to a draw of the stream, so approximate-randomization chunks are a
multiple of 32 rows (tests/significance/test_resampling.py checks both against one big draw).
"""

from __future__ import annotations

import math
from typing import Callable, Iterator, List, Optional

import numpy as np

from ..data import InputError

#: draws made at once: rows x prompts x 24 bytes (the indices, their offsets, the counts)
CHUNK_BYTES = 1 << 26
#: the scores kept across resamples (one float per resample and series, plus a sorted copy or two)
RESULT_BYTES = 1 << 31
_BOOL_BLOCK = 32  # booleans per draw of the generator's stream


def chunk_rows(n_prompts: int, block: int = 1) -> int:
    """Rows per chunk: :data:`CHUNK_BYTES` of draws, a multiple of ``block``, at least one block."""
    rows = max(1, CHUNK_BYTES // (24 * max(n_prompts, 1)))
    return max(block, rows - rows % block)


def check_memory(n_samples: float, series: int, what: str = "--n-samples") -> None:
    """Refuse, before any work, a resampling whose scores would not fit in :data:`RESULT_BYTES`:
    ``n_samples`` resamples of ``series`` scores each (systems x measures). ``what``: where the
    number of resamples comes from, for the message."""
    if n_samples < 1:
        raise InputError(f"the number of resamples must be >= 1, got {n_samples}")
    need = float(n_samples) * (max(series, 1) + 2) * 8
    if not math.isfinite(need) or need > RESULT_BYTES:
        shown = f"{n_samples:,.0f}" if math.isfinite(n_samples) else "infinitely many"
        size = f"{need / (1 << 30):,.1f} GiB" if math.isfinite(need) else "unbounded memory"
        raise InputError(f"{what}: {shown} resamples of {series} score series would need {size} to keep their "
                         f"scores, more than the {RESULT_BYTES >> 30} GiB allowed; use fewer resamples, fewer "
                         f"systems or measures")


def bootstrap_chunks(n_prompts: int, n_samples: int, seed: Optional[int]) -> Iterator[np.ndarray]:
    """The paired bootstrap's draws, sacrebleu's, as (rows x prompts) counts (how often each prompt
    is drawn in each resample), a chunk at a time."""
    rng = np.random.default_rng(seed)
    step = chunk_rows(n_prompts)
    for start in range(0, n_samples, step):
        rows = min(step, n_samples - start)
        indices = rng.choice(n_prompts, size=(rows, n_prompts), replace=True)
        offsets = (indices + n_prompts * np.arange(rows)[:, None]).ravel()
        del indices
        yield np.bincount(offsets, minlength=rows * n_prompts).reshape(rows, n_prompts).astype(float)


def ar_chunks(n_prompts: int, n_trials: int, seed: Optional[int]) -> Iterator[np.ndarray]:
    """Approximate randomization's swaps, sacrebleu's, as (rows x prompts) booleans, a chunk at a time."""
    rng = np.random.default_rng(seed)
    step = chunk_rows(n_prompts, _BOOL_BLOCK)
    for start in range(0, n_trials, step):
        yield rng.integers(2, size=(min(step, n_trials - start), n_prompts), dtype=bool)


def gathered(chunks: Iterator[np.ndarray], series: Callable[[np.ndarray], List[dict]]) -> List[dict]:
    """``series(chunk)`` (a list of ``{name: scores of the chunk's rows}``) for every chunk, joined:
    each name's scores over all resamples, in draw order."""
    parts: Optional[List[dict]] = None
    for chunk in chunks:
        found = series(chunk)
        if parts is None:
            parts = [{name: [] for name in scores} for scores in found]
        for part, scores in zip(parts, found):
            for name, values in scores.items():
                part[name].append(values)
    return [{name: np.concatenate(values) for name, values in part.items()} for part in parts or []]
