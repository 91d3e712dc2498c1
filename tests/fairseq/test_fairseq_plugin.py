"""The fairseq plugin end to end: synth corpus -> fairseq-preprocess -> fairseq-train --user-dir plugin.

One tiny transformer run (session fixture) serves the training-loop tests: MAP at every validation,
checkpoint selection, saved n-best lists. Separate short runs cover early stopping across a restart,
two CPU workers (gloo) and a gold that does not fit the valid split. CPU only, one thread per process.
"""

import json
import logging
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fairseq_runs import PLUGIN, REPO, VALID_PROMPTS, command, run, train, two_workers, valid_records

fairseq = pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

import torch  # noqa: E402

torch.set_num_threads(1)  # the numerics of the training processes (OMP_NUM_THREADS=1)

from nbest_eval.analysis.synth import generate  # noqa: E402
from nbest_eval.cli import main as nbest_eval_main  # noqa: E402
from nbest_eval.data import InputError  # noqa: E402
from nbest_eval.fairseq.checkpoints import load_ensemble as load_checkpoint  # noqa: E402
from nbest_eval.fairseq.generation import generate_nbest  # noqa: E402
from nbest_eval.formats import read_gold  # noqa: E402
from nbest_eval.formats.staple import format_gold  # noqa: E402
from nbest_eval.training.early_stopping import DEFAULT_RULE  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`
METRICS = ["map", "rr", "bleu_1x1", "bleu_100x100", "wf1"]  # the args file's --nbest-metrics
MAIN_EPOCHS = 6


def logged(value: float, reference: float) -> bool:
    """fairseq's json log prints 6 significant digits ('{:g}')."""
    return abs(value - reference) <= 5e-6 * max(1.0, abs(reference))


@pytest.fixture(scope="session")
def main_run(fairseq_corpus):
    """The tiny transformer, trained from scratch: n-best validation after every epoch."""
    save = fairseq_corpus.root / "main"
    start = time.perf_counter()
    result = train(fairseq_corpus, save, "--max-epoch", MAIN_EPOCHS, "--keep-best-checkpoints", 2,
                   "--nbest-save-dir", save / "nbest")
    result.seconds = time.perf_counter() - start
    result.save = save
    return result


@pytest.fixture(scope="session")
def dist_run(fairseq_corpus, main_run):
    """Two CPU workers started by hand (gloo), fine-tuning the main run's model for two updates."""
    save = fairseq_corpus.root / "dist"
    texts = two_workers(fairseq_corpus, save, "--nbest-save-dir", save / "nbest",
                        "--finetune-from-model", main_run.save / "checkpoint_last.pt", "--max-update", 2,
                        "--patience", 3,  # the early-stopping rule decides on both workers' prompts
                        "--batch-size-valid", 8,  # 5 valid batches: each worker scores some, one gets an empty step
                        timeout=300)
    return SimpleNamespace(save=save, logs=texts, valid=valid_records(texts[0]))


# -- training from scratch -------------------------------------------------------------------------

def test_metrics_logged_at_every_validation_and_map_rises(main_run):
    valid = main_run.valid
    assert [int(r["epoch"]) for r in valid] == list(range(1, MAIN_EPOCHS + 1))
    for record in valid:
        for key in METRICS + ["nbest_prompts", "nbest_gen_s", "nbest_score_s", "nbest_overhead_s"]:
            assert f"valid_{key}" in record, key
        assert record["valid_nbest_prompts"] == VALID_PROMPTS
    maps = [r["valid_map"] for r in valid]
    assert maps[-1] > maps[0] and maps[-1] > 0.01, maps
    signed = next(line for line in main_run.log.splitlines() if "translation_nbest: signatures: " in line)
    assert "bleu_100x100|tok:13a|case:mixed|smooth:exp|nbest:8|gold:" in signed  # before the first validation
    assert main_run.log.index(signed) < main_run.log.index('"valid_loss"')
    assert max(maps[-3:]) >= max(maps[:3]), maps
    print(f"\nMAP by epoch: {maps}; seconds generating/scoring/beyond generation per validation: "
          f"{[(r['valid_nbest_gen_s'], r['valid_nbest_score_s'], r['valid_nbest_overhead_s']) for r in valid]}; "
          f"run {main_run.seconds:.0f}s")


def test_valid_steps_score_beside_generation_as_a_loop_would(main_run):
    """Each valid step hands its lists to the scoring process while it decodes, and logs exactly
    (==) the statistics that scoring them in a loop gives; an error there is raised by valid_step."""
    from nbest_eval.fairseq.generation import valid_batches
    from nbest_eval.fairseq.task import STAT_PREFIX, TIMINGS
    from nbest_eval.processes.pipeline import RemoteTraceback

    models, cfg, task = load_checkpoint(str(main_run.save / "checkpoint_last.pt"))
    task.load_dataset("valid")
    cfg.dataset.batch_size_valid = 8  # several steps
    criterion, model = task.build_criterion(cfg.criterion), models[0].eval()
    samples = list(valid_batches(task, models, cfg, "valid"))
    assert len(samples) == 5
    for sample in samples:
        _, _, output = task.valid_step(sample, model, criterion)
        expected = task.scorer.zero()
        for prompt, hyps in task.nbest_generator(sample, task.plan).items():
            expected = expected + task.scorer.prompt_stats(task.plan.gold[prompt], hyps)
        assert {name: output[STAT_PREFIX + name] for name in task.scorer.stat_names} == expected
        assert all(output[STAT_PREFIX + key] > 0 for key in TIMINGS)
    task.nbest_generator.decode = lambda tokens: None  # not a text: scoring fails
    with pytest.raises(AttributeError) as raised:
        task.valid_step(samples[0], model, criterion)
    assert isinstance(raised.value.__cause__, RemoteTraceback)


def test_checkpoint_best_holds_the_best_map(main_run):
    maps = [r["valid_map"] for r in main_run.valid]
    best = torch.load(main_run.save / "checkpoint_best.pt", map_location="cpu", weights_only=False)
    assert logged(max(maps), best["extra_state"]["best"])
    # fairseq rewrites checkpoint_best.pt on ties, so it holds the latest of the best validations
    best_update = [r["valid_num_updates"] for r in main_run.valid if logged(r["valid_map"], max(maps))][-1]
    assert best["optimizer_history"][-1]["num_updates"] == best_update
    # --keep-best-checkpoints 2: the two best MAPs (fairseq appends a random digit to the value)
    kept = sorted(p.name for p in main_run.save.glob("checkpoint.best_map_*.pt"))
    assert len(kept) == 2 and all(any(name.startswith(f"checkpoint.best_map_{v:.3f}") for name in kept)
                                  for v in sorted(maps)[-2:]), kept


def test_checkpoint_rescored_in_one_process_equals_logged_value(main_run):
    """nbest_eval.fairseq outside training (what `nbest-eval select` reuses) reproduces the logged MAP."""
    models, cfg, task = load_checkpoint(str(main_run.save / "checkpoint_best.pt"))
    nbest = generate_nbest(task, models, cfg)
    values = task.scorer.score(task.plan.gold, nbest).values
    best = max(main_run.valid, key=lambda r: (r["valid_map"], r["valid_num_updates"]))
    for key in METRICS:
        assert logged(best[f"valid_{key}"], values[key]), (key, best[f"valid_{key}"], values[key])


def test_saved_nbest_lists_rescore_to_the_logged_values(main_run, capsys):
    nbest_dir = main_run.save / "nbest"
    gold = nbest_dir / "valid.gold.txt"
    assert len(read_gold(gold)) == VALID_PROMPTS
    for record in main_run.valid:
        stem = nbest_dir / f"valid.epoch{int(record['epoch'])}.update{int(record['valid_num_updates'])}"
        saved = json.loads(Path(f"{stem}.json").read_text())
        capsys.readouterr()
        assert nbest_eval_main(["score", "--gold", str(gold), "--nbest", str(stem) + ".tsv", "--format", "auto",
                                "--metrics", ",".join(METRICS), "--json"]) == 0
        rescored = json.loads(capsys.readouterr().out)
        assert rescored["n_prompts"] == VALID_PROMPTS
        for key in METRICS:
            assert logged(record[f"valid_{key}"], rescored[key]), (stem.name, key)
            assert abs(saved[key] - rescored[key]) < 1e-9, (stem.name, key)
    # one file pair per validation, nothing overwritten
    assert len(list(nbest_dir.glob("*.tsv"))) == len(main_run.valid)


def test_nbest_lists_have_the_options_shape(main_run):
    """--nbest-beam 8: 8 hypotheses per prompt, ranked, with natural-log scores, best first."""
    last = main_run.valid[-1]
    path = main_run.save / "nbest" / f"valid.epoch{int(last['epoch'])}.update{int(last['valid_num_updates'])}.tsv"
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:]]
    per_prompt = {}
    for pid, rank, score, text in rows:
        per_prompt.setdefault(pid, []).append((int(rank), float(score), text))
    assert len(per_prompt) == VALID_PROMPTS and all(len(h) == 8 for h in per_prompt.values())
    for hyps in per_prompt.values():
        assert [r for r, _, _ in hyps] == list(range(1, 9)) and all(s <= 0 for _, s, _ in hyps)


# -- early stopping across a restart ----------------------------------------------------------------

@pytest.mark.parametrize("rule", ["strict", "significant"])
def test_patience_stops_the_run_and_survives_a_restart(fairseq_corpus, rule):
    """A frozen model (lr 0) never improves: with --patience 3 the count must reach 3 over two runs.

    Run 1 validates twice (kept, then 1 without improvement) and stops at --max-epoch 2. The
    restart must go on from 1: it stops after epoch 4. Counting afresh it would stop after epoch 6.
    Every validation equals the first: every rule keeps the latest of tied validations, so
    checkpoint_best.pt is rewritten on each tie and holds epoch 4 (no warm-up here: nothing would
    leave it).
    """
    best_epoch = 4
    save = fairseq_corpus.root / f"patience-{rule}"
    frozen = ["--train-subset", "test", "--lr-scheduler", "fixed", "--lr", "0", "--patience", "3",
              "--nbest-stopping", rule, "--nbest-stopping-warmup", "0",
              "--no-epoch-checkpoints", "--nbest-save-dir", save / "nbest"]
    first = train(fairseq_corpus, save, *frozen, "--max-epoch", 2, log_name=f"patience1-{rule}.log")
    assert [int(r["epoch"]) for r in first.valid] == [1, 2]
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)["task_state"]
    saved = state["nbest_eval"]["stopping"]
    assert saved["metric"] == "map" and rule in saved["rule"]
    kept = 1  # the latest tie so far
    assert saved["state"]["seen"] == 2 and saved["state"]["runs"] == 1 and saved["state"]["kept"] == kept
    assert logged(first.valid[0]["valid_map"], saved["state"]["kept_value"])
    assert first.valid[1]["valid_nbest_kept_update"] == first.valid[kept]["valid_num_updates"]

    second = train(fairseq_corpus, save, *frozen, "--max-epoch", 20, log_name=f"patience2-{rule}.log")
    assert "restored the early-stopping state from" in second.log and "1 without improvement since" in second.log
    assert [int(r["epoch"]) for r in second.valid] == [3, 4]
    assert "early stop since valid performance hasn't improved for last 3 runs" in second.log
    best = torch.load(save / "checkpoint_best.pt", map_location="cpu", weights_only=False)
    validations = first.valid + second.valid
    assert best["optimizer_history"][-1]["num_updates"] == validations[best_epoch - 1]["valid_num_updates"]
    assert all(logged(r["valid_best_map"], first.valid[0]["valid_map"]) for r in first.valid + second.valid)
    # the same --nbest-save-dir is reused: one file per validation of both runs
    assert len(list((save / "nbest").glob("*.tsv"))) == 4


def test_fairseq_decides_alone_without_an_nbest_rule(fairseq_corpus):
    """--best-checkpoint-metric loss: fairseq's own patience, its count saved and restored as before."""
    save = fairseq_corpus.root / "patience-loss"
    frozen = ["--train-subset", "test", "--lr-scheduler", "fixed", "--lr", "0", "--patience", "2",
              "--best-checkpoint-metric", "loss",  # constant: no improvement either way
              "--no-epoch-checkpoints"]
    first = train(fairseq_corpus, save, *frozen, "--max-epoch", 2, log_name="patience-loss1.log")
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)["task_state"]
    assert state["nbest_eval"]["patience"]["num_runs"] == 1 and "nbest_kept_update" not in first.valid[0]
    second = train(fairseq_corpus, save, *frozen, "--max-epoch", 20, log_name="patience-loss2.log")
    assert [int(r["epoch"]) for r in second.valid] == [3]


# -- two workers ---------------------------------------------------------------------------------------

def test_two_workers_log_what_one_process_scores(dist_run):
    assert dist_run.valid, dist_run.logs[0][-3000:]
    last = dist_run.valid[-1]
    saved = json.loads(next((dist_run.save / "nbest").glob(
        f"valid.epoch{int(last['epoch'])}.update{int(last['valid_num_updates'])}.json")).read_text())
    # every worker reduced the same sums to the same values
    assert len(saved["values_by_worker"]) == 2
    assert saved["values_by_worker"][0] == saved["values_by_worker"][1]
    assert last["valid_nbest_prompts"] == VALID_PROMPTS
    # ... equal to one process scoring the checkpoint saved after that validation
    models, cfg, task = load_checkpoint(str(dist_run.save / "checkpoint_last.pt"))
    assert cfg.distributed_training.distributed_world_size == 2
    nbest = generate_nbest(task, models, cfg)
    values = task.scorer.score(task.plan.gold, nbest).values
    assert values["map"] > 0.01
    for key in METRICS:
        assert abs(saved[key] - values[key]) < 1e-9, (key, saved[key], values[key])
        assert logged(last[f"valid_{key}"], values[key]), key
    # the early-stopping rule saw every prompt, each worker's half summed: its reference is that validation
    state = torch.load(dist_run.save / "checkpoint_last.pt", map_location="cpu",
                       weights_only=False)["task_state"]["nbest_eval"]["stopping"]["state"]
    rows = torch.tensor(state["reference_rows"])  # n_prompts, n_rel, n_empty, n_hyps, map
    assert rows[:, 0].sum() == VALID_PROMPTS and (rows[:, 0] == 1).all()
    assert abs(rows[:, 4].sum() / rows[:, 1].sum() - values["map"]) < 1e-9
    assert f"keeping the checkpoint of update {int(last['valid_num_updates'])}" in dist_run.logs[0]  # rank 0 logs


def test_reduce_metrics_takes_tensors_and_empty_workers(main_run):
    """fairseq's fast stat sync hands reduce_metrics summed tensors; a worker without prompts sends zeros."""
    from fairseq.logging import metrics

    models, cfg, task = load_checkpoint(str(main_run.save / "checkpoint_last.pt"))
    nbest = generate_nbest(task, models, cfg)
    prompts = task.plan.gold.prompts
    halves = [task.scorer.zero(), task.scorer.zero()]
    for i, prompt in enumerate(prompts):
        halves[i % 2] = halves[i % 2] + task.scorer.prompt_stats(prompt, nbest[prompt.id])

    def output(stats, as_tensor):
        out = {"loss": 0.0, "ntokens": 1, "nsentences": 1, "sample_size": 1, "nll_loss": 0.0,
               **{"_nbest_" + k: (torch.tensor(v, dtype=torch.double) if as_tensor else v) for k, v in stats.items()},
               "_nbest_nbest_gen_s": 0.0, "_nbest_nbest_score_s": 0.0}
        return out

    criterion = task.build_criterion(cfg.criterion)
    expected = task.scorer.values(halves[0] + halves[1])
    for outputs in ([output(halves[0], False), output(halves[1], False)],
                    [output(halves[0] + halves[1], True)],
                    [output(halves[0] + halves[1], True), output(task.scorer.zero(), True)]):
        with metrics.aggregate(new_root=True) as agg:
            task.reduce_metrics(outputs, criterion)
            values = agg.get_smoothed_values()
        for key in METRICS:
            assert abs(values[key] - expected[key]) < 1e-9, key
        assert values["nbest_prompts"] == VALID_PROMPTS
    with metrics.aggregate(new_root=True) as agg:  # nothing scored: 0, not a missing key
        task.reduce_metrics([output(task.scorer.zero(), True)], criterion)
        assert agg.get_smoothed_values()["map"] == 0


# -- bad input ------------------------------------------------------------------------------------------

def test_a_gold_that_does_not_fit_stops_training_at_start_up(fairseq_corpus):
    other = generate(seed=2, train_pairs=0, valid_prompts=VALID_PROMPTS).gold
    wrong = fairseq_corpus.root / "other.gold.txt"
    wrong.write_text(format_gold(other, str(wrong)))
    save = fairseq_corpus.root / "badgold"
    result = train(fairseq_corpus, save, "--max-epoch", 1, "--nbest-gold", wrong, log_name="badgold.log", check=False)
    assert result.returncode != 0
    first = fairseq_corpus.synth.valid[0][0]
    assert (f"translation_nbest: --nbest-gold does not fit the 'valid' split: line 1 of the 'valid' split, "
            f"{first!r}, is not a prompt of the gold {wrong}") in result.log
    # the advice in the task's own options, and matching by order only for the same prompts in the same order
    assert ("check that the gold belongs to these sources and that --nbest-remove-bpe / --nbest-detok undo the "
            "source preprocessing; match by position (--nbest-map order) only if the two files hold the same "
            f"prompts in the same order: line 1 of the 'valid' split must be the sentence of prompt 1 of the gold "
            f"{wrong}, {other.prompts[0].text!r} (it is {first!r})") in result.log
    assert "Start iterating over samples" not in result.log and not (save / "checkpoint_last.pt").exists()


def test_best_checkpoint_metric_not_logged_stops_training_at_start_up(fairseq_corpus):
    save = fairseq_corpus.root / "badmetric"
    result = train(fairseq_corpus, save, "--max-epoch", 1, "--best-checkpoint-metric", "ndcg10",
                   log_name="badmetric.log", check=False)
    assert result.returncode != 0
    assert ("translation_nbest: --best-checkpoint-metric ndcg10 is an n-best metric that is not logged: add it "
            "to --nbest-metrics (now map,rr,bleu_1x1,bleu_100x100,wf1)") in result.log
    assert "Start iterating over samples" not in result.log and not (save / "checkpoint_last.pt").exists()


@pytest.mark.parametrize("metric, rule, patience, alpha, message", [
    ("loss", "significant", 3, 0.05, "the loss has no per-prompt statistics"),
    ("map", "significant", -1, 0.05, "needs --patience P >= 1"),
    ("map", "significant", 3, 1.5, "alpha must be in"),
])
def test_a_stopping_rule_that_cannot_work_is_refused(metric, rule, patience, alpha, message):
    from nbest_eval.fairseq.early_stopping import rule_from_config

    cfg = SimpleNamespace(best_checkpoint_metric=metric, nbest_stopping=rule, patience=patience,
                          maximize_best_checkpoint_metric=True, nbest_stopping_alpha=alpha, nbest_stopping_warmup=None)
    with pytest.raises(InputError, match=message):
        rule_from_config(cfg, METRICS)


def test_who_decides():
    """The task's rule for an n-best metric with --patience; fairseq alone otherwise."""
    from nbest_eval.fairseq.early_stopping import rule_from_config

    def cfg(metric, patience, rule=None):
        return SimpleNamespace(best_checkpoint_metric=metric, nbest_stopping=rule, patience=patience,
                               maximize_best_checkpoint_metric=True, nbest_stopping_alpha=0.05,
                               nbest_stopping_warmup=None)
    assert rule_from_config(cfg("map", 3), METRICS).rule == DEFAULT_RULE
    assert rule_from_config(cfg("map", 3, "strict"), METRICS).rule == "strict"
    assert rule_from_config(cfg("map", -1), METRICS) is None  # no early stopping asked for
    assert rule_from_config(cfg("loss", 3), METRICS) is None
    assert rule_from_config(cfg("map", 3), None) is None  # no gold: no n-best validation


def test_loading_a_checkpoint_leaves_early_stopping_state_alone(main_run, caplog):
    """Only resumed training restores patience (begin_epoch); loading a checkpoint to use it
    (generation, `select --fairseq-data`) must not overwrite the running process's state."""
    import logging

    from fairseq_cli import train as fairseq_train

    fn = fairseq_train.should_stop_early
    saved = {name: getattr(fn, name) for name in ("best", "num_runs") if hasattr(fn, name)}
    fn.best, fn.num_runs = 123.0, 7
    try:
        with caplog.at_level(logging.INFO):
            load_checkpoint(str(main_run.save / "checkpoint_last.pt"))
        assert (fn.best, fn.num_runs) == (123.0, 7)
        assert "restored early-stopping state" not in caplog.text
    finally:
        for name in ("best", "num_runs"):
            if name in saved:
                setattr(fn, name, saved[name])
            else:
                delattr(fn, name)


def test_a_different_gold_in_the_save_dir_stops_every_worker(main_run, tmp_path, monkeypatch):
    """Every rank compares the gold already in --nbest-save-dir (none waits for rank 0 alone to fail);
    only rank 0 writes one."""
    from fairseq.distributed import utils as distributed_utils

    from nbest_eval.fairseq.task import NBestConfigError

    monkeypatch.setattr(distributed_utils, "get_global_rank", lambda: 1)
    checkpoint = str(main_run.save / "checkpoint_last.pt")
    _, _, task = load_checkpoint(checkpoint, {"nbest_save_dir": str(tmp_path / "fresh")})
    task.load_dataset("valid")
    assert not (tmp_path / "fresh").exists()  # rank 1 writes nothing
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "valid.gold.txt").write_text("other|gold\nx|1.0\n")
    _, _, task = load_checkpoint(checkpoint, {"nbest_save_dir": str(tmp_path / "taken")})
    with pytest.raises(NBestConfigError, match="holds a different gold"):
        task.load_dataset("valid")
    monkeypatch.setattr(distributed_utils, "get_global_rank", lambda: 0)
    _, _, task = load_checkpoint(checkpoint, {"nbest_save_dir": str(tmp_path / "fresh")})
    task.load_dataset("valid")
    assert (tmp_path / "fresh" / "valid.gold.txt").read_text() == format_gold(
        task.plan.gold, str(tmp_path / "fresh" / "valid.gold.txt"))
    assert [p.name for p in (tmp_path / "fresh").iterdir()] == ["valid.gold.txt"]  # no partial file left


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), InputError("not a folder", "x")])
def test_a_save_that_fails_is_a_warning_and_training_goes_on(main_run, tmp_path, monkeypatch, caplog, failure):
    """Saving n-best lists is a record of training, never a reason to stop it (a full disk, a save dir
    removed while training)."""
    from nbest_eval.fairseq import save_dir as save_dir_module

    _, _, task = load_checkpoint(str(main_run.save / "checkpoint_last.pt"), {"nbest_save_dir": str(tmp_path / "nb")})
    task.load_dataset("valid")

    def full(*args, **kwargs):
        raise failure

    monkeypatch.setattr(save_dir_module, "save_nbest", full)
    task._valid_epoch, task._collected = 3, {}
    with caplog.at_level(logging.WARNING):
        task._save_nbest({"num_updates": 42.0, **dict.fromkeys(task.scorer.keys, 0.5)})
    assert f"n-best lists of epoch 3 (update 42) not saved: {failure}; training goes on" in caplog.text


# -- packaging -------------------------------------------------------------------------------------------

def test_plugin_registers_the_task_once():
    from fairseq import utils
    from fairseq.tasks import TASK_REGISTRY

    import nbest_eval.fairseq.task as implementation
    from nbest_eval.fairseq import USER_DIR

    for user_dir in (PLUGIN, USER_DIR, PLUGIN):
        utils.import_user_module(SimpleNamespace(user_dir=str(user_dir)))
    assert TASK_REGISTRY["translation_nbest"] is implementation.TranslationNBestTask
    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in os.environ  # safe loading stays on


def test_hydra_config_trains(fairseq_corpus):
    save = fairseq_corpus.root / "hydra"
    result = run(command("fairseq-hydra-train") + [
        "--config-dir", str(REPO / "configs"), "--config-name", "translation_nbest_tiny",
        f"task.data={fairseq_corpus.bin}", f"task.nbest_gold={fairseq_corpus.gold}", f"common.user_dir={PLUGIN}",
        f"checkpoint.save_dir={save}", "dataset.train_subset=test", "optimization.max_epoch=1",
        "task.nbest_max_prompts=10"],
        fairseq_corpus.root / "hydra.log", cwd=fairseq_corpus.root)
    assert len(result.valid) == 1 and "valid_map" in result.valid[0] and (save / "checkpoint_best.pt").exists()
    assert result.valid[0]["valid_nbest_prompts"] == 10  # --nbest-max-prompts: a fixed subset
