"""How n-best lists are generated, declared once: the beam search and its length bounds.

:class:`GenerationSettings` declares each setting once (name, default, help, Hugging Face's name),
as :class:`nbest_eval.metrics.Param` declares the scorer's options, and everything that sets,
records or passes them on reads :data:`DECLARED`:

- the fairseq task's options, ``--nbest-beam`` ... (:mod:`nbest_eval.fairseq.scorer_options`), and
  its :class:`~nbest_eval.fairseq.generation.NBestOptions` (these settings plus text post-processing);
- :class:`~nbest_eval.hf.NBestEvaluator`'s keyword arguments, in transformers' own ``GenerationConfig``
  names (``num_beams``, ``num_return_sequences``, ``length_penalty``);
- both ``checkpoint_nbest``, ``nbest-eval select``'s options (``--beam`` ...), the settings a run
  records and select's cache key (:mod:`nbest_eval.selection.run_settings`).

Imports no framework.
"""

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Optional, Tuple

from ..data import InputError


def _setting(default: Any, help: str, hf: str, hf_unset: bool = False) -> Any:
    """A field of :class:`GenerationSettings`: its ``default`` and ``help``, ``hf`` its keyword in
    NBestEvaluator; ``hf_unset``: the evaluator leaves it None by default (see :class:`Declared`)."""
    return field(default=default, metadata={"help": help, "hf": hf, "hf_unset": hf_unset})


@dataclass(frozen=True)
class GenerationSettings:
    """The settings of one n-best generation. ``nbest_size`` None keeps the whole beam (:attr:`size`)."""

    beam: int = _setting(10, "beam size of the n-best generation", "num_beams")
    nbest_size: Optional[int] = _setting(
        None, "hypotheses kept per prompt (at most the beam size; default: the beam size)", "num_return_sequences")
    max_len_a: float = _setting(0.0, "generate up to max_len_a * source length + max_len_b tokens", "max_len_a",
                                hf_unset=True)
    max_len_b: int = _setting(200, "generate up to max_len_a * source length + max_len_b tokens", "max_len_b",
                              hf_unset=True)
    lenpen: float = _setting(1.0, "length penalty of the beam search (< 1.0 favors shorter outputs)", "length_penalty")

    @property
    def size(self) -> int:
        """The hypotheses kept per prompt."""
        return self.beam if self.nbest_size is None else self.nbest_size

    def check(self, spell: Callable[["Declared"], str] = lambda setting: setting.name) -> None:
        """InputError when the beam is below 1 or the n-best size outside [1, beam]; ``spell`` names a
        setting as the caller's user types it (``--nbest-beam``, ``num_beams``)."""
        beam, size = (spell(DECLARED[name]) for name in ("beam", "nbest_size"))
        if self.beam < 1:
            raise InputError(f"{beam} must be >= 1, got {self.beam}")
        if not 1 <= self.size <= self.beam:
            raise InputError(f"{size} must be between 1 and {beam} ({self.beam}), got {self.size}: "
                             f"beam search returns at most beam-size hypotheses")


@dataclass(frozen=True)
class Declared:
    """One field of :class:`GenerationSettings` as its readers name it. ``name``: the keyword of
    ``checkpoint_nbest``, the key in select's records and cache, select's ``--name-with-dashes``;
    ``type``: int or float (None allowed where the default is None); ``hf_name``: NBestEvaluator's
    keyword; ``hf_unset``: the evaluator defaults it to None, so that transformers' ``max_new_tokens``
    bounds the length unless ``max_len_a`` or ``max_len_b`` is given."""

    name: str
    type: type
    default: Any
    help: str
    hf_name: str
    hf_unset: bool

    @property
    def fairseq_name(self) -> str:
        """The fairseq task's config field (``nbest_beam``; ``--nbest-beam`` on the command line)."""
        return "nbest_" + self.name.removeprefix("nbest_")

    @property
    def option(self) -> str:
        """select's option."""
        return "--" + self.name.replace("_", "-")


def _declared() -> Tuple[Declared, ...]:
    out = []
    for each in fields(GenerationSettings):
        kind = {int: int, float: float, Optional[int]: int}[each.type]
        out.append(Declared(each.name, kind, each.default, each.metadata["help"], each.metadata["hf"],
                            each.metadata["hf_unset"]))
    return tuple(out)


#: every generation setting, by name, in declaration order
DECLARED = {setting.name: setting for setting in _declared()}
