"""NBestEvalCallback inside a real Hugging Face Seq2SeqTrainer: logging, best-model selection,
early stopping, callback order, two processes under torchrun, bad input. CPU, tiny T5.

Run as a script (``torchrun --nproc_per_node 2 tests/hf/test_hf_callback.py OUT DATA CKPT``) it is
the worker of the two-process test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
hf = pytest.importorskip("nbest_eval.hf")
from transformers import DataCollatorForSeq2Seq, EarlyStoppingCallback, Seq2SeqTrainer, TrainerCallback  # noqa: E402

from experiments import hf_toy as hf_demo  # noqa: E402
from nbest_eval.data import InputError  # noqa: E402

METRICS = ["map", "rr", "wf1", "pref_spearman", "bleu_1x1", "bleu_100x100"]
NBEST_OPTIONS = dict(num_beams=4, max_new_tokens=20, metrics=METRICS)
MAX_STEPS, EVAL_STEPS, PATIENCE = 600, 80, 2
# EarlyStoppingCallback counts an evaluation as "no improvement" unless eval_map beats the best
# by more than the threshold: with 1.0 (> any MAP gap) it stops at evaluation 1 + PATIENCE, but
# only if it sees eval_map at all (without it, it warns and never stops).
STOP_STEP = EVAL_STEPS * (1 + PATIENCE)
TOL = 1e-9
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}  # the workers import experiments


class Recorder(TrainerCallback):
    """Stands in for a reporter (TensorBoard, W&B): what on_log and on_evaluate received."""

    def __init__(self):
        self.logs, self.evaluations = [], []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.evaluations.append(dict(metrics or {}))


class Saboteur(TrainerCallback):
    """Adds noise to the weights a few steps before the last evaluation, so that the best
    checkpoint is not the last one and load_best_model_at_end has something to restore."""

    def on_step_end(self, args, state, control, model=None, **kwargs):
        import torch

        if state.global_step == STOP_STEP - 5:
            generator = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for param in model.parameters():
                    param.add_(torch.randn(param.shape, generator=generator) * 0.5)


def as_logged(value):
    """A metric value as the callback logs it: an undefined one (None) as 0.0."""
    return 0.0 if value is None else value


def nbest_keys(entry):
    """The callback's metric values in a metrics dict (not timings, not the Trainer's own)."""
    return {k: v for k, v in entry.items() if k.startswith("eval_") and k[5:] in METRICS}


# ---------------------------------------------------------------------------------------------
# shared fixtures: one corpus, one trained model


def demo_config(out: Path, data: Path, **overrides) -> hf_demo.DemoConfig:
    settings = dict(output_dir=str(out), data=str(data), max_steps=MAX_STEPS, eval_steps=EVAL_STEPS,
                    patience=PATIENCE, early_stopping_threshold=1.0, num_beams=4, eval_batch_size=8,
                    batch_size=32, max_new_tokens=20, metrics=METRICS)
    settings.update(overrides)
    return hf_demo.DemoConfig(**settings)


@pytest.fixture(scope="session")
def trained(tmp_path_factory, synth_dir):
    """One training run, callbacks in the trap order: EarlyStoppingCallback before NBestEvalCallback."""
    out = tmp_path_factory.mktemp("run1")
    recorder = Recorder()
    trainer = hf_demo.make_trainer(demo_config(out, synth_dir), extra_callbacks=[recorder, Saboteur()])
    names = [type(cb).__name__ for cb in trainer.callback_handler.callbacks]
    assert names.index("EarlyStoppingCallback") < names.index("NBestEvalCallback")
    console = io.StringIO()
    with contextlib.redirect_stdout(console):
        trainer.train()
    # snapshots: later tests evaluate again, which appends to the history and the recorder
    entries = [dict(e) for e in trainer.state.log_history if "eval_loss" in e or "eval_map" in e]
    recorded = Recorder()
    recorded.logs, recorded.evaluations = list(recorder.logs), list(recorder.evaluations)
    return Run(trainer, recorded, console.getvalue(), out, entries)


class Run:
    def __init__(self, trainer, recorder, console, out, entries):
        self.trainer, self.recorder, self.console, self.out, self.entries = trainer, recorder, console, out, entries


def gold_path(synth_dir):
    return synth_dir / "valid.gold.txt"


# ---------------------------------------------------------------------------------------------
# one process


def test_metrics_at_every_evaluation(trained):
    entries, recorder, console = trained.entries, trained.recorder, trained.console
    assert [e["step"] for e in entries] == list(range(EVAL_STEPS, STOP_STEP + 1, EVAL_STEPS))
    for entry in entries:  # one log record per evaluation, with the Trainer's and the callback's values
        for key in ("eval_loss", "eval_map", "eval_bleu_100x100", "eval_wf1", "eval_nbest_gen_s",
                    "eval_nbest_score_s", "eval_nbest_overhead_s"):
            assert key in entry, (key, entry)
        assert entry["eval_nbest_prompts"] == 40
    assert any(e["eval_map"] > 0 for e in entries), "the model should learn something"
    # reporters get them through on_log, and every callback through on_evaluate, whatever the order
    logged = [log for log in recorder.logs if "eval_map" in log]
    assert [log["eval_map"] for log in logged] == [e["eval_map"] for e in entries]
    assert [m["eval_map"] for m in recorder.evaluations] == [e["eval_map"] for e in entries]
    assert console.count("'eval_map'") == len(entries)  # PrinterCallback: the console


def test_best_model_and_early_stopping(trained):
    state, out, entries = trained.trainer.state, trained.out, trained.entries
    assert state.global_step == STOP_STEP < MAX_STEPS  # early stopping fired on eval_map
    best = max(entries, key=lambda e: e["eval_map"])  # max() keeps the first of equal values, as the Trainer
    assert state.best_metric == best["eval_map"]
    assert Path(state.best_model_checkpoint) == out / f"checkpoint-{best['step']}"
    assert best["step"] < STOP_STEP  # (the Saboteur's doing) so the next test checks a real reload
    for entry in entries:  # every checkpoint's trainer_state.json has its evaluation's values
        saved = json.loads((out / f"checkpoint-{entry['step']}" / "trainer_state.json").read_text())
        assert saved["log_history"][-1]["eval_map"] == entry["eval_map"]


def test_reloaded_best_model_rescores_to_logged_value(trained, synth_dir):
    trainer = trained.trainer
    state = trainer.state
    best_step = int(state.best_model_checkpoint.rsplit("-", 1)[1])
    logged = next(e for e in trained.entries if e["step"] == best_step)
    result = hf.score_checkpoint(state.best_model_checkpoint, gold_path(synth_dir), synth_dir / "valid.src",
                                 batch_size=8, **NBEST_OPTIONS)
    assert result.n_prompts == 40
    for key, value in nbest_keys(logged).items():
        assert as_logged(result.values[key[5:]]) == pytest.approx(value, abs=TOL), key
    # what `nbest-eval select --hf` generates for a checkpoint: the same lists
    from nbest_eval import Scorer
    from nbest_eval.formats import read_gold

    gold = read_gold(gold_path(synth_dir))
    nbest = hf.checkpoint_nbest(state.best_model_checkpoint, gold, beam=4, max_len_b=20, batch_size=8)
    assert list(nbest) == gold.ids() and all(len(hyps) == 4 for hyps in nbest.values())
    values = Scorer(METRICS).score(gold, nbest).values
    for key, value in nbest_keys(logged).items():
        assert as_logged(values[key[5:]]) == pytest.approx(value, abs=TOL), key
    # load_best_model_at_end put the best checkpoint's weights back into the trainer's model
    again = trainer.evaluate()
    for key, value in nbest_keys(logged).items():
        assert again[key] == pytest.approx(value, abs=TOL), key


def test_saved_nbest_lists_read_back(trained, synth_dir):
    from nbest_eval.cli import main as cli

    trainer, entries = trained.trainer, trained.entries
    saved = list(trainer.nbest.saved)
    assert [p.name for p in saved[:len(entries)]] == [f"nbest-step{e['step']}.jsonl" for e in entries]
    for path, entry in zip(saved, entries):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert cli(["score", "--gold", str(gold_path(synth_dir)), "--nbest", str(path),
                        "--metrics", ",".join(METRICS), "--json"]) == 0
        values = json.loads(buffer.getvalue())
        for key, value in nbest_keys(entry).items():
            assert as_logged(values[key[5:]]) == pytest.approx(value, abs=TOL), (path, key)
    # evaluating again at the same step never overwrites a file
    before = {p: p.read_bytes() for p in saved}
    trainer.evaluate()
    assert len(trainer.nbest.saved) == len(before) + 1
    assert trainer.nbest.saved[-1].name.startswith(f"nbest-step{trainer.state.global_step}-")
    assert all(p.read_bytes() == text for p, text in before.items())


def test_other_wirings_give_same_values(trained, synth_dir, tmp_path):
    """The callback added after construction, or given to the Trainer subclass: the same values,
    in the evaluation's log record. (Listed first in callbacks=: the two-process test.)"""
    checkpoint = trained.trainer.state.best_model_checkpoint
    expected = hf.score_checkpoint(checkpoint, gold_path(synth_dir), batch_size=8, **NBEST_OPTIONS).values
    model, tokenizer = hf.load_model(checkpoint)
    pairs = hf_demo.load_pairs(synth_dir, "valid")
    common = dict(model=model, eval_dataset=hf_demo.PairDataset(pairs, tokenizer), processing_class=tokenizer,
                  data_collator=DataCollatorForSeq2Seq(tokenizer, model=model))

    def arguments(name):
        return hf_demo.training_arguments(demo_config(tmp_path / name, synth_dir), max_steps=1)

    # 1. Trainer subclass, no callbacks list
    mixin = hf.NBestSeq2SeqTrainer(args=arguments("mixin"), nbest_eval=hf.NBestEvalCallback(
        gold_path(synth_dir), batch_size=8, **NBEST_OPTIONS), **common)
    assert not isinstance(mixin.__dict__.get("evaluation_loop"), hf.callback._LoopHook)  # overridden, not wrapped
    # 2. callback given after construction: found at the first evaluation (evaluate() before train());
    #    this evaluation gets the values in its return value and log history, later ones everywhere
    added = Seq2SeqTrainer(args=arguments("added"), **common)
    late = hf.NBestEvalCallback(gold_path(synth_dir), batch_size=8, **NBEST_OPTIONS)
    added.add_callback(late)
    for trainer_ in (mixin, added, added):
        metrics = trainer_.evaluate()
        assert trainer_.state.log_history[-1]["eval_map"] == metrics["eval_map"]
        for key, value in expected.items():
            if value is not None:
                assert metrics[f"eval_{key}"] == pytest.approx(value, abs=TOL), key
    assert isinstance(added.__dict__.get("evaluation_loop"), hf.callback._LoopHook)
    # predict() is not an evaluation: no n-best metrics
    assert "test_map" not in mixin.predict(common["eval_dataset"]).metrics


