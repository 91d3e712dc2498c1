"""The scorer: one prompt's n-best list -> additive :class:`~nbest_eval.stats.Stats` -> metric values.

    scorer = Scorer(["map", "bleu_100x100", "wf1"])
    stats = sum(scorer.prompt_stats(prompt, hyps) for prompt, hyps in shard)   # on each worker
    values = scorer.values(all_reduce(stats))                                     # identical anywhere

Reference statistics (normalized gold sets, BLEU reference n-grams) are built once per gold prompt
and kept, so a scorer reused across validations or checkpoints pays for them once.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .data import Gold, GoldPrompt, Hyp, InputError, NBest, nbest_lists
from .metrics import N_EMPTY, N_HYPS, N_PROMPTS, N_REL, BleuEngine, MetricOptions, make_metric, settings
from .prompt import Judged, PromptGold
from .stats import Stats

DEFAULT_METRICS = ("map", "map_min", "rr", "p1", "p10", "rprec", "ndcg10", "ap_t",
                   "wf1", "f1", "precision", "recall", "wrecall",
                   "pref_spearman", "pref_pearson", "bleu_1x1", "bleu_100x100")
#: what both training adapters (fairseq task, Hugging Face callback) log by default: the paper's
#: measures that predict n-best quality (MAP, many-hypothesis BLEU), its 1-best baseline, STAPLE's wF1
VALIDATION_METRICS = ("map", "bleu_1x1", "bleu_100x100", "wf1")
#: the timing and count keys both adapters log beside the metrics (Hugging Face adds ``eval_``)
GEN_SECONDS, SCORE_SECONDS, PROMPTS = "nbest_gen_s", "nbest_score_s", "nbest_prompts"
#: the validation's wall time beyond generation: what scoring, which runs beside it, still adds
NBEST_OVERHEAD = "nbest_overhead_s"


def parse_metric_list(text: str) -> List[str]:
    """``"map, bleu_1x1"`` -> ``["map", "bleu_1x1"]`` (order kept, duplicates dropped)."""
    keys = [k.strip() for k in text.split(",") if k.strip()]
    return list(dict.fromkeys(keys))


@dataclass
class Scored:
    """The result of scoring a whole gold set: summed stats, metric values, optional per-prompt stats,
    and the longest list scored (the n-best size that signatures name); :func:`nbest_eval.score`
    adds each measure's signature and, when asked, its 95% interval (:mod:`nbest_eval.significance`)."""

    stats: Stats
    values: Dict[str, Optional[float]]
    per_prompt: List[Tuple[str, Stats]] = field(default_factory=list)
    nbest_size: int = 0
    signatures: Dict[str, str] = field(default_factory=dict)
    intervals: Dict[str, Any] = field(default_factory=dict)

    @property
    def n_prompts(self) -> int:
        return int(self.stats[N_PROMPTS])

    @property
    def n_empty(self) -> int:
        return int(self.stats[N_EMPTY])


