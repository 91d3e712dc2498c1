"""sacrebleu-style signatures: what a number depends on, so that a reader can reproduce it.

    map|nbest:16|gold:500p.3fa2c1d9e0b7|version:X.Y.Z
    bleu_100x100|tok:13a|case:mixed|smooth:exp|nbest:16|gold:500p.3fa2c1d9e0b7|bs:1000|seed:12345|version:X.Y.Z

The measure's key (which names x and y for BLEU) and the options its value depends on (sacrebleu's
tokenizer, case and smoothing; the F1 family's truncation; RBP's persistence), the n-best size
(the longest list scored; for several systems, the range of their sizes, ``nbest:1-8``), the gold
(its prompt count and the start of its content hash), the resampling where a number comes from
resamples, and the nbest-eval version (:mod:`nbest_eval.version`'s, ``X.Y.Z`` above). Two runs with
the same signature on the same n-best lists give the same number. A signature of several measures (a
per-prompt file's rows) joins their keys with ``+`` and lists the options of all of them.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Sequence, Union

from .data import Gold
from .scorer import Scorer
from .significance import PairedBootstrap, PairedTest, get_test
from .version import __version__

DIGEST_CHARS = 12


def signature(scorer: Scorer, gold: Gold, nbest_size: Union[int, str], keys: Optional[Sequence[str]] = None,
              resampling: Optional[str] = None) -> str:
    """The signature of the measures ``keys`` (default: all of the scorer's) as scored with ``scorer``
    against ``gold``; ``nbest_size``: the longest list, or :func:`size_range`'s range of several
    systems; ``resampling``: see :func:`resampling`."""
    metrics = [m for m in scorer.metrics if keys is None or m.key in keys]
    options = {name: value for m in metrics for name, value in m.options.items()}
    fields = [f"{k}:{v}" for k, v in options.items()]
    fields += [f"nbest:{nbest_size}", f"gold:{len(gold)}p.{gold.digest()[:DIGEST_CHARS]}"]
    fields += [resampling] if resampling else []
    return "|".join(["+".join(m.key for m in metrics), *fields, f"version:{__version__}"])


def signatures(scorer: Scorer, gold: Gold, nbest_size: Union[int, str],
               resampling: Optional[str] = None) -> Dict[str, str]:
    """Each measure's own signature."""
    return {key: signature(scorer, gold, nbest_size, [key], resampling) for key in scorer.keys}


def resampling(test: Union[str, PairedTest], n_samples: int, seed: Optional[int],
               intervals: Optional[int] = None) -> str:
    """The resampling part of a signature: the test's key (``bs`` for intervals and the paired
    bootstrap, ``ar``, ``t``) with its resamples where it resamples, the bootstrap resamples of
    intervals shown beside another test's p-values (``intervals``), and the seed of them all (none
    where nothing is resampled)."""
    found = get_test(test)
    parts = [f"{found.key}:{n_samples}" if found.resamples else found.key]
    if intervals and not found.gives_intervals:
        parts.append(f"{PairedBootstrap.key}:{intervals}")
    if len(parts) > 1 or found.resamples:
        parts.append(f"seed:{'none' if seed is None else seed}")
    return "|".join(parts)


def size_range(lists: Iterable[Mapping[str, list]]) -> str:
    """The n-best size of several systems' lists: each system's longest list, one number where they
    agree, else their range (``1-8``), since a table of a 1-best and an 8-best system is no 8-best table."""
    sizes = [max(map(len, nbest.values()), default=0) for nbest in lists]
    low, high = min(sizes, default=0), max(sizes, default=0)
    return str(high) if low == high else f"{low}-{high}"