def test_subset_saves_its_gold(trained, synth_dir, tmp_path):
    """A prompt subset is scored against its own gold, which is saved beside the n-best lists."""
    from nbest_eval.cli import main as cli

    model, tokenizer = hf.load_model(trained.trainer.state.best_model_checkpoint)
    callback = hf.NBestEvalCallback(gold_path(synth_dir), subset_size=10, subset_seed=3, batch_size=4,
                                    save_dir=tmp_path / "nbest", save_format="tsv", name="sub", **NBEST_OPTIONS)
    trainer = hf.NBestSeq2SeqTrainer(
        model=model, args=hf_demo.training_arguments(demo_config(tmp_path, synth_dir)), processing_class=tokenizer,
        eval_dataset=hf_demo.PairDataset(hf_demo.load_pairs(synth_dir, "valid"), tokenizer),
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model), nbest_eval=callback)
    metrics = trainer.evaluate()
    assert metrics["eval_sub_nbest_prompts"] == 10 and "eval_map" not in metrics
    assert metrics["eval_sub_nbest_overhead_s"] >= 0 and "eval_nbest_overhead_s" not in metrics
    assert sorted(p.name for p in (tmp_path / "nbest").iterdir()) == ["sub-gold.txt", "sub-nbest-step0.tsv"]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert cli(["score", "--gold", str(tmp_path / "nbest" / "sub-gold.txt"), "--nbest",
                    str(tmp_path / "nbest" / "sub-nbest-step0.tsv"), "--metrics", ",".join(METRICS), "--json"]) == 0
    values = json.loads(buffer.getvalue())
    assert values["n_prompts"] == 10
    for key in METRICS:  # an undefined value (None) is logged as 0.0
        assert metrics[f"eval_sub_{key}"] == pytest.approx(as_logged(values[key]), abs=TOL), key


