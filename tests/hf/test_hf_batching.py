"""The HF evaluator's batches sized for the device (a token budget, or prompts a batch, chosen on the
model's device when not given), its precision (generation under autocast) and its search choice
(issue 30). Tiny models from configs, a tokenizer of numbers; nothing downloaded."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
from nbest_eval.data import Gold, GoldPrompt, InputError  # noqa: E402
from nbest_eval.hf import evaluator as evaluator_module  # noqa: E402
from nbest_eval.hf.beam_search import beam_search  # noqa: E402
from nbest_eval.hf.evaluator import token_batches  # noqa: E402

VOCAB, PAD, EOS, START = 30, 0, 1, 2


class Numbers:
    """Texts of token ids modulo the vocabulary ("35 17 3": 5 17 3), each source ending in EOS: a
    tokenizer without files."""

    pad_token_id = PAD

    def __call__(self, texts, **kwargs):
        return {"input_ids": [[int(t) % VOCAB for t in text.split()] + [EOS] for text in texts]}

    def batch_decode(self, sequences, skip_special_tokens=True):
        return [" ".join(str(t) for t in row if t not in (PAD, EOS, START)) for row in sequences.tolist()]


def numbers_gold(lengths):
    """Prompt i has ``lengths[i]`` tokens once tokenized (EOS included), and a text of its own (its
    first number is the token plus i times the vocabulary)."""
    generator = torch.Generator().manual_seed(3)
    tokens = [torch.randint(3, VOCAB, (n - 1,), generator=generator).tolist() for n in lengths]
    texts = [" ".join(map(str, [ids[0] + VOCAB * i] + ids[1:])) for i, ids in enumerate(tokens)]
    return Gold([GoldPrompt(f"p{i}", text, (("5 6", 1.0),)) for i, text in enumerate(texts)])


def tiny_marian():
    torch.manual_seed(0)
    config = transformers.MarianConfig(
        vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64, init_std=0.3,
        pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=START, forced_eos_token_id=None)
    model = transformers.MarianMTModel(config)
    model.final_logits_bias[0, EOS] = 3.0  # hypotheses of different lengths
    return model.eval()


# -- token budgets ------------------------------------------------------------------------------

def test_a_token_budget_groups_prompts_longest_first():
    """Lengths 5 3 8 3 2 8, beam 2: sorted 2,5 (8 tokens), 0 (5), 1,3 (3), 4 (2). Budget 40: 2 and 5
    cost 2x2x8 = 32, a third 48; then 0,1,3,4 cost 4x2x5 = 40."""
    lengths = [5, 3, 8, 3, 2, 8]
    assert token_batches(lengths, 2, None, 40) == [[2, 5], [0, 1, 3, 4]]
    assert token_batches(lengths, 2, 3, 40) == [[2, 5], [0, 1, 3], [4]]  # batch_size caps prompts
    assert token_batches(lengths, 2, 4, None) == [[2, 5, 0, 1], [3, 4]]  # prompts only: today's batches
    assert token_batches(lengths, 3, None, 40) == [[2], [5], [0, 1], [3, 4]]  # 2x3x8 = 48; 3x3x5 = 45


def test_a_prompt_over_the_budget_is_a_batch_of_its_own():
    assert token_batches([30, 2, 2], 2, None, 10) == [[0], [1, 2]]  # 60 > 10 alone; then 2x2x2 = 8
    assert token_batches([30], 16, None, 1) == [[0]]


@pytest.mark.parametrize("option", ["batch_size", "batch_tokens"])
@pytest.mark.parametrize("value", [0, -3, 2.5, True, "8"])
def test_a_batch_bound_that_is_no_count_is_refused(option, value):
    with pytest.raises(InputError, match=f"{option} must be a number >= 1 or None"):
        hf.NBestEvaluator(numbers_gold([3, 4]), Numbers(), **{option: value})


def test_the_evaluator_batches_by_its_budget():
    lengths = [5, 3, 8, 3, 2, 8]
    evaluator = hf.NBestEvaluator(numbers_gold(lengths), Numbers(), num_beams=2, batch_tokens=40)
    assert evaluator.batches() == [[2, 5], [0, 1, 3, 4]]
    assert evaluator.settings["batch_tokens"] == 40 and evaluator.settings["batch_size"] is None


# -- sized on the device ------------------------------------------------------------------------

#: 70 prompts of 2 to 8 tokens: three batches of 32 prompts on the CPU
LENGTHS = [2 + (3 * i) % 7 for i in range(70)]


def test_on_the_cpu_the_default_is_todays_32_prompts_a_batch():
    evaluator = hf.NBestEvaluator(numbers_gold(LENGTHS), Numbers(), num_beams=16)
    with pytest.raises(RuntimeError, match="sized on the model's device"):
        evaluator.batches()
    batches = evaluator.batches(tiny_marian())
    order = sorted(range(70), key=lambda i: (-LENGTHS[i], i))
    assert batches == [order[:32], order[32:64], order[64:]]
    assert (evaluator.settings["batch_size"], evaluator.settings["batch_tokens"]) == (32, None)


def test_on_cuda_the_default_is_a_token_budget(monkeypatch):
    """The device of the model decides (no GPU here: the model's device is faked)."""
    monkeypatch.setattr(evaluator_module, "model_device", lambda model: torch.device("cuda", 0))
    evaluator = hf.NBestEvaluator(numbers_gold([700, 600, 600, 5]), Numbers(), num_beams=50)
    batches = evaluator.batches(tiny_marian())
    budget = evaluator_module.DEFAULT_CUDA_BATCH_TOKENS
    assert (evaluator.batch_size, evaluator.batch_tokens) == (None, budget) == \
        (evaluator.settings["batch_size"], evaluator.settings["batch_tokens"])
    assert budget == 65536 and batches == [[0], [1, 2], [3]]  # 2x50x700 > 65536 >= 2x50x600; 3x50x600 >
    monkeypatch.setattr(evaluator_module, "model_device", lambda model: torch.device("cpu"))
    assert evaluator.batches(tiny_marian()) == batches  # chosen once: a later device keeps them


def test_bounds_given_are_kept_on_any_device():
    evaluator = hf.NBestEvaluator(numbers_gold(LENGTHS), Numbers(), batch_tokens=100)
    evaluator.size_batches(torch.device("cuda"))
    assert (evaluator.batch_size, evaluator.batch_tokens) == (None, 100)


# -- precision ----------------------------------------------------------------------------------

class Autocasts:
    """Whether each decoder forward ran under CPU autocast, and in what dtype."""

    def __init__(self, model):
        self.seen = set()
        model.get_decoder().register_forward_pre_hook(self.hook)

    def hook(self, module, args):
        self.seen.add(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None)


@pytest.mark.parametrize("precision, outer, expected", [
    (None, None, {None}), ("bf16", None, {torch.bfloat16}), ("fp16", None, {torch.float16}),
    (None, torch.bfloat16, {torch.bfloat16}), ("fp32", torch.bfloat16, {None})])
def test_generation_runs_in_the_precision_asked_for(precision, outer, expected):
    model = tiny_marian()
    seen = Autocasts(model)
    evaluator = hf.NBestEvaluator(numbers_gold([4, 6, 3]), Numbers(), num_beams=2, max_new_tokens=4,
                                  precision=precision, batch_size=2)
    with torch.autocast("cpu", dtype=outer or torch.bfloat16, enabled=outer is not None):
        evaluator.generate(model)
    assert seen.seen == expected and evaluator.settings["precision"] == precision


def test_an_unknown_or_unsupported_precision_is_refused():
    with pytest.raises(InputError, match="precision must be one of fp32, bf16, fp16 or None"):
        hf.NBestEvaluator(numbers_gold([3]), Numbers(), precision="int8")
    evaluator = hf.NBestEvaluator(numbers_gold([3]), Numbers(), precision="bf16")
    with pytest.raises(InputError, match="precision='bf16': torch cannot autocast to it on meta"):
        evaluator.autocast(torch.device("meta"))


# -- the search chosen for the device -----------------------------------------------------------

def test_the_search_is_chosen_for_the_device_and_dtype_and_said_once(monkeypatch, caplog):
    model = tiny_marian()
    evaluator = hf.NBestEvaluator(numbers_gold([4, 6]), Numbers(), num_beams=2, precision="bf16")
    with caplog.at_level(logging.INFO, logger=evaluator_module.__name__):
        assert evaluator.search(model).kwargs["custom_generate"] is beam_search  # CPU: the pruning search
        evaluator.search(model)
        monkeypatch.setattr(evaluator_module, "model_device", lambda model: torch.device("cuda", 0))
        assert "custom_generate" not in evaluator.search(model).kwargs  # CUDA: transformers' own
        evaluator.search(model)
    said = [r.getMessage() for r in caplog.records if "n-best generation on" in r.getMessage()]
    assert len(said) == 2 and "cpu in bfloat16: the pruning" in said[0] and "cuda in bfloat16: transformers'" in said[1]
    assert "custom_generate" in said[0]  # how to override


def test_a_search_given_is_not_chosen_over(monkeypatch):
    monkeypatch.setattr(evaluator_module, "model_device", lambda model: torch.device("cuda", 0))
    evaluator = hf.NBestEvaluator(numbers_gold([4]), Numbers(), generation_kwargs={"custom_generate": beam_search})
    assert evaluator.search(tiny_marian()).kwargs["custom_generate"] is beam_search


# -- in a Trainer that trains in bf16 -----------------------------------------------------------

@pytest.mark.training
def test_a_bf16_trainer_validates_in_bf16_and_select_reproduces_its_lists(tmp_path_factory):
    """TrainingArguments(bf16=True) on the CPU: the callback validates in bf16 and records it with the
    batches chosen on the CPU; checkpoint_nbest (``nbest-eval select --hf``) rebuilt from that record
    gives the loop's lists to the last bit of every score, which fp32 generation does not."""
    from experiments import hf_toy
    from nbest_eval.formats import read_gold
    from nbest_eval.hf import settings as hf_settings

    data = hf_toy.ensure_synth(tmp_path_factory.mktemp("bf16") / "synth", seed=1, train_pairs=200, valid_prompts=12)
    out = tmp_path_factory.mktemp("bf16-run")
    config = hf_toy.DemoConfig(output_dir=str(out), data=str(data), max_steps=2, eval_steps=2, warmup_steps=0,
                               num_beams=3, eval_batch_size=None, batch_size=16, max_new_tokens=6, eval_prompts=8,
                               metrics=("map",), save_nbest=True)
    trainer = hf_toy.make_trainer(config, bf16=True)
    assert trainer.nbest.evaluator.precision == "bf16"  # from the start: an evaluate() before train() too
    trainer.train()
    callback = trainer.nbest
    assert callback.evaluator.precision == "bf16" and callback.last_step == 2
    record = hf_settings.read_settings(out / "checkpoint-2")["evaluator"]
    assert (record["precision"], record["batch_size"], record["batch_tokens"]) == ("bf16", 32, None)
    gold = read_gold(data / "valid.gold.txt")
    loop = callback.last_result.nbest
    again = hf.checkpoint_nbest(out / "checkpoint-2", gold, device="cpu")
    assert again == loop
    in_fp32 = hf.checkpoint_nbest(out / "checkpoint-2", gold, device="cpu", precision="fp32")
    assert [[h.score for h in hyps] for hyps in in_fp32.values()] != [[h.score for h in hyps] for hyps in loop.values()]
