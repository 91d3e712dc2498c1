"""nbest_eval.hf.beam_search: transformers' beam search with finished prompts dropped gives
generate()'s own lists, token for token and score for score, while the decoder batch shrinks.
Tiny encoder-decoders built from configs, an end-of-sentence bias so that prompts finish at
different steps; no training, nothing downloaded."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
beam_search_module = pytest.importorskip("nbest_eval.hf.beam_search")
beam_search = beam_search_module.beam_search

VOCAB, PAD, EOS, START = 40, 0, 1, 2
ROWS, BEAMS = 6, 5


def build(kind: str, eos_bias: float):
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                  init_std=0.3, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=START,
                  forced_eos_token_id=None)
    if kind == "marian":
        model = transformers.MarianMTModel(transformers.MarianConfig(**common, scale_embedding=True))
    else:
        model = transformers.BartForConditionalGeneration(transformers.BartConfig(**common, bos_token_id=START))
    model.final_logits_bias[0, EOS] = eos_bias  # ends hypotheses at different steps: lists settle apart
    return model.eval()


def sources():
    """Prompts of different lengths, right-padded, as the evaluator batches them."""
    generator = torch.Generator().manual_seed(1)
    lengths = [9, 3, 7, 12, 5, 4]
    ids = torch.full((ROWS, max(lengths)), PAD)
    for row, n in enumerate(lengths):
        ids[row, :n - 1] = torch.randint(3, VOCAB, (n - 1,), generator=generator)
        ids[row, n - 1] = EOS
    return ids, ids.ne(PAD).long()


class DecoderRows:
    """The decoder batch size at each step (a forward pre-hook)."""

    def __init__(self, model):
        self.rows = []
        model.get_decoder().register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        self.rows.append(kwargs["input_ids"].shape[0])


def both(model, **settings):
    """generate()'s beam search and ours, on the same inputs and settings."""
    input_ids, mask = sources()
    settings = {"num_beams": BEAMS, "max_new_tokens": 16, "output_scores": True, "return_dict_in_generate": True,
                **settings}
    with torch.no_grad():
        theirs = model.generate(input_ids=input_ids, attention_mask=mask, **settings)
        ours = model.generate(input_ids=input_ids, attention_mask=mask, custom_generate=beam_search, **settings)
    return theirs, ours


def assert_same(theirs, ours):
    assert ours.sequences.tolist() == theirs.sequences.tolist()
    assert torch.allclose(ours.sequences_scores, theirs.sequences_scores, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["marian", "bart"])
@pytest.mark.parametrize("early_stopping", [True, False, "never"])
@pytest.mark.parametrize("length_penalty", [1.0, 0.0, 2.0, -0.5])
def test_the_lists_of_generate(kind, early_stopping, length_penalty):
    model = build(kind, eos_bias=4.0)
    theirs, ours = both(model, early_stopping=early_stopping, length_penalty=length_penalty,
                        num_return_sequences=3)
    assert_same(theirs, ours)


@pytest.mark.parametrize("settings", [dict(no_repeat_ngram_size=2), dict(min_new_tokens=4),
                                      dict(repetition_penalty=1.3), dict(forced_eos_token_id=EOS)],
                         ids=lambda s: next(iter(s)))
def test_row_wise_processors_see_the_remaining_rows(settings):
    model = build("marian", eos_bias=4.0)
    assert_same(*both(model, early_stopping=True, **settings))


def test_the_batch_shrinks_as_prompts_settle():
    model = build("marian", eos_bias=4.0)
    rows = DecoderRows(model)
    input_ids, mask = sources()
    with torch.no_grad():
        model.generate(input_ids=input_ids, attention_mask=mask, num_beams=BEAMS, max_new_tokens=16)
        theirs = rows.rows
        rows.rows = []
        model.generate(input_ids=input_ids, attention_mask=mask, num_beams=BEAMS, max_new_tokens=16,
                       custom_generate=beam_search)
    ours = rows.rows
    assert set(theirs) == {ROWS * BEAMS} and ours[0] == ROWS * BEAMS
    assert ours == sorted(ours, reverse=True) and len(set(ours)) > 2, ours  # prompts left at different steps
    assert len(ours) == len(theirs) and sum(ours) < 0.8 * sum(theirs)


def test_lists_that_run_to_the_length_limit():
    """No end-of-sentence bias: most hypotheses stop at max_new_tokens, and lengths still agree."""
    model = build("marian", eos_bias=0.0)
    assert_same(*both(model, max_new_tokens=6, early_stopping=True))


def test_what_it_does_not_cover_goes_to_transformers(monkeypatch):
    """A processor that keeps per-batch state (here prefix_allowed_tokens_fn, which is told the
    prompt's batch position) would be misled by a shrinking batch: transformers' search runs it."""
    model = build("marian", eos_bias=4.0)
    calls = []
    original = type(model)._beam_search
    monkeypatch.setattr(type(model), "_beam_search", lambda *a, **k: calls.append(1) or original(*a, **k))
    allowed = lambda batch_id, ids: list(range(3, VOCAB)) if batch_id % 2 else list(range(VOCAB))  # noqa: E731
    theirs, ours = both(model, prefix_allowed_tokens_fn=allowed)
    assert calls == [1, 1]
    assert_same(theirs, ours)