def test_evaluation_scores_beside_generation_as_a_loop_would(trained, synth_dir):
    """evaluate() hands each batch to the scoring process while the next is generated: its
    statistics equal (==) a loop scoring the same lists in the same order; an error there is raised."""
    from nbest_eval.processes.pipeline import RemoteTraceback, ScoringProcess

    model, tokenizer = hf.load_model(trained.trainer.state.best_model_checkpoint)
    evaluator = hf.NBestEvaluator(gold_path(synth_dir), tokenizer, batch_size=8, **NBEST_OPTIONS)
    result = evaluator.evaluate(model, gather_nbest=True)
    assert isinstance(evaluator.start_scoring(), ScoringProcess)
    expected = evaluator.scorer.zero()
    for i in (i for batch in evaluator.batches() for i in batch):  # the order evaluate() generates in
        prompt = evaluator.prompts[i]
        expected = expected + evaluator.scorer.prompt_stats(prompt, result.nbest[prompt.id])
    assert result.stats == expected
    assert result.gen_s > 0 and result.score_s > 0 and result.overhead_s > 0
    broken = hf.NBestEvaluator(gold_path(synth_dir), tokenizer, batch_size=8, postprocess=lambda text: None,
                               **NBEST_OPTIONS)
    with pytest.raises(AttributeError) as raised:
        broken.evaluate(model)
    assert isinstance(raised.value.__cause__, RemoteTraceback)
    first = evaluator.start_scoring()
    evaluator.close()
    assert not first.alive and evaluator.start_scoring().alive  # closed, then started again when needed
    evaluator.close()


