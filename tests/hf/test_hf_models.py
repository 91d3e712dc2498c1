"""NBestEvalCallback / NBestEvaluator with other model kinds (issue 9, item 2): a subword tokenizer
trained locally, a Marian encoder-decoder and a Llama-style decoder-only LM built from configs,
trained briefly on the synthetic corpus. CPU, tiny models, nothing downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
hf = pytest.importorskip("nbest_eval.hf")

import nbest_eval  # noqa: E402
from experiments import hf_models, hf_toy  # noqa: E402
from nbest_eval import InputError  # noqa: E402
from nbest_eval.analysis.synth import GOLD_FILE, generate, write_corpus  # noqa: E402
from nbest_eval.formats import read_gold, read_nbest  # noqa: E402

METRICS = ["map", "bleu_1x1", "bleu_100x100", "wf1"]
MAX_STEPS, EVAL_STEPS = 300, 100
STEPS = list(range(EVAL_STEPS, MAX_STEPS + 1, EVAL_STEPS))
NBEST = dict(num_beams=4, max_new_tokens=20, metrics=METRICS, batch_size=8)
TOL = 1e-9


@pytest.fixture(scope="module")
def models_corpus(tmp_path_factory):
    data = tmp_path_factory.mktemp("hf_models") / "synth"
    synth = generate(1, 3000, 20)
    write_corpus(data, synth)
    return data, synth


def common_arguments(out: Path, **extra):
    return dict(output_dir=str(out), max_steps=MAX_STEPS, eval_strategy="steps", eval_steps=EVAL_STEPS,
                save_strategy="no", logging_steps=EVAL_STEPS, learning_rate=3e-3, warmup_steps=30,
                lr_scheduler_type="constant_with_warmup", per_device_train_batch_size=32, seed=1, data_seed=1,
                report_to="none", disable_tqdm=True, dataloader_num_workers=0, use_cpu=True, **extra)


def eval_entries(trainer):
    return [e for e in trainer.state.log_history if "eval_loss" in e]


def check_logged_and_rescored(trainer, callback, data: Path):
    """eval_<metric> at every evaluation, and each saved n-best file re-scores to the logged values."""
    entries = eval_entries(trainer)
    assert [e["step"] for e in entries] == STEPS
    for entry in entries:
        for key in METRICS + ["nbest_gen_s", "nbest_score_s"]:
            assert f"eval_{key}" in entry, (key, entry)
        assert entry["eval_nbest_prompts"] == 20
    assert [p.name for p in callback.saved] == [f"nbest-step{s}.jsonl" for s in STEPS]
    for path, entry in zip(callback.saved, entries):
        values = nbest_eval.score(data / GOLD_FILE, path, metrics=",".join(METRICS)).values
        for key in METRICS:
            assert (values[key] or 0.0) == pytest.approx(entry[f"eval_{key}"], abs=TOL), (path, key)
    return entries


# ---------------------------------------------------------------------------------------------
# the subword tokenizer


@pytest.fixture(scope="module")
def seq2seq_tokenizer(models_corpus):
    _, synth = models_corpus
    return hf_models.train_subword_tokenizer([s for pair in synth.train for s in pair])


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_subword_tokenizer(models_corpus, kind, tmp_path):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    _, synth = models_corpus
    tokenizer = hf_models.train_subword_tokenizer([s for pair in synth.train for s in pair], kind=kind,
                                                  save_dir=tmp_path)
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    assert [tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id] == \
        [0, 1, 2, 3]
    assert len(tokenizer) <= 160
    texts = [s for pair in synth.valid for s in pair]
    pieces = [tokenizer.tokenize(t) for t in texts]
    assert sum(len(p) for p in pieces) > sum(len(t.split()) for t in texts)  # subwords: words are split
    for text in texts:  # decoding restores the text exactly; encodings end with </s>
        ids = tokenizer(text)["input_ids"]
        assert ids[-1] == tokenizer.eos_token_id and tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids, skip_special_tokens=True) == text
    reloaded = AutoTokenizer.from_pretrained(tmp_path)  # saved locally, reloads without the hub
    assert reloaded(texts[0])["input_ids"] == tokenizer(texts[0])["input_ids"]


# ---------------------------------------------------------------------------------------------
# a Marian encoder-decoder


@pytest.fixture(scope="module")
def marian_run(models_corpus, seq2seq_tokenizer, tmp_path_factory):
    data, synth = models_corpus
    tokenizer = seq2seq_tokenizer
    out = tmp_path_factory.mktemp("marian")
    model = hf_models.build_seq2seq(tokenizer, "marian")
    callback = hf.NBestEvalCallback(data / GOLD_FILE, prompts=data / "valid.src", save_dir=out / "nbest", **NBEST)
    trainer = transformers.Seq2SeqTrainer(
        model=model, args=transformers.Seq2SeqTrainingArguments(**common_arguments(out)),
        train_dataset=hf_toy.PairDataset(synth.train, tokenizer),
        eval_dataset=hf_toy.PairDataset(synth.valid, tokenizer),
        data_collator=transformers.DataCollatorForSeq2Seq(tokenizer, model=model), processing_class=tokenizer,
        callbacks=[callback])
    trainer.train()
    return trainer, callback


def test_marian_metrics_logged_and_rescored(marian_run, models_corpus):
    trainer, callback = marian_run
    assert type(trainer.model).__name__ == "MarianMTModel"
    entries = check_logged_and_rescored(trainer, callback, models_corpus[0])
    assert entries[-1]["eval_loss"] < entries[0]["eval_loss"]
    assert entries[-1]["eval_bleu_100x100"] > 0  # it translates something (a post-norm model learns slowly)
    nbest = callback.last_result.nbest
    assert len(nbest) == 20 and all(len(hyps) == 4 for hyps in nbest.values())
    assert all(h.score is not None and h.score < 0 for hyps in nbest.values() for h in hyps)


def test_the_fairseq_twin_has_fairseqs_architecture_and_initialization(seq2seq_tokenizer):
    d_model, heads = 32, 2
    model = hf_models.build_fairseq_twin(seq2seq_tokenizer, d_model=d_model, layers=2, heads=heads, ffn=64)
    config = model.config
    assert type(model).__name__ == "MarianMTModel"  # post-norm, sinusoidal positions
    assert (config.activation_function, config.scale_embedding, config.dropout) == ("relu", True, 0.2)
    assert (config.attention_dropout, config.activation_dropout) == (0.0, 0.0)
    embeddings = model.get_input_embeddings().weight.detach()
    assert model.get_output_embeddings().weight.data_ptr() == embeddings.data_ptr()  # one shared matrix
    assert model.model.encoder.embed_tokens.weight.data_ptr() == embeddings.data_ptr()
    assert model.model.decoder.embed_tokens.weight.data_ptr() == embeddings.data_ptr()
    assert torch.count_nonzero(embeddings[seq2seq_tokenizer.pad_token_id]) == 0
    rest = torch.cat([embeddings[:seq2seq_tokenizer.pad_token_id], embeddings[seq2seq_tokenizer.pad_token_id + 1:]])
    assert float(rest.std()) == pytest.approx(d_model ** -0.5, rel=0.1)
    linears = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and name != "lm_head"}
    assert len(linears) == 2 * 6 + 2 * 10  # per encoder layer q k v out fc1 fc2; decoder layers add cross-attention
    for name, linear in linears.items():
        weight, bias = linear.weight.detach(), linear.bias.detach()
        fan_out, fan_in = weight.shape
        role = name.rsplit(".", 1)[-1]
        if role == "out_proj" or role.endswith(("q_proj", "k_proj", "v_proj")):  # fairseq's reset_parameters
            gain = 1.0 if role == "out_proj" else 2 ** -0.5
            bound = gain * (6 / (fan_in + fan_out)) ** 0.5  # Xavier-uniform: U(-bound, bound)
        else:  # fc1, fc2: nn.Linear's default, which fairseq keeps
            assert role in ("fc1", "fc2"), name
            bound = fan_in ** -0.5
        assert float(weight.abs().max()) <= bound, name
        assert float(weight.std()) == pytest.approx(bound / 3 ** 0.5, rel=0.15), name
        if role == "out_proj":
            assert torch.count_nonzero(bias) == 0, name
        else:  # nn.Linear's default bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
            assert float(bias.abs().max()) <= fan_in ** -0.5 and float(bias.std()) > fan_in ** -0.5 / 4, name
    again = hf_models.build_fairseq_twin(seq2seq_tokenizer, d_model=d_model, layers=2, heads=heads, ffn=64)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_the_demo_config_carries_the_recipe_to_the_trainer(models_corpus, seq2seq_tokenizer, tmp_path):
    data, _ = models_corpus
    config = hf_toy.DemoConfig(output_dir=str(tmp_path / "run"), data=str(data), model="transformer", d_model=32,
                               layers=1, heads=2, ffn=64, dropout=0.3, label_smoothing=0.1,
                               lr_scheduler="inverse_sqrt", adam_betas=(0.9, 0.98), max_grad_norm=0.5,
                               group_by_length=True,
                               max_new_tokens=None, max_len_a=1.5, max_len_b=5,
                               generation_kwargs={"early_stopping": True})
    trainer = hf_toy.make_trainer(config, tokenizer=seq2seq_tokenizer)
    args = trainer.args
    assert type(trainer.model).__name__ == "MarianMTModel" and trainer.model.config.dropout == 0.3
    assert (args.label_smoothing_factor, args.adam_beta1, args.adam_beta2, args.max_grad_norm) == (0.1, 0.9, 0.98, 0.5)
    assert str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)) == "inverse_sqrt"
    grouped = getattr(args, "train_sampling_strategy", None) == "group_by_length" or getattr(args, "group_by_length",
                                                                                             False)
    assert grouped
    evaluator = trainer.nbest.evaluator
    assert evaluator.max_len == (1.5, 5) and evaluator.generate_kwargs["early_stopping"] is True
    with pytest.raises(nbest_eval.InputError, match="'t5' or 'transformer'"):
        hf_toy.make_trainer(hf_toy.DemoConfig(output_dir=str(tmp_path / "other"), data=str(data), model="bert"),
                            tokenizer=seq2seq_tokenizer)


# ---------------------------------------------------------------------------------------------
# a decoder-only causal LM prompted to translate


@pytest.fixture(scope="module")
def lm_tokenizer(models_corpus):
    _, synth = models_corpus
    return hf_models.train_subword_tokenizer([s for pair in synth.train for s in pair] + [hf_models.TEMPLATE],
                                             template="causal")


@pytest.fixture(scope="module")
def llama_run(models_corpus, lm_tokenizer, tmp_path_factory):
    data, synth = models_corpus
    tokenizer = lm_tokenizer
    out = tmp_path_factory.mktemp("llama")
    model = hf_models.build_causal_lm(tokenizer, "llama")
    callback = hf.NBestEvalCallback(data / GOLD_FILE, prompts=data / "valid.src", save_dir=out / "nbest",
                                    preprocess=hf_models.format_prompt, **NBEST)
    trainer = transformers.Trainer(
        model=model, args=transformers.TrainingArguments(**common_arguments(out)),
        train_dataset=hf_models.PromptDataset(synth.train, tokenizer),
        eval_dataset=hf_models.PromptDataset(synth.valid, tokenizer),
        data_collator=hf_models.CausalCollator(tokenizer), processing_class=tokenizer, callbacks=[callback])
    trainer.train()
    return trainer, callback


def test_prompt_dataset_masks_the_prompt(models_corpus, lm_tokenizer):
    _, synth = models_corpus
    source, target = synth.train[0]
    item = hf_models.encode_example(source, target, lm_tokenizer)
    prompt = lm_tokenizer(hf_models.format_prompt(source))["input_ids"]
    assert prompt[0] == lm_tokenizer.bos_token_id and item["input_ids"][:len(prompt)] == prompt
    assert item["labels"][:len(prompt)] == [-100] * len(prompt)
    answer = item["labels"][len(prompt):]
    assert answer[-1] == lm_tokenizer.eos_token_id
    assert lm_tokenizer.decode(answer, skip_special_tokens=True) == target
    batch = hf_models.CausalCollator(lm_tokenizer)([item, hf_models.encode_example(*synth.train[1], lm_tokenizer)])
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape


def test_llama_metrics_logged_and_rescored(llama_run, models_corpus):
    trainer, callback = llama_run
    assert type(trainer.model).__name__ == "LlamaForCausalLM" and not trainer.model.config.is_encoder_decoder
    entries = check_logged_and_rescored(trainer, callback, models_corpus[0])
    assert entries[-1]["eval_loss"] < entries[0]["eval_loss"]
    assert entries[-1]["eval_bleu_100x100"] > entries[0]["eval_bleu_100x100"]


def test_llama_scores_only_the_continuation(llama_run, models_corpus):
    data, synth = models_corpus
    trainer, callback = llama_run
    gold = read_gold(data / GOLD_FILE)
    source_words = {w for s, _ in synth.train for w in s.split()}
    target_words = {w for _, t in synth.train for w in t.split()}
    english_only = source_words - target_words
    template_words = set(hf_models.TEMPLATE.format(source="").split())
    for path in callback.saved:
        nbest = read_nbest(path, gold)
        assert len(nbest) == 20
        for hyps in nbest.values():
            assert len(hyps) == 4
            for hyp in hyps:
                words = set(hyp.text.split())
                assert not words & template_words, hyp.text
                assert not words & english_only, hyp.text


def test_llama_left_padding_matches_alone(llama_run):
    trainer, callback = llama_run
    evaluator, model = callback.evaluator, trainer.model
    encoded = evaluator._encode()
    batches = evaluator.batches()
    assert any(len({len(encoded[i]) for i in batch}) > 1 for batch in batches)  # sources of different lengths
    batched = evaluator.generate(model)
    for i in range(len(evaluator.prompts)):
        alone = evaluator.generate(model, [i])[0]
        assert [h.text for h in alone] == [h.text for h in batched[i]], i
        assert [h.score for h in alone] == pytest.approx([h.score for h in batched[i]], abs=1e-4), i


@pytest.mark.parametrize("length_penalty", [1.0, 0.5])
def test_llama_scores_are_the_models(llama_run, models_corpus, lm_tokenizer, length_penalty):
    """A hypothesis's score is sum(log p(token)) over the generated tokens (</s> included) divided
    by their number ** length_penalty: transformers' beam search normalizes by the generated length
    (cur_len + 1 - prompt length), not the whole sequence's."""
    data, _ = models_corpus
    trainer, _ = llama_run
    model = trainer.model.eval()
    evaluator = hf.NBestEvaluator(data / GOLD_FILE, lm_tokenizer, data / "valid.src", max_prompts=6,
                                  length_penalty=length_penalty, preprocess=hf_models.format_prompt,
                                  **{k: v for k, v in NBEST.items() if k != "metrics"})
    nbest = evaluator.generate(model)
    eos, pad = lm_tokenizer.eos_token_id, lm_tokenizer.pad_token_id
    checked = 0
    for prompt, hyps in zip(evaluator.prompts, nbest):
        prompt_ids = lm_tokenizer(hf_models.format_prompt(prompt.text))["input_ids"]
        with torch.no_grad():  # the token ids of each hypothesis: the same search, the prompt alone
            output = model.generate(input_ids=torch.tensor([prompt_ids]), **evaluator.generate_kwargs)
        for row, hyp in enumerate(hyps):
            generated = output.sequences[row, len(prompt_ids):].tolist()
            if eos in generated:
                generated = generated[:generated.index(eos) + 1]
            else:
                while generated and generated[-1] == pad:
                    generated.pop()
            assert lm_tokenizer.decode(generated, skip_special_tokens=True).strip() == hyp.text
            expected = hf_models.continuation_logprob(model, prompt_ids, generated) / len(generated) ** length_penalty
            assert hyp.score == pytest.approx(expected, abs=1e-4), (prompt.text, hyp.text)
            checked += 1
    assert checked == 6 * 4


