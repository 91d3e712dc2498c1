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


# ---------------------------------------------------------------------------------------------
# the evaluator gives generate()'s own lists whatever the generation settings (issue 34, class 5)

class NumberTokenizer:
    """Texts of token ids ("5 17 3"): what the evaluator needs of a tokenizer, nothing downloaded."""

    pad_token_id = PAD

    def __call__(self, texts, **kwargs):
        return {"input_ids": [[int(t) for t in text.split()] + [EOS] for text in texts]}

    def batch_decode(self, sequences, skip_special_tokens=True):
        return [" ".join(str(t) for t in row if t not in (PAD, EOS, START)) for row in sequences.tolist()]


def number_gold():
    from nbest_eval.data import Gold, GoldPrompt

    generator = torch.Generator().manual_seed(2)
    texts = [" ".join(map(str, torch.randint(3, VOCAB, (n,), generator=generator).tolist()))
             for n in (8, 2, 6, 11, 4, 3, 9, 5)]
    return Gold([GoldPrompt(f"p{i}", text, (("5 6", 1.0),)) for i, text in enumerate(texts)])


def saved_with(tmp_path, model, **settings):
    """``model`` saved and loaded back with ``settings`` in its generation_config.json."""
    import json

    model.save_pretrained(tmp_path)
    path = tmp_path / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **settings}))
    return type(model).from_pretrained(tmp_path).eval()


def generate_own(evaluator, model):
    """The evaluator's batches through generate() with transformers' own search and cache."""
    encoded, lists = evaluator._encode(), {}
    for batch in evaluator.batches():
        width = max(len(encoded[i]) for i in batch)
        ids = torch.tensor([encoded[i] + [PAD] * (width - len(encoded[i])) for i in batch])
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=ids.ne(PAD).long(),
                                 **{**evaluator.generate_kwargs, "custom_generate": None})
        texts, n = evaluator.tokenizer.batch_decode(out.sequences), evaluator.num_return_sequences
        scores = getattr(out, "sequences_scores", None)
        scores = [None] * len(texts) if scores is None else scores.tolist()
        lists.update({i: [(texts[r * n + j], scores[r * n + j]) for j in range(n)] for r, i in enumerate(batch)})
    return [lists[i] for i in range(len(encoded))]


def allowed_tokens(batch_id, ids):
    return list(range(3, VOCAB)) if batch_id % 2 else list(range(VOCAB))


#: (case, NBestEvaluator options, generation_config.json settings, how the evaluator generates:
#: "ours" the pruning search, "theirs" transformers' own search, "refused" transformers refuses)
GENERATION_CASES = [
    ("plain beam search", {}, {}, "ours"),
    ("group beam search", dict(num_beam_groups=2, diversity_penalty=0.5), {}, "refused"),
    ("group beam search in the json", {}, dict(num_beam_groups=2, diversity_penalty=0.5), "refused"),
    ("force_words_ids", dict(force_words_ids=[[5]]), {}, "refused"),
    ("constraints", dict(constraints="phrasal 5 6"), {}, "refused"),
    ("use_cache=False", dict(use_cache=False), {}, "theirs"),
    ("use_cache false in the json", {}, dict(use_cache=False), "theirs"),
    ("a GenerationConfig without the cache", dict(generation_config=dict(use_cache=False)), {}, "theirs"),
    ("a static cache", dict(cache_implementation="static"), {}, "theirs"),
    ("a static cache in the json", {}, dict(cache_implementation="static"), "theirs"),
    ("low_memory", dict(low_memory=True), {}, "refused"),
    ("beam sampling", dict(do_sample=True, top_k=5), {}, "theirs"),
    ("sampling in the json, not asked for", {}, dict(do_sample=True, top_k=5), "ours"),
    ("greedy", dict(num_beams=1), {}, "theirs"),
    ("an assistant model", dict(assistant_model="itself"), {}, "theirs"),
    ("attentions asked for", dict(output_attentions=True), {}, "theirs"),
    ("sequence_bias", dict(sequence_bias={(5,): 3.0}), {}, "ours"),
    ("forced_bos_token_id", dict(forced_bos_token_id=7), {}, "ours"),
    ("forced_eos_token_id in the json", {}, dict(forced_eos_token_id=EOS), "ours"),
    ("prefix_allowed_tokens_fn (falls back inside)", dict(prefix_allowed_tokens_fn=allowed_tokens), {}, "ours"),
]


def generation_kwargs(options, model):
    """A case's generation_kwargs, its placeholders made objects."""
    kwargs = dict(options)
    kwargs.pop("num_beams", None)
    if kwargs.get("constraints"):  # transformers 5 has no constraint classes left, only the setting
        phrasal = getattr(transformers, "PhrasalConstraint", None)
        kwargs["constraints"] = [phrasal([5, 6]) if phrasal else [5, 6]]
    if "generation_config" in kwargs:
        kwargs["generation_config"] = transformers.GenerationConfig(**kwargs["generation_config"])
    if kwargs.get("assistant_model") == "itself":
        kwargs["assistant_model"] = model
    return kwargs


@pytest.mark.parametrize("case, options, json_settings, route", GENERATION_CASES, ids=[c[0] for c in GENERATION_CASES])
def test_the_evaluator_gives_the_lists_of_transformers_own_search(tmp_path, case, options, json_settings, route):
    from nbest_eval.hf import NBestEvaluator

    model = build("marian", eos_bias=4.0)
    if json_settings:
        model = saved_with(tmp_path, model, **json_settings)
    evaluator = NBestEvaluator(number_gold(), NumberTokenizer(), num_beams=options.get("num_beams", 4),
                               max_new_tokens=12, batch_size=3, metrics="map",
                               generation_kwargs=generation_kwargs(options, model))
    theirs = outcome(lambda: generate_own(evaluator, model))
    ours = outcome(lambda: [[(h.text, h.score) for h in hyps] for hyps in evaluator.generate(model)])
    if isinstance(theirs, Exception):  # the evaluator refuses as transformers does, with its words
        assert route != "ours" and isinstance(ours, type(theirs)) and str(theirs) in str(ours), (theirs, ours)
        return
    assert route != "refused" and ours == theirs
    assert (evaluator.search(model).kwargs.get("custom_generate") is beam_search) == (route == "ours")


def outcome(generate):
    """The lists, or what was raised (transformers 4.57 crashes on beam search with an assistant)."""
    torch.manual_seed(0)  # beam sampling draws the same numbers
    try:
        return generate()
    except (ValueError, TypeError) as err:
        return err