def test_undefined_values_are_logged_as_zero():
    """metric_for_best_model may name a metric that is undefined at some evaluation (no prompt
    counted): the Trainer then needs a value, not a missing key (KeyError in _determine_best_metric)."""
    from nbest_eval import Scorer

    scorer = Scorer(["map", "pref_spearman"])
    result = hf.NBestResult({"map": 0.25, "pref_spearman": None}, scorer.zero(), 1.5, 0.5, 0)
    metrics = result.metrics()
    assert metrics["eval_map"] == 0.25 and metrics["eval_pref_spearman"] == 0.0
    assert result.metrics("test", "staple")["test_staple_pref_spearman"] == 0.0
    assert result.values["pref_spearman"] is None  # the raw value stays undefined


def test_generate_uses_the_evaluation_batches(trained, synth_dir):
    """checkpoint_nbest / generate (`select --hf`) batch as evaluate() does, so with a length limit
    that depends on the batch (max_len_a > 0) the lists are the ones scored in training."""
    model, tokenizer = hf.load_model(trained.trainer.state.best_model_checkpoint)
    evaluator = hf.NBestEvaluator(gold_path(synth_dir), tokenizer, batch_size=8, max_len_a=0.6, max_len_b=1,
                                  **{**NBEST_OPTIONS, "max_new_tokens": None})
    scored = evaluator.evaluate(model, gather_nbest=True).nbest
    generated = dict(zip((p.id for p in evaluator.prompts), evaluator.generate(model)))
    assert list(scored) == list(generated)
    assert {k: [(h.text, h.score) for h in v] for k, v in scored.items()} == \
        {k: [(h.text, h.score) for h in v] for k, v in generated.items()}
    some = evaluator.generate(model, [5, 0, 17])  # a subset: in the order asked for
    assert len(some) == 3 and all(len(hyps) == 4 for hyps in some)