# ---------------------------------------------------------------------------------------------
# lengths beyond a model's positions


def test_marian_lengths_beyond_its_positions_are_refused_before_generating(models_corpus, seq2seq_tokenizer, tmp_path):
    """The test's Marian has 128 positions (config.max_position_embeddings): 128 new tokens generate,
    129 fail in torch with IndexError (shown on the model itself), so the evaluator refuses 129
    with the option to change, before generating, and a Trainer's callback before training."""
    data, synth = models_corpus
    gold, tokenizer = data / GOLD_FILE, seq2seq_tokenizer
    marian = hf_models.build_seq2seq(tokenizer, "marian")
    assert marian.config.max_position_embeddings == 128
    forced = dict(num_beams=2, batch_size=8, generation_kwargs={"min_new_tokens": 128})
    assert len(hf.NBestEvaluator(gold, tokenizer, max_new_tokens=128, **forced).generate(marian, [0])[0]) == 2
    source = torch.tensor([tokenizer(synth.valid[0][0])["input_ids"]])
    with pytest.raises(IndexError):
        marian.generate(input_ids=source, num_beams=2, max_new_tokens=129, min_new_tokens=129)
    over = hf.NBestEvaluator(gold, tokenizer, max_new_tokens=129, **forced)
    message = (r"max_new_tokens 129: more than the model's 128 positions \(config.max_position_embeddings\); "
               r"lower max_new_tokens to at most 128")
    for call in (over.evaluate, over.generate):
        with pytest.raises(InputError, match=message):
            call(marian)
    longest = max(map(len, over._encode()))
    with pytest.raises(InputError, match=rf"max_len_a \* {longest} \+ max_len_b = 2 \* {longest} \+ 120 = "
                                         rf"{2 * longest + 120} new tokens: more than .* lower max_len_b "
                                         rf"\(or max_len_a\) so that max_len_a \* {longest} \+ max_len_b <= 128$"):
        hf.NBestEvaluator(gold, tokenizer, max_new_tokens=None, max_len_a=2, max_len_b=120).check_lengths(marian)
    fitted = hf.NBestEvaluator(gold, tokenizer, max_new_tokens=None, max_len_a=2, max_len_b=128 - 2 * longest, **forced)
    widest = max(range(len(fitted._encode())), key=lambda i: len(fitted._encode()[i]))
    assert len(fitted.generate(marian, [widest])[0]) == 2  # the bound the advice gives: 128 new tokens generate
    long = nbest_eval.Gold([nbest_eval.GoldPrompt("long", " ".join(["casa"] * 140), (("x", 1.0),))])
    with pytest.raises(InputError, match=r"the longest prompt has \d+ tokens, more than the model's 128 positions "
                                         r"\(config.max_position_embeddings\): set max_source_length <= 128"):
        hf.NBestEvaluator(long, tokenizer).check_lengths(marian)
    hf.NBestEvaluator(long, tokenizer, max_source_length=128).check_lengths(marian)
    trainer = transformers.Seq2SeqTrainer(
        model=marian, args=transformers.Seq2SeqTrainingArguments(**common_arguments(tmp_path)),
        train_dataset=hf_toy.PairDataset(synth.train, tokenizer),
        eval_dataset=hf_toy.PairDataset(synth.valid, tokenizer),
        data_collator=transformers.DataCollatorForSeq2Seq(tokenizer, model=marian), processing_class=tokenizer,
        callbacks=[hf.NBestEvalCallback(gold, max_new_tokens=200)])
    with pytest.raises(InputError, match="max_new_tokens 200: more than the model's 128 positions"):
        trainer.train()
    assert trainer.state.global_step == 0


