"""n-best generation over model precisions x beam searches (issue 30): which search the evaluator
should run on a device, and what a precision does to the lists.

:func:`matrix` times :class:`~nbest_eval.hf.NBestEvaluator` generation of a gold's prompts with the
model's weights in fp32, bf16 and fp16, and fp32 weights under ``torch.autocast`` in bf16, each with
the search the evaluator picks (``auto``: :func:`~nbest_eval.hf.beam_search.choose_search`), the pruning
search and transformers' own, and compares each row's lists with transformers' search in the same
weights (texts and order; the largest score difference) and with fp32 weights. Used by
``scripts/bench.py`` and ``scripts/gpu_check.py``.
"""

from __future__ import annotations

import copy
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

#: the weights' rows: (parameter dtype, the evaluator's ``precision``: autocast's or none), by name
WEIGHTS = {"fp32": ("float32", None), "bf16": ("bfloat16", None), "fp16": ("float16", None),
           "fp32+autocast-bf16": ("float32", "bf16")}
#: the searches' rows: the ``custom_generate`` each one gives the evaluator ("auto": none, its own choice)
SEARCHES = ("transformers", "pruning", "auto")

Lists = List[List[Any]]


def search_kwargs(search: str) -> Dict[str, Any]:
    """The ``generation_kwargs`` entry that makes the evaluator run ``search``."""
    from nbest_eval.hf.beam_search import beam_search

    return {"auto": {}, "pruning": {"custom_generate": beam_search}, "transformers": {"custom_generate": None}}[search]


def compare(lists: Lists, reference: Lists) -> Dict[str, Any]:
    """``same_texts``: every prompt's texts in the same order; ``max_score_diff``: the largest absolute
    difference of two hypotheses' scores in the same place (None where a side has no score);
    ``texts_changed``: the prompts whose texts or order differ."""
    changed = sum([h.text for h in mine] != [h.text for h in theirs] for mine, theirs in zip(lists, reference))
    diffs = [abs(a.score - b.score) for mine, theirs in zip(lists, reference) for a, b in zip(mine, theirs)
             if a.score is not None and b.score is not None]
    return {"same_texts": changed == 0 and len(lists) == len(reference), "texts_changed": changed,
            "max_score_diff": max(diffs, default=None)}