def test_lists_equal_generate_with_transformers_own_search_and_cache(trained, synth_dir):
    """The evaluator's beam search drops settled prompts, and its cache skips reordering the
    cross-attention keys and values (every beam of a prompt shares them): its lists are, to the bit,
    those of generate() with transformers' own search and cache."""
    model, tokenizer = hf.load_model(trained.trainer.state.best_model_checkpoint)
    evaluator = hf.NBestEvaluator(gold_path(synth_dir), tokenizer, batch_size=8, **NBEST_OPTIONS)
    batch = evaluator.batches()[0]
    sources = [evaluator._encode()[i] for i in batch]
    ours = evaluator._generate_batch(model, sources, evaluator.search(model))
    width = max(len(ids) for ids in sources)
    input_ids = torch.tensor([ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids in sources])
    with torch.no_grad():
        plain = model.generate(input_ids=input_ids, attention_mask=input_ids.ne(tokenizer.pad_token_id).long(),
                               **evaluator.generate_kwargs)
    n = evaluator.num_return_sequences
    texts = tokenizer.batch_decode(plain.sequences, skip_special_tokens=True)
    scores = plain.sequences_scores.tolist()
    assert [[(h.text, h.score) for h in hyps] for hyps in ours] == \
        [[(texts[r * n + j].strip(), scores[r * n + j]) for j in range(n)] for r in range(len(sources))]


def test_metric_for_best_model_must_be_computed(synth_dir, tmp_path):
    trainer = hf_demo.make_trainer(demo_config(tmp_path, synth_dir, metrics=["map", "rr"]),
                                   metric_for_best_model="wf1")
    with pytest.raises(ValueError, match="metric_for_best_model='wf1'.*add 'wf1' to its metrics"):
        trainer.train()
    assert trainer.state.global_step == 0


@pytest.mark.parametrize("metric, message", [
    ("mapp", r"metric_for_best_model='mapp' is no key that an evaluation will log \(did you mean 'map'\?\); "
             r"they are: eval_jit_compilation_time, eval_loss, eval_map, "),
    ("eval_mapp", r"\(did you mean 'eval_map'\?\)"),
    ("eval_los", r"\(did you mean 'eval_loss'\?\)"),
    ("rrr", r"\(did you mean 'rr'\?\)"),
    ("eval_wf", r"metric_for_best_model='eval_wf' is no key"),
])
def test_a_metric_for_best_model_no_evaluation_logs_fails_before_training(synth_dir, tmp_path, metric, message):
    """transformers finds it only after the first evaluation (a KeyError)."""
    trainer = hf_demo.make_trainer(demo_config(tmp_path, synth_dir, metrics=["map", "rr"]),
                                   metric_for_best_model=metric)
    with pytest.raises(ValueError, match=message):
        trainer.train()
    assert trainer.state.global_step == 0


def test_every_key_of_every_callback_and_dataset_is_known_before_training(synth_dir, tmp_path, caplog):
    from types import SimpleNamespace

    from nbest_eval.hf.checks import check_metric_for_best_model

    config = demo_config(tmp_path, synth_dir, metrics=["map", "rr"], stopping="proportional")
    trainer = hf_demo.make_trainer(config, metric_for_best_model="nbest_kept_stp")
    with pytest.raises(ValueError, match=r"\(did you mean 'nbest_kept_step'\?\)"):
        trainer.train()
    trainer.add_callback(hf.NBestEvalCallback(gold_path(synth_dir), name="staple", metrics=["wf1"]))
    trainer.eval_dataset = {"a": trainer.eval_dataset, "b": trainer.eval_dataset}
    for metric in ("a_map", "eval_b_staple_wf1", "b_loss", "nbest_kept_step", "eval_a_nbest_prompts"):
        check_metric_for_best_model(SimpleNamespace(metric_for_best_model=metric, greater_is_better=True), trainer)
    with pytest.raises(ValueError, match=r"\(did you mean 'b_staple_wf1' or 'a_staple_wf1'\?\)"):
        check_metric_for_best_model(SimpleNamespace(metric_for_best_model="b_staple_wf", greater_is_better=None),
                                    trainer)
    trainer.compute_metrics = lambda prediction: {}  # it may log any key: a near miss is only a warning
    caplog.clear()
    with caplog.at_level("WARNING", logger="nbest_eval"):
        check_metric_for_best_model(SimpleNamespace(metric_for_best_model="a_mapp", greater_is_better=True), trainer)
        check_metric_for_best_model(SimpleNamespace(metric_for_best_model="bleu", greater_is_better=True), trainer)
    assert [r.getMessage() for r in caplog.records] == [
        "metric_for_best_model='a_mapp' is no key that the Trainer or the n-best callbacks log (did you mean "
        "'a_map'?); training fails at the first evaluation unless compute_metrics returns it"]


