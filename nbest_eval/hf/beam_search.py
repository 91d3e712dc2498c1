"""transformers' beam search, minus the work on prompts whose n-best list is already final.

``generate`` keeps every beam of a batch in the decoder until the batch's last prompt is done; fairseq
drops each finished sentence, and many of the HF decoder's row-steps come after a prompt's list is final
(BENCHMARKS.md measures how many). :func:`beam_search` is transformers'
search step for step (the same candidates, the same updates of the finished lists, the same per-prompt
stopping rule, hence the same lists), with a prompt's rows dropped from the decoder batch, its cache and
its encoder output once its list can no longer change.

It is a decoding loop for ``generate(custom_generate=beam_search)``: ``generate`` still resolves the
generation config, runs the encoder and builds the cache, logits processors and stopping criteria. A
decoding loop given to ``generate`` replaces the search that ``generate`` picks from the settings, and
``generate`` then skips its own checks of them, so :func:`stands_in` says, from the settings
``generate`` resolves (:func:`resolved_config`), where the loop may be given at all: an encoder-decoder's
plain beam search with a cache (not group or constrained beam search, which transformers refuses
without the Hub, not ``use_cache=False``, a ``cache_implementation`` or ``low_memory``). What the loop
then does not cover (processors or criteria that look at other rows or keep per-batch state,
attentions or hidden states asked for) goes to transformers' own beam search.
The output has ``sequences`` and ``sequences_scores`` (with ``output_scores``), not the per-step scores.

Dropping rows pays on a CPU, where a step's time follows the rows it computes. On a GPU it does not:
once warm it is no faster than transformers' search, and each new decoder batch size it makes costs
kernel choices the first time it is met (BENCHMARKS.md, "On a GPU"): :func:`choose_search` says which
search a device gets.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, Tuple

import torch
from transformers.cache_utils import EncoderDecoderCache
from transformers.generation import (
    EosTokenCriteria,
    ExponentialDecayLengthPenalty,
    ForcedBOSTokenLogitsProcessor,
    ForcedEOSTokenLogitsProcessor,
    InfNanRemoveLogitsProcessor,
    LogitNormalization,
    MaxLengthCriteria,
    MinLengthLogitsProcessor,
    MinNewTokensLengthLogitsProcessor,
    NoBadWordsLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    SequenceBiasLogitsProcessor,
    SuppressTokensAtBeginLogitsProcessor,
    SuppressTokensLogitsProcessor,
)
from transformers.generation.configuration_utils import GenerationConfig, GenerationMode
from transformers.generation.utils import ALL_CACHE_NAMES, GENERATION_MODES_MAPPING, GenerateBeamEncoderDecoderOutput

#: processors and criteria that read only a row's own tokens and the step, so rows can be dropped
ROW_WISE = (MinLengthLogitsProcessor, MinNewTokensLengthLogitsProcessor, RepetitionPenaltyLogitsProcessor,
            NoRepeatNGramLogitsProcessor, SequenceBiasLogitsProcessor, NoBadWordsLogitsProcessor,
            ForcedBOSTokenLogitsProcessor, ForcedEOSTokenLogitsProcessor, SuppressTokensLogitsProcessor,
            SuppressTokensAtBeginLogitsProcessor, InfNanRemoveLogitsProcessor, LogitNormalization,
            ExponentialDecayLengthPenalty, MaxLengthCriteria, EosTokenCriteria)
#: what ``generate`` passes an encoder-decoder's beam search when the user adds no model input
PLAIN_INPUTS = {"encoder_outputs", "attention_mask", "use_cache", "cache_position", *ALL_CACHE_NAMES}
#: ``generate``'s arguments of a search mode, which it does not hand a ``custom_generate`` loop
MODE_ARGUMENTS = ("assistant_model", "assistant_tokenizer", "tokenizer", "streamer", "synced_gpus")
NEG = -1.0e9  # transformers' "impossible" score
OVERRIDE = ('generation_kwargs={"custom_generate": None} forces transformers\' search, '
            '{"custom_generate": nbest_eval.hf.beam_search.beam_search} the pruning one')


def choose_search(device: Any, dtype: torch.dtype) -> Tuple[bool, str]:
    """(True for the pruning :func:`beam_search`, False for transformers' own; the reason, one line
    that says how to override it) for generation on ``device`` in ``dtype`` (the autocast dtype under
    autocast, else the parameters'). The pruning search wins where the work follows the rows, on a
    CPU, in any dtype; on a GPU it is no faster once warm and slower the first time each of its shrinking
    batch sizes is met, in every dtype, so transformers' search runs there."""
    device = torch.device(device)
    where = f"{device.type} in {str(dtype).replace('torch.', '')}"
    if device.type == "cpu":
        return True, (f"n-best generation on {where}: the pruning beam search (finished prompts leave the "
                      f"batch; faster than transformers' on a CPU); {OVERRIDE}")
    return False, (f"n-best generation on {where}: transformers' own beam search (the pruning search's "
                   f"shrinking batches save nothing on an accelerator and cost kernel choices); {OVERRIDE}")


def resolved_config(model: Any, kwargs: Dict[str, Any]) -> GenerationConfig:
    """The settings ``model.generate(**kwargs)`` runs with: the model's ``generation_config`` (its
    ``generation_config.json``) updated by ``kwargs``, merged by ``generate``'s own code (a private
    method of transformers 4.x and 5.x), so that a decision taken on them is the one it takes."""
    kwargs = dict(kwargs)
    config, _ = model._prepare_generation_config(kwargs.pop("generation_config", None), **kwargs)
    return config


def own_cache_fits(model: Any, config: GenerationConfig) -> bool:
    """Whether ``generate`` runs transformers' beam search (``_beam_search``: beam search or beam
    sampling) of an encoder-decoder with a cache it would build itself, so that a cache of the
    caller's (the evaluator's ``BeamCache``) can stand in: ``use_cache`` on, no ``cache_implementation``."""
    return (model.config.is_encoder_decoder and config.use_cache and config.cache_implementation is None
            and GENERATION_MODES_MAPPING.get(config.get_generation_mode()) == "_beam_search")


def stands_in(model: Any, config: GenerationConfig, kwargs: Dict[str, Any]) -> bool:
    """Whether :func:`beam_search` may replace the search ``generate(**kwargs)`` would run with
    ``config`` (:func:`resolved_config`): plain beam search, a cache, nothing it would drop or that
    ``_beam_search`` refuses (``low_memory``), no attentions or hidden states asked for."""
    return (own_cache_fits(model, config) and config.get_generation_mode() == GenerationMode.BEAM_SEARCH
            and not config.low_memory and not any(kwargs.get(name) is not None for name in MODE_ARGUMENTS)
            and not (config.output_attentions or config.output_hidden_states or config.output_logits))


def covers(model: Any, logits_processor, stopping_criteria, generation_config, model_kwargs) -> bool:
    """Whether :func:`beam_search` runs this search itself (else transformers' beam search does)."""
    cache = next((model_kwargs[k] for k in ALL_CACHE_NAMES if k in model_kwargs), None)
    return (stands_in(model, generation_config, {}) and isinstance(cache, EncoderDecoderCache)
            and "encoder_outputs" in model_kwargs and set(model_kwargs) <= PLAIN_INPUTS
            and all(isinstance(p, ROW_WISE) for p in [*logits_processor, *stopping_criteria])
            and any(isinstance(c, MaxLengthCriteria) for c in stopping_criteria))


@dataclass
class _Prompts:
    """The search state of the prompts still in the batch, one row (dim 0) a prompt."""
    live: torch.Tensor  # each one's position in the batch given to generate
    running: torch.Tensor  # (prompts, beams, max_length) the hypotheses that go on, and their scores
    running_scores: torch.Tensor
    done: torch.Tensor  # the best finished hypotheses so far, their scores, lengths and flags
    done_scores: torch.Tensor
    done_lengths: torch.Tensor
    is_done: torch.Tensor
    improvable: torch.Tensor  # (prompts, 1) transformers' early-stop heuristic not yet satisfied

    def take(self, index: torch.Tensor) -> _Prompts:
        return _Prompts(*(getattr(self, f.name)[index] for f in fields(self)))


def beam_search(model: Any, input_ids: torch.LongTensor, logits_processor, stopping_criteria, generation_config,
                **model_kwargs: Any):
    """``generate``'s beam search with finished prompts dropped (see the module docstring)."""
    if not covers(model, logits_processor, stopping_criteria, generation_config, model_kwargs):
        mode = generation_config.get_generation_mode()
        if GENERATION_MODES_MAPPING.get(mode) != "_beam_search":
            raise ValueError(f"beam_search stands in for transformers' beam search only, and these settings ask for "
                             f"{mode.value}: call generate without custom_generate")
        return type(model)._beam_search(model, input_ids, logits_processor, stopping_criteria, generation_config,
                                        **model_kwargs)
    config = generation_config
    beams, max_length = config.num_beams, config.max_length
    penalty, early = config.length_penalty, config.early_stopping
    eos, pad = config._eos_token_tensor, config._pad_token_tensor
    keep = max(2, 1 + (eos.shape[0] if eos is not None else 0)) * beams  # candidates kept per prompt and step
    device = input_ids.device
    top_beams = torch.arange(keep, device=device) < beams
    cache_key = next(k for k in ALL_CACHE_NAMES if k in model_kwargs)
    cache, encoder_outputs = model_kwargs[cache_key], model_kwargs["encoder_outputs"]
    mask = model_kwargs.get("attention_mask")

    n_prompts, start = input_ids.shape[0] // beams, input_ids.shape[1]
    fill = pad or eos[0] if eos is not None else -1  # what transformers pads its outputs with
    running = torch.full((n_prompts, beams, max_length), fill, dtype=torch.long, device=device)
    running[:, :, :start] = input_ids.view(n_prompts, beams, start)
    running_scores = torch.zeros((n_prompts, beams), device=device)
    running_scores[:, 1:] = NEG
    p = _Prompts(torch.arange(n_prompts, device=device), running, running_scores, running.clone(),
                 torch.full((n_prompts, beams), NEG, device=device),
                 torch.full((n_prompts, beams), start, dtype=torch.long, device=device),
                 torch.zeros((n_prompts, beams), dtype=torch.bool, device=device),
                 torch.ones((n_prompts, 1), dtype=torch.bool, device=device))
    final = [p.done.clone(), p.done_scores.clone(), p.done_lengths.clone()]  # the settled prompts' lists

    cur_len, decoder_input = start, input_ids
    while True:
        b = p.live.shape[0]
        logits = model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=decoder_input,
                       use_cache=True, return_dict=True, **{cache_key: cache}).logits[:, -1, :].float()
        log_probs = logits_processor(p.running[:, :, :cur_len].reshape(b * beams, cur_len),
                                     torch.nn.functional.log_softmax(logits, dim=-1))
        vocab = log_probs.shape[-1]
        candidates = (log_probs.view(b, beams, vocab) + p.running_scores[:, :, None]).view(b, beams * vocab)
        top_scores, top = torch.topk(candidates, k=keep)
        parents = top // vocab
        top_seqs = _gather(p.running, parents)
        top_seqs[:, :, cur_len] = top % vocab
        ends = stopping_criteria(top_seqs[:, :, :cur_len + 1].reshape(b * keep, -1), None).view(b, keep)

        # the best `beams` candidates that go on
        going_on = top_scores + ends.to(torch.float32) * NEG
        best = torch.topk(going_on, k=beams)[1]
        p.running, p.running_scores, parents = _gather(top_seqs, best), _gather(going_on, best), _gather(parents, best)

        # the finished lists take the candidates that end among the top `beams`, if they are better
        # (transformers also bars settled prompts here; they have left this batch)
        just_done = ends & top_beams[None, :]
        ended = top_scores / ((cur_len + 1 - start) ** penalty)
        ended += (~just_done) * NEG
        merged = torch.topk(torch.cat((p.done_scores, ended), dim=1), k=beams)[1]
        p.done = _gather(torch.cat((p.done, top_seqs), dim=1), merged)
        p.done_scores = _gather(torch.cat((p.done_scores, ended), dim=1), merged)
        lengths = torch.full_like(ended, cur_len + 1, dtype=torch.long)
        p.done_lengths = _gather(torch.cat((p.done_lengths, lengths), dim=1), merged)
        p.is_done = _gather(torch.cat((p.is_done, just_done), dim=1), merged)

        cur_len += 1
        hypothetical = max_length - start if early == "never" and penalty > 0.0 else cur_len - start
        best_running = p.running_scores[:, :1] / (hypothetical ** penalty)
        worst_done = torch.where(p.is_done, torch.min(p.done_scores, dim=1, keepdim=True)[0], NEG)
        p.improvable &= torch.any(best_running > worst_done, dim=-1, keepdim=True)

        # a prompt whose list can no longer change leaves the batch
        settled = ~p.improvable[:, 0] | (p.is_done.all(dim=-1) & (early is True)) | torch.all(ends)
        rows = parents + torch.arange(b, device=device)[:, None] * beams  # the beams' cache rows
        n_settled = int(settled.sum())  # the step's one host synchronisation
        if n_settled:
            order = torch.argsort(settled.to(torch.uint8), stable=True)  # staying prompts, then settled ones
            stay, gone = order[:b - n_settled], order[b - n_settled:]
            for kept, part in zip(final, (p.done, p.done_scores, p.done_lengths)):
                kept[p.live[gone]] = part[gone]
            if n_settled == b:
                break
            stay_rows = (stay[:, None] * beams + torch.arange(beams, device=device)).view(-1)
            p, rows = p.take(stay), rows[stay]
            # the encoder output too, for a model that reads it at every step, not only from the cache
            encoder_outputs["last_hidden_state"] = encoder_outputs.last_hidden_state.index_select(0, stay_rows)
            mask = mask.index_select(0, stay_rows) if mask is not None else None
            cache.cross_attention_cache.reorder_cache(stay_rows)
        cache.self_attention_cache.reorder_cache(rows.view(-1))
        decoder_input = p.running[:, :, cur_len - 1].reshape(-1, 1)

    sequences, scores, lengths = (part[:, :config.num_return_sequences] for part in final)
    sequences = sequences.reshape(-1, max_length)[:, :int(lengths.max())]
    if not config.return_dict_in_generate:
        return sequences
    return GenerateBeamEncoderDecoderOutput(sequences=sequences,
                                            sequences_scores=scores.reshape(-1) if config.output_scores else None)


def _gather(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``tensor[i, index[i, j]]`` for a (prompts, beams, ...) tensor, as transformers' ``_gather_beams``."""
    while index.dim() < tensor.dim():
        index = index.unsqueeze(-1)
    return torch.take_along_dim(tensor, index, dim=1)