def test_decoder_only_lengths_count_the_prompt_and_rotary_positions_have_no_limit(models_corpus, lm_tokenizer):
    """GPT-2 (a table of 128 positions) feeds the prompt and all but the last new token: a prompt of
    w tokens allows 129 - w new ones. Llama's rotary positions and T5's relative ones have no table."""
    data, _ = models_corpus
    gold = data / GOLD_FILE
    gpt2 = hf_models.build_causal_lm(lm_tokenizer, "gpt2")
    evaluator = hf.NBestEvaluator(gold, lm_tokenizer, preprocess=hf_models.format_prompt, num_beams=2)
    width = max(map(len, evaluator._encode()))
    prompt = torch.tensor([max(evaluator._encode(), key=len)])
    gpt2.generate(input_ids=prompt, num_beams=2, max_new_tokens=129 - width, min_new_tokens=129 - width)
    with pytest.raises(IndexError):
        gpt2.generate(input_ids=prompt, num_beams=2, max_new_tokens=130 - width, min_new_tokens=130 - width)
    hf.NBestEvaluator(gold, lm_tokenizer, preprocess=hf_models.format_prompt,
                      max_new_tokens=129 - width).check_lengths(gpt2)
    with pytest.raises(InputError, match=rf"the longest prompt \({width} tokens\) and max_new_tokens {130 - width} "
                                         rf"need 129 positions, more than the model's 128 \(config.n_positions\): "
                                         rf"lower max_new_tokens to at most {129 - width}, or set max_source_length"):
        hf.NBestEvaluator(gold, lm_tokenizer, preprocess=hf_models.format_prompt,
                          max_new_tokens=130 - width).check_lengths(gpt2)
    llama = hf_models.build_causal_lm(lm_tokenizer, "llama")
    hf.NBestEvaluator(gold, lm_tokenizer, max_new_tokens=500).check_lengths(llama)
    t5 = hf_toy.build_model(lm_tokenizer)
    hf.NBestEvaluator(gold, lm_tokenizer, max_new_tokens=500).check_lengths(t5)