@pytest.mark.parametrize("metric", ["map", "eval_rr", "nbest_kept_step"])
def test_a_measure_better_higher_with_greater_is_better_false_is_refused(synth_dir, tmp_path, metric):
    trainer = hf_demo.make_trainer(demo_config(tmp_path, synth_dir, metrics=["map", "rr"], stopping="proportional"),
                                   metric_for_best_model=metric, greater_is_better=False)
    with pytest.raises(ValueError, match=rf"metric_for_best_model='{metric}' is better higher .* set "
                                         r"greater_is_better=True or leave it unset"):
        trainer.train()
    assert trainer.state.global_step == 0


def test_samples_show_lists_marked_against_the_gold():
    from nbest_eval import GoldPrompt, Hyp
    from nbest_eval.hf.console import samples_text

    prompts = [GoldPrompt("p1", "hi", (("Olá!", 3.0), ("oi", 2.0), ("e aí", 1.0), ("alô", 0.5))),
               GoldPrompt("p2", "nothing", ())]
    lists = [[Hyp("olá", -0.5), Hyp("ola", -1.25), Hyp("oi.", -2.0)], [Hyp("nada", None)]]
    assert samples_text(80, prompts, lists, 40) == "\n".join([
        "n-best samples at step 80 (2 of 40 prompts; * a valid translation):",
        "  p1: hi",
        "     1 * olá  (-0.5)",
        "     2   ola  (-1.25)",
        "     3 * oi.  (-2)",
        "    gold: Olá! | oi | e aí | ... 1 more",
        "  p2: nothing",
        "     1   nada",
        "    gold: (no valid translation)"])


def test_print_samples_must_be_a_count(synth_dir):
    with pytest.raises(InputError, match="print_samples must be a number of prompts >= 0, got -1"):
        hf.NBestEvalCallback(gold_path(synth_dir), print_samples=-1)


def test_train_begin_logs_the_signatures(synth_dir, tmp_path, caplog):
    trainer = hf_demo.make_trainer(demo_config(tmp_path, synth_dir))
    callback = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, hf.NBestEvalCallback))
    callback.attach(trainer)
    with caplog.at_level("INFO", logger="nbest_eval"):
        callback.on_train_begin(trainer.args, trainer.state, trainer.control)
    callback.evaluator.close()
    signed = [r.getMessage() for r in caplog.records if "signatures" in r.getMessage()]
    assert len(signed) == 1 and "bleu_1x1|tok:13a|case:mixed|smooth:exp|nbest:4|gold:40p." in signed[0], signed


def test_callback_outside_a_trainer_fails_at_train_begin(synth_dir):
    from transformers import TrainerControl, TrainerState

    callback = hf.NBestEvalCallback(gold_path(synth_dir), **NBEST_OPTIONS)
    with pytest.raises(RuntimeError, match="callback.attach"):
        callback.on_train_begin(None, TrainerState(), TrainerControl())


def test_bad_input_fails_clearly(synth_dir, tmp_path):
    gold = gold_path(synth_dir)
    with pytest.raises(InputError, match=r"line 2 of the prompts, 'the purple cow', is not a prompt of the gold"):
        hf.NBestEvalCallback(gold, prompts=[hf_demo.read_lines(synth_dir / "valid.src")[0], "the purple cow"])
    missing = tmp_path / "nope.txt"
    with pytest.raises(InputError, match="nope.txt.*does not exist"):
        hf.NBestEvalCallback(missing)
    garbage = tmp_path / "garbage.txt"
    garbage.write_bytes(b"\xff\xfe not a gold file\n")
    with pytest.raises(InputError, match="garbage.txt:1: not UTF-8"):
        hf.NBestEvalCallback(garbage)
    with pytest.raises(InputError, match="prompts file"):
        hf.NBestEvalCallback(gold, prompts=tmp_path / "no-such.src")
    with pytest.raises(InputError, match="num_return_sequences"):
        hf.NBestEvalCallback(gold, num_beams=2, num_return_sequences=4)
    # a config whose run would fail later: make_trainer with a bad gold fails before training
    (tmp_path / "bad").mkdir()
    for name in hf_demo.CORPUS_FILES:
        (tmp_path / "bad" / name).write_text((synth_dir / name).read_text())
    (tmp_path / "bad" / "valid.src").write_text("the purple cow\n")
    (tmp_path / "bad" / "valid.tgt").write_text("miro\n")
    with pytest.raises(InputError, match="is not a prompt of the gold"):
        hf_demo.make_trainer(demo_config(tmp_path / "out", tmp_path / "bad"))


