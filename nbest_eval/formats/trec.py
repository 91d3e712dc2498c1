"""TREC run and qrels export, so that trec_eval / ir_measures users can cross-check the ranking measures.

A document is a normalized key (:func:`nbest_eval.prompt.norm`), named by a docno without whitespace:
``d`` + the first 16 hex digits of md5(key). The run lists each prompt's deduplicated hypotheses (the
first occurrence of each key) as ``qid Q0 docno rank score nbest-eval`` with score = (number of
deduplicated hypotheses) - rank + 1: trec_eval orders documents by score, not by the rank column, so
strictly decreasing scores keep our rank order. The qrels mark every distinct gold key relevant
(``qid 0 docno 1``); gold weights are not exported. A prompt without hypotheses has no run line, so
trec_eval needs ``-c`` to count it as 0: ``trec_eval -c -m map QRELS RUN`` equals our ``map``.
The two files are written together (:func:`nbest_eval.files.output.write_files`): when either cannot be
written, neither is left. A list's hypotheses that repeat an earlier one's key are not written (a
run ranks a document once), so the run may hold fewer lines than the lists hypotheses: the writer
returns the lines of each file, for what ``convert`` reports.
"""

from __future__ import annotations

import hashlib
from typing import List, Tuple

from ..data import Gold, InputError, NBest
from ..files.output import write_files
from ..prompt import Judged, PromptGold
from .common import PathLike, join_lines


def docno(key: str) -> str:
    return "d" + hashlib.md5(key.encode("utf-8")).hexdigest()[:16]


def write_trec(gold: Gold, nbest: NBest, run_path: PathLike, qrels_path: PathLike,
               overwrite: bool = False) -> Tuple[int, int]:
    """Write the run and the qrels; their line counts (distinct hypotheses ranked, valid keys)."""
    unknown = [prompt_id for prompt_id in nbest if prompt_id not in gold]
    if unknown:
        raise InputError(f"{len(unknown)} n-best prompt id(s) are not in the gold, the first is {unknown[0]!r}",
                         gold.path)
    run: List[str] = []
    qrels: List[str] = []
    for prompt in gold:
        if not prompt.id or any(c.isspace() for c in prompt.id):
            raise InputError(f"prompt id {prompt.id!r} is empty or contains whitespace, which TREC files "
                             f"cannot hold", gold.path)
        prompt_gold = PromptGold(prompt)
        qrels.extend(f"{prompt.id} 0 {docno(key)} 1" for key in prompt_gold.weights)
        unique = Judged(prompt_gold, nbest.get(prompt.id, [])).unique
        run.extend(f"{prompt.id} Q0 {docno(key)} {rank} {len(unique) - rank + 1} nbest-eval"
                   for rank, (key, _) in enumerate(unique, 1))
    write_files({run_path: join_lines(run),
                 qrels_path: join_lines(qrels)}, overwrite)
    return len(run), len(qrels)