class Scorer:
    """Scores n-best lists with the metrics named by ``metrics`` (see :mod:`nbest_eval.metrics`).

    ``options``: the settings the metrics declare (:data:`nbest_eval.metrics.PARAMS`): ``bleu_*``
    are sacrebleu's; ``wf1_top`` / ``wf1_threshold`` truncate the list before the F1 family
    (threshold: keep hypotheses with probability >= that fraction of the top one's); ``rbp_p`` is
    the persistence of RBP'. ``Scorer(scorer.keys, **scorer.options)`` builds the same scorer.
    """

    def __init__(self, metrics: Sequence[str] = DEFAULT_METRICS, **options: Any):
        if isinstance(metrics, str):
            metrics = parse_metric_list(metrics)
        if not metrics:
            raise InputError("no metric given")
        self._options = settings(options)
        self.bleu: Optional[BleuEngine] = None  # built on the first BLEU key: one engine, one cache

        def bleu_engine() -> BleuEngine:
            if self.bleu is None:
                self.bleu = BleuEngine.of(self._options)
            return self.bleu

        factory_options = MetricOptions(bleu=bleu_engine, **self._options)
        self.metrics = [make_metric(k, factory_options) for k in dict.fromkeys(metrics)]
        #: every statistic's name, in a fixed order: the layout of :meth:`Stats.to_vector`
        self.stat_names: Tuple[str, ...] = _stat_names(self.metrics)
        self._gold: Dict[GoldPrompt, PromptGold] = {}

    @property
    def options(self) -> Dict[str, Any]:
        """Every setting that changes a number, defaults filled in, as plain JSON values: what the
        scoring helper rebuilds this scorer from and what the select cache is keyed by."""
        return dict(self._options)

    def restricted(self, key: str) -> Scorer:
        """This scorer computing ``key`` alone, from that measure's statistics and the counts: what
        an early-stopping rule keeps of a validation (its settings are this scorer's)."""
        if key not in self.keys:
            raise InputError(f"{key} is not among this scorer's measures ({', '.join(self.keys)})")
        narrow = copy.copy(self)
        narrow.metrics = [m for m in self.metrics if m.key == key]
        narrow.stat_names = _stat_names(narrow.metrics)
        narrow._gold = {}
        return narrow

    @property
    def keys(self) -> List[str]:
        return [m.key for m in self.metrics]

    def zero(self) -> Stats:
        """Statistics of no prompt at all: the identity of ``+``, with every name present."""
        return Stats.fromkeys(self.stat_names, 0.0)

    def prompt_gold(self, prompt: GoldPrompt) -> PromptGold:
        if prompt not in self._gold:
            self._gold[prompt] = PromptGold(prompt)
        return self._gold[prompt]

    def release(self, prompt: GoldPrompt) -> None:
        """Forget what is cached for ``prompt`` (its normalized gold, its BLEU references): for a
        prompt scored once, as when a file is scored as it streams in."""
        self._gold.pop(prompt, None)
        if self.bleu is not None:
            self.bleu.release(prompt)

    def prompt_stats(self, prompt: GoldPrompt, hyps: Sequence[Hyp]) -> Stats:
        """Sufficient statistics of one prompt's n-best list (rank order, best first)."""
        judged = Judged(self.prompt_gold(prompt), hyps)
        stats = self.zero()
        stats[N_PROMPTS] = 1.0
        stats[N_REL] = 1.0 if judged.R > 0 else 0.0
        stats[N_EMPTY] = 0.0 if judged.hyps else 1.0
        stats[N_HYPS] = float(len(judged.hyps))
        for metric in self.metrics:
            stats.update(metric.prompt_stats(judged))
        return stats

    def values(self, stats: Mapping[str, float]) -> Dict[str, Optional[float]]:
        """Metric values from (summed) statistics; None where a metric is undefined."""
        return {m.key: m.value(stats) for m in self.metrics}

    def counted(self, stats: Mapping[str, float]) -> Dict[str, int]:
        """How many prompts each metric with its own eligibility rule (preference correlation) averaged over."""
        return {m.key: int(stats.get(m.count_name, 0)) for m in self.metrics if m.count_name}

    def score(self, gold: Gold, nbest: NBest, *, keep_per_prompt: bool = False,
              progress: bool = False) -> Scored:
        """Score every gold prompt; a prompt without an n-best list counts as an empty list. ``nbest``:
        ``{prompt_id: [hypothesis, ...]}``, each a :class:`Hyp` or a plain string, checked as
        :func:`nbest_eval.score` checks lists (an empty mapping: every list empty)."""
        lists = {} if isinstance(nbest, Mapping) and not nbest else nbest_lists(nbest, gold)
        return self.summed(((p.id, self.prompt_stats(p, lists.get(p.id, []))) for p in _progress(gold, progress)),
                           keep_per_prompt)

    def summed(self, per_prompt: Iterable[Tuple[str, Stats]], keep_per_prompt: bool = False) -> Scored:
        """The :class:`Scored` of (prompt id, statistics) pairs, in the gold's order."""
        total, kept, longest = self.zero(), [], 0
        for prompt_id, stats in per_prompt:
            total = total + stats
            longest = max(longest, int(stats[N_HYPS]))
            if keep_per_prompt:
                kept.append((prompt_id, stats))
        return Scored(total, self.values(total), kept, longest)


def _stat_names(metrics) -> Tuple[str, ...]:
    return tuple(dict.fromkeys([N_PROMPTS, N_REL, N_EMPTY, N_HYPS] + [n for m in metrics for n in m.stat_names]))


def _progress(items: Sequence, enabled: bool) -> Iterable:
    if not enabled:
        return items
    from tqdm import tqdm
    return tqdm(items, desc="scoring", unit="prompt", leave=False)