def test_a_prompt_mismatch_advises_the_evaluators_own_options(synth_dir):
    """Not fairseq's --nbest-map: the evaluator's prompt_map and preprocess."""
    for prompt_map in ("id", "order"):
        with pytest.raises(InputError) as raised:
            hf.NBestEvalCallback(gold_path(synth_dir), prompts=["the purple cow"] * 40, prompt_map=prompt_map)
        message = str(raised.value)
        assert "preprocess= applies after matching" in message and "--nbest" not in message
        assert ("match by position (prompt_map='order')" in message) == (prompt_map == "id")


def test_train_script(synth_dir, tmp_path):
    out = tmp_path / "script"
    run = subprocess.run([sys.executable, "-m", "scripts.train_hf", "--output-dir", str(out),
                          "--data", str(synth_dir), "--max-steps", "20", "--eval-steps", "10", "--patience", "3",
                          "--num-beams", "2", "--batch-size", "16", "--seed", "3"],
                         cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    state = json.loads((out / "trainer_state.json").read_text())
    assert [e["step"] for e in state["log_history"] if "eval_map" in e] == [10, 20]
    assert state["best_model_checkpoint"] is not None
    assert "best eval_map" in run.stdout
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()


def test_train_script_summary_without_evaluation():
    """No evaluation ran (best_metric None): the closing line says so instead of a TypeError."""
    from transformers import TrainerState

    from experiments import train_hf

    state = TrainerState(global_step=2)
    assert state.best_metric is None
    text = train_hf.summary(state, 2, Path("out"))
    assert "stopped at step 2 (max steps); no evaluation ran, so no best model" in text


# ---------------------------------------------------------------------------------------------
# two processes


@pytest.fixture(scope="session")
def two_process_run(trained, synth_dir, tmp_path_factory):
    trainer = trained.trainer
    out = tmp_path_factory.mktemp("ddp")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(Path(__file__).resolve()), str(out), str(synth_dir), trainer.state.best_model_checkpoint]
    run = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-4000:])
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    return out, ranks


def test_two_processes_identical_values(two_process_run):
    out, (rank0, rank1) = two_process_run
    assert rank0["world_size"] == rank1["world_size"] == 2
    assert len(rank0["evaluations"]) == 2  # eval_on_start and the last step
    for e0, e1 in zip(rank0["evaluations"], rank1["evaluations"]):
        assert nbest_keys(e0) and nbest_keys(e0) == nbest_keys(e1)
        assert e0["eval_bleu_100x100"] > 0 and e0["eval_nbest_prompts"] == 40
        assert e0["eval_nbest_gen_s"] == e1["eval_nbest_gen_s"]
    assert rank0["shards"] == rank1["shards"]
    # every rank holds every prompt's statistics (its own and the other's, all-reduced) and decides alike
    assert rank0["rows"] == rank1["rows"] and [row[0] for row in rank0["rows"]] == [1.0] * 40
    assert rank0["stopping"] == rank1["stopping"] and rank0["stopping"]["seen"] == 2
    assert [e["eval_nbest_kept_step"] for e in rank0["evaluations"]] == \
        [e["eval_nbest_kept_step"] for e in rank1["evaluations"]]
    # gather_nbest: every list on rank 0 (also from a rank with an empty shard), nothing elsewhere
    assert [len(v) for v in rank0["gathered"].values()] == [1, 3]
    assert rank1["gathered"] == {"empty": None, "uneven": None}