def synchronize(device: Any) -> None:
    """Wait for the device's queued work, so that a timing covers it."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_generation(evaluator: Any, model: Any, device: Any) -> Tuple[Lists, float, float]:
    """(the lists of every prompt, seconds of a first pass, seconds of a second pass). The first pass
    meets each batch shape for the first time (kernels chosen, memory allocated), as a run's first
    validation does; the second is what every later validation costs. On CUDA each timed region starts
    and ends with the device idle."""
    passes = []
    for _ in range(2):
        synchronize(device)
        start = time.perf_counter()
        lists = evaluator.generate(model)
        synchronize(device)
        passes.append(time.perf_counter() - start)
    return lists, passes[0], passes[1]


def ran_search(evaluator: Any, model: Any) -> str:
    """Which search the evaluator runs for ``model``: "pruning" or "transformers"."""
    from nbest_eval.hf.beam_search import beam_search

    return "pruning" if evaluator.search(model).kwargs.get("custom_generate") is beam_search else "transformers"


def matrix(model: Any, tokenizer: Any, gold: Any, device: Any, *, beams: int = 16, batch_size: int = 64,
           weights: Sequence[str] = tuple(WEIGHTS), searches: Sequence[str] = SEARCHES,
           evaluator_options: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """One row per (weights, search): n-best generation of ``gold``'s prompts on ``device``.

    model: a loaded encoder-decoder, or a checkpoint directory (then ``tokenizer`` None loads its own);
        each row runs a copy cast to the row's weights, so ``model`` is left as it was.
    gold: a :class:`~nbest_eval.data.Gold` or a gold file.
    beams, batch_size: the evaluator's ``num_beams`` (n-best size too) and prompts per batch;
        ``evaluator_options``: other NBestEvaluator arguments (``max_new_tokens``, ``max_prompts``
        to bound the time...).
    weights: names of :data:`WEIGHTS`; searches: of :data:`SEARCHES` (transformers' first: the others
        are compared with it).

    Each row: ``weights``, ``search``, ``ran`` (the search that ran: "auto" resolves to one),
    ``first_seconds`` and ``seconds`` (all prompts: a first and a second pass, :func:`timed_generation`),
    ``same_texts`` and ``max_score_diff`` against transformers' search in the same weights (None
    without that row), ``texts_changed_vs_fp32``
    (prompts whose texts differ from the same search in fp32 weights; None without that row); or, where
    the weights or the search fail on the device, ``error`` (the exception's text) and no timing.
    """
    import torch

    from nbest_eval.hf import NBestEvaluator

    if isinstance(model, (str, os.PathLike)):
        from nbest_eval.hf.checkpoints import load_model

        model, own = load_model(model, "cpu")
        tokenizer = tokenizer or own
    unknown = [name for name in weights if name not in WEIGHTS] + [s for s in searches if s not in SEARCHES]
    if unknown:
        raise ValueError(f"matrix: unknown weights or searches {unknown}; known: {list(WEIGHTS)}, {list(SEARCHES)}")
    searches = sorted(searches, key=lambda s: s != "transformers")
    options = dict(evaluator_options or {})
    generation_kwargs = options.pop("generation_kwargs", {})
    rows, fp32_lists = [], {}
    for name in weights:
        dtype, precision = WEIGHTS[name]
        try:
            variant = copy.deepcopy(model).to(device=device, dtype=getattr(torch, dtype)).eval()
        except Exception as err:  # a dtype the device lacks: the row says so
            rows += [{"weights": name, "search": s, "error": f"{type(err).__name__}: {err}"} for s in searches]
            continue
        reference = None
        for search in searches:
            row: Dict[str, Any] = {"weights": name, "search": search}
            try:
                evaluator = NBestEvaluator(gold, tokenizer, num_beams=beams, batch_size=batch_size, metrics="map",
                                           generation_kwargs={**generation_kwargs, **search_kwargs(search)},
                                           precision=precision, **options)
                row["ran"] = ran_search(evaluator, variant)
                lists, row["first_seconds"], row["seconds"] = timed_generation(evaluator, variant, device)
            except Exception as err:  # e.g. a kernel missing in this dtype: a row, not a crash
                row["error"] = f"{type(err).__name__}: {err}"
                rows.append(row)
                continue
            reference = lists if search == "transformers" else reference
            versus = compare(lists, reference) if reference is not None else {}
            row["same_texts"], row["max_score_diff"] = versus.get("same_texts"), versus.get("max_score_diff")
            if name == "fp32":
                fp32_lists[search] = lists
            row["texts_changed_vs_fp32"] = (compare(lists, fp32_lists[search])["texts_changed"]
                                            if search in fp32_lists else None)
            rows.append(row)
        del variant
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()
    return rows


def table(rows: Sequence[Dict[str, Any]]) -> str:
    """The rows as a markdown table."""
    lines = ["| weights | search | ran | seconds (first pass) | same texts as transformers' | max score diff | "
             "prompts changed vs fp32 |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['weights']} | {row['search']} | - | error: {row['error'][:80]} | | | |")
            continue
        diff = "-" if row["max_score_diff"] is None else f"{row['max_score_diff']:.2e}"
        seconds = f"{row['seconds']:.2f} ({row['first_seconds']:.2f})"
        lines.append(f"| {row['weights']} | {row['search']} | {row['ran']} | {seconds} | "
                     f"{_or_dash(row['same_texts'])} | {diff} | {_or_dash(row['texts_changed_vs_fp32'])} |")
    return "\n".join(lines)


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)