def test_two_processes_equal_one_process(two_process_run, synth_dir):
    out, (rank0, _) = two_process_run
    # uneven shards: 40 prompts in 5 batches of 8 -> 3 batches on rank 0, 2 on rank 1
    final = rank0["evaluations"][-1]
    checkpoint = out / f"checkpoint-{final['step']}"
    one = hf.score_checkpoint(checkpoint, gold_path(synth_dir), batch_size=8, **NBEST_OPTIONS).values
    for key, value in nbest_keys(final).items():
        assert as_logged(one[key[5:]]) == pytest.approx(value, abs=TOL), key
    # rank 0 saved the gathered lists once per evaluation
    files = sorted(p.name for p in (out / "nbest").iterdir())
    assert files == sorted(f"nbest-step{e['step']}.jsonl" for e in rank0["evaluations"])
    assert sum(1 for _ in open(out / "nbest" / files[-1])) == 40
    # empty shards (1 prompt, 1 batch: rank 1 has none) and single-prompt batches (3 prompts, 2 ranks)
    model, tokenizer = hf.load_model(checkpoint)
    for shard in rank0["shards"].values():
        evaluator = hf.NBestEvaluator(gold_path(synth_dir), tokenizer, shard["prompts"],
                                      batch_size=shard["batch_size"], **NBEST_OPTIONS)
        values = evaluator.evaluate(model).values
        for key, value in shard["values"].items():
            assert values[key] == pytest.approx(value, abs=TOL) if value is not None else values[key] is None


def worker(out: str, data: str, checkpoint: str) -> None:
    """One rank of the two-process test: a short DDP training from ``checkpoint`` with the callback
    listed first, then direct evaluations with an empty and uneven shards; writes rankN.json."""
    import torch.distributed as dist

    out_dir, data_dir = Path(out), Path(data)
    model, tokenizer = hf.load_model(checkpoint)
    callback = hf.NBestEvalCallback(data_dir / "valid.gold.txt", tokenizer, data_dir / "valid.src",
                                    batch_size=8, save_dir=out_dir / "nbest", **NBEST_OPTIONS)
    config = demo_config(out_dir, data_dir, learning_rate=1e-3, warmup_steps=0)
    args = hf_demo.training_arguments(config, max_steps=6, eval_steps=6, save_steps=6, logging_steps=6,
                                      eval_on_start=True)
    trainer = Seq2SeqTrainer(
        model=model, args=args, processing_class=tokenizer,
        train_dataset=hf_demo.PairDataset(hf_demo.load_pairs(data_dir, "train", 2000), tokenizer),
        eval_dataset=hf_demo.PairDataset(hf_demo.load_pairs(data_dir, "valid"), tokenizer),
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        callbacks=[callback, EarlyStoppingCallback(PATIENCE)])
    stopping = hf.NBestEarlyStoppingCallback("map", PATIENCE, name=None)
    trainer.add_callback(stopping)
    trainer.train()
    rank, world = dist.get_rank(), dist.get_world_size()
    prompts = hf_demo.read_lines(data_dir / "valid.src")
    shards, gathered = {}, {}
    for name, subset, batch_size in (("empty", prompts[:1], 8), ("uneven", prompts[1:4], 1)):
        evaluator = hf.NBestEvaluator(data_dir / "valid.gold.txt", tokenizer, subset, batch_size=batch_size,
                                      **NBEST_OPTIONS)
        result = evaluator.evaluate(trainer.model, gather_nbest=True)
        shards[name] = {"prompts": subset, "batch_size": batch_size, "values": result.values}
        gathered[name] = None if result.nbest is None else list(result.nbest)
    evaluations = [e for e in trainer.state.log_history if "eval_map" in e]
    (out_dir / f"rank{rank}.json").write_text(json.dumps(
        {"world_size": world, "evaluations": evaluations, "shards": shards, "gathered": gathered,
         "stopping": stopping.stopping_state.to_dict(), "rows": callback.last_result.per_prompt.matrix.tolist()}))


if __name__ == "__main__":
    worker(*sys.argv[1:4])


def test_a_score_jsonl_cannot_hold_is_saved_as_tsv(synth_dir, tmp_path, caplog):
    """A -inf sequence score (probability 0) must not stop training at the save: tsv holds it."""
    from nbest_eval import Hyp, Scorer

    callback = hf.NBestEvalCallback(gold_path(synth_dir), save_dir=tmp_path, **NBEST_OPTIONS)
    first = callback.evaluator.prompts[0].id
    result = hf.NBestResult({}, Scorer(["map"]).zero(), 0.0, 0.0, 1,
                            nbest={first: [Hyp("x", -1.0), Hyp("y", float("-inf"))]})
    with caplog.at_level("WARNING"):
        callback._save(result, 7)
    assert [p.name for p in callback.saved] == ["nbest-step7.tsv"] and "saved as tsv" in caplog.text
    assert "-inf" in (tmp_path / "nbest-step7.tsv").read_text()
