"""The fairseq plugin's start-up checks and visible decisions (issue 29): a run that cannot work stops
before the first epoch with the option to change, and the log says what the run decided.

- ``--best-checkpoint-metric``: a typo gets a "did you mean" from the keys of the run's own valid line;
  an n-best metric needs ``--maximize-best-checkpoint-metric``;
- ``--nbest-map order`` with a gold of other prompts stops the run;
- generation lengths beyond the model's positions: a warning naming the options;
- the end of training says what ``checkpoint_best.pt`` holds and why, the latest of tied validations;
- ``--nbest-print-samples N`` logs N n-best lists at each validation;
- (issue 34) while the rule decides, a validation that fairseq would not save is refused at start-up
  (``--save-interval``, ``--validate-interval-updates``): the table ``SAVING``. The other half of that
  class, the direction of an n-best metric, is taken from the registry's ``higher_is_better``
  (``test_a_higher_is_better_metric_must_be_maximized``, ``test_an_error_rate_is_minimized_and_a_count_is_no_quality``,
  ``test_an_nbest_metric_without_maximize_stops_at_start_up``).

Runs stopped at start-up cost seconds; one frozen model (lr 0) validates three times. CPU, one thread.
"""

import logging
import re
from types import SimpleNamespace

import pytest
from fairseq_runs import PLUGIN, TINY_ARGS, command, run

fairseq = pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

import torch  # noqa: E402

torch.set_num_threads(1)

from nbest_eval.analysis.synth import generate, write_corpus  # noqa: E402
from nbest_eval.data import Gold, GoldPrompt, Hyp, prompt_id  # noqa: E402
from nbest_eval.fairseq.checkpoints import load_ensemble  # noqa: E402
from nbest_eval.fairseq.early_stopping import at_end_of_training  # noqa: E402
from nbest_eval.fairseq.samples import Samples  # noqa: E402
from nbest_eval.fairseq.startup import (  # noqa: E402
    NBestConfigError,
    check_best_checkpoint_metric,
    length_warning,
    run_options,
    saving_problem,
    valid_line_keys,
)
from nbest_eval.formats.staple import format_gold  # noqa: E402

NBEST = ["map", "rr", "bleu_1x1", "bleu_100x100", "wf1"]  # the args file's --nbest-metrics
VALID = ["loss", "nll_loss", "ppl", *NBEST, "num_updates"]
STARTED = "Start iterating over samples"  # fairseq's first training step


# -- the checks, one by one -----------------------------------------------------------------------

@pytest.mark.parametrize("typo, guess", [("mapp", "map"), ("bleu_1x", "bleu_1x1"), ("los", "loss"),
                                         ("nll_los", "nll_loss")])
def test_a_best_checkpoint_metric_typo_gets_a_guess(typo, guess):
    with pytest.raises(NBestConfigError) as err:
        check_best_checkpoint_metric(typo, True, VALID, NBEST)
    assert (f"--best-checkpoint-metric {typo} is not a key of the valid line: did you mean {guess}? the valid "
            f"line can have loss, nll_loss, ppl, map") in str(err.value)


def test_best_checkpoint_metrics_that_work():
    for metric in ("loss", "nll_loss", "ppl", "num_updates", "map", "wf1", None):
        check_best_checkpoint_metric(metric, True, VALID, NBEST)
    check_best_checkpoint_metric("loss", False, VALID, NBEST)  # the loss is minimized
    check_best_checkpoint_metric("mapp", True, None, NBEST)  # valid line unknown: only n-best keys are checked
    check_best_checkpoint_metric("loss", False, ["loss"], None)  # no gold
    with pytest.raises(NBestConfigError, match="bleu_1x1 is an n-best metric that is not logged.*now map,wf1"):
        check_best_checkpoint_metric("bleu_1x1", True, VALID, ["map", "wf1"])
    with pytest.raises(NBestConfigError, match="map is an n-best metric, but no --nbest-gold is given"):
        check_best_checkpoint_metric("map", True, ["loss"], None)
    with pytest.raises(NBestConfigError, match="xyz is not a key of the valid line: the valid line can have"):
        check_best_checkpoint_metric("xyz", True, VALID, NBEST)  # nothing close: no guess


@pytest.mark.parametrize("metric", NBEST + ["ndcg10", "pref_spearman"])
def test_a_higher_is_better_metric_must_be_maximized(metric):
    """Without the flag fairseq would keep the lowest MAP."""
    with pytest.raises(NBestConfigError, match=f"--best-checkpoint-metric {metric} is an n-best metric where "
                                               f"higher is better: add --maximize-best-checkpoint-metric"):
        check_best_checkpoint_metric(metric, False, VALID + [metric], NBEST + [metric])


def test_an_error_rate_is_minimized_and_a_count_is_no_quality():
    """E_1 = 1 - F_1: lower is better, so the flag is refused; num_ret counts hypotheses."""
    check_best_checkpoint_metric("e1", False, VALID + ["e1"], NBEST + ["e1"])
    with pytest.raises(NBestConfigError, match="e1 is an n-best metric where lower is better: remove "
                                               "--maximize-best-checkpoint-metric .*would hold the highest e1"):
        check_best_checkpoint_metric("e1", True, VALID + ["e1"], NBEST + ["e1"])
    for maximize in (True, False):
        with pytest.raises(NBestConfigError, match="num_ret is a count, not a quality to select checkpoints on"):
            check_best_checkpoint_metric("num_ret", maximize, VALID + ["num_ret"], NBEST + ["num_ret"])


def test_lengths_beyond_the_positions_name_the_options():
    """fairseq's SequenceGenerator stops at its max_len (the model's positions) minus 1: 1.2 * 11 + 4 =
    17 tokens fit 18 positions (17 tokens), not 17 positions (16)."""
    options = SimpleNamespace(max_len_a=1.2, max_len_b=4)
    assert length_warning(SimpleNamespace(max_len=18), options, 11) is None
    assert length_warning(SimpleNamespace(max_len=17), options, 11) == (
        "--nbest-max-len-a 1.2 --nbest-max-len-b 4 allow 17 tokens for the longest scored valid source (11 "
        "tokens), beyond the model's 17 target positions: fairseq's beam search stops hypotheses at 16 tokens. "
        "Set --nbest-max-len-a/-b so that A * 11 + B <= 16, or train with a larger --max-target-positions")


#: fairseq's defaults: validate and save at the end of every epoch
DEFAULTS = dict(save_interval=1, save_interval_updates=0, no_save=False, validate_interval=1,
                validate_interval_updates=0, disable_validation=False)
SAVING = {  # the options that differ from fairseq's defaults -> what the refusal says (None: every validation saved)
    "the defaults": ({}, None),
    "--save-interval 2": (dict(save_interval=2), "--validate-interval 1 validates at the end of epochs that "
                          "--save-interval 2 does not save, so the kept validation could be one never saved; make "
                          "--save-interval divide --validate-interval (e.g. --save-interval 1, or "
                          "--validate-interval 2)"),
    "--save-interval 2 --validate-interval 3": (dict(save_interval=2, validate_interval=3), "--validate-interval 3"),
    "--save-interval 2 --validate-interval 4": (dict(save_interval=2, validate_interval=4), None),
    "--validate-interval 2": (dict(validate_interval=2), None),  # saves epochs it does not validate: harmless
    "--validate-interval-updates 50 alone": (dict(validate_interval_updates=50),
                                             "--validate-interval-updates 50 validates at updates that "
                                             "--save-interval-updates 0 does not save"),
    "--validate-interval-updates 50 --save-interval-updates 100": (
        dict(validate_interval_updates=50, save_interval_updates=100), "e.g. --save-interval-updates 50)"),
    "--validate-interval-updates 100 --save-interval-updates 50": (
        dict(validate_interval_updates=100, save_interval_updates=50), None),
    "--save-interval-updates 50 alone": (dict(save_interval_updates=50), None),  # fairseq validates where it saves
    "--no-save": (dict(save_interval=2, no_save=True), None),  # no checkpoint at all, as asked
    "--disable-validation": (dict(save_interval=2, disable_validation=True), None),  # nothing to keep
}


@pytest.mark.parametrize("options, message", SAVING.values(), ids=SAVING.keys())
def test_a_validation_fairseq_would_not_save_is_refused(options, message):
    """fairseq validates where --validate-interval(-updates) says and saves (writing checkpoint_best.pt
    if the rule keeps the validation) where --save-interval(-updates) says: every validation must be saved."""
    problem = saving_problem({**DEFAULTS, **options})
    assert problem is None if message is None else message in problem, problem


def test_the_saving_options_are_read_from_the_runs_config():
    """The task's config is a node of the run's; a task config that stands alone is not checked."""
    from omegaconf import OmegaConf

    root = OmegaConf.create({"checkpoint": {"save_interval": 2, "save_interval_updates": 0, "no_save": False},
                             "dataset": {"validate_interval": 1, "validate_interval_updates": 0,
                                         "disable_validation": False}, "task": {"nbest_gold": "g"}})
    assert run_options(root.task) == {**DEFAULTS, "save_interval": 2}
    assert run_options(SimpleNamespace(nbest_gold="g")) is None
    assert run_options(OmegaConf.create({"nbest_gold": "g"})) is None


def test_a_sample_shows_the_prompt_and_marks_gold_translations(caplog):
    """The mark follows the metrics' matching (case and punctuation aside): rank 2 is 'O gato.' itself."""
    prompt = GoldPrompt(prompt_id("the cat"), "the cat", (("o gato", 0.7), ("a gata", 0.3)))
    hyps = [Hyp("um gato", -0.25), Hyp("O gato.", -0.5), Hyp("a gata", -1.125)]
    samples = Samples(1)
    samples.take({prompt.id: hyps, "other": []})
    assert list(samples.lists) == [prompt.id]  # the first N lists only
    with caplog.at_level(logging.INFO):
        samples.log(Gold([prompt]), "epoch 1")
    assert caplog.messages == ["translation_nbest: n-best samples at epoch 1 (1 of 1 prompts; * a valid translation):\n"
                               f"  {prompt.id}: the cat\n"
                               "     1   um gato  (-0.25)\n"
                               "     2 * O gato.  (-0.5)\n"
                               "     3 * a gata  (-1.125)\n"
                               "    gold: o gato | a gata"]
    samples.take({prompt.id: hyps})
    samples.log(Gold([prompt]), "epoch 2", show=False)
    assert samples.lists == {}  # forgotten after each validation, logged or not


def test_the_end_of_training_line_runs_once_before_fairseqs_last_line(caplog):
    calls = []
    at_end_of_training(lambda: calls.append("old"))
    at_end_of_training(lambda: (calls.append("new"), logging.getLogger("nbest_eval.x").info("concluded")))
    train_logger = logging.getLogger("fairseq_cli.train")
    with caplog.at_level(logging.INFO):
        train_logger.info("end of epoch 3")
        train_logger.info("done training in 1.0 seconds")
    assert calls == ["new"]  # a later task replaces the earlier one's
    assert [r.getMessage() for r in caplog.records][-2:] == ["concluded", "done training in 1.0 seconds"]


# -- in fairseq-train ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def startup_corpus(tmp_path_factory):
    """40 valid prompts and 100 training pairs, binarized; a gold of 40 other prompts."""
    root = tmp_path_factory.mktemp("fairseq_startup")
    synth = generate(seed=1, train_pairs=100, valid_prompts=40)
    write_corpus(root / "text", synth)
    run(command("fairseq-preprocess") + [
        "--source-lang", "src", "--target-lang", "tgt", "--trainpref", str(root / "text" / "train"),
        "--validpref", str(root / "text" / "valid"), "--destdir", str(root / "bin"), "--joined-dictionary",
        "--workers", "1"], root / "preprocess.log")
    other = root / "other.gold.txt"
    other.write_text(format_gold(generate(seed=2, train_pairs=0, valid_prompts=40).gold, str(other)))
    return SimpleNamespace(root=root, bin=root / "bin", gold=root / "text" / "valid.gold.txt", other=other)


def train(corpus, name, *extra, args=TINY_ARGS, check=True):
    cmd = command("fairseq-train") + [str(corpus.bin), "--user-dir", str(PLUGIN), *args, "--nbest-gold",
                                      str(corpus.gold), "--save-dir", str(corpus.root / name), *map(str, extra)]
    return run(cmd, corpus.root / f"{name}.log", check=check)


def refused(result, message):
    assert result.returncode != 0 and f"NBestConfigError: translation_nbest: {message}" in result.log
    assert STARTED not in result.log


@pytest.mark.training
def test_a_typo_in_best_checkpoint_metric_stops_at_start_up(startup_corpus):
    refused(train(startup_corpus, "typo", "--max-epoch", 1, "--best-checkpoint-metric", "mapp", check=False),
            "--best-checkpoint-metric mapp is not a key of the valid line: did you mean map? the valid line can "
            "have loss, nll_loss")


@pytest.mark.training
def test_an_nbest_metric_without_maximize_stops_at_start_up(startup_corpus):
    args = [a for a in TINY_ARGS if a != "--maximize-best-checkpoint-metric"]
    refused(train(startup_corpus, "minimize", "--max-epoch", 1, args=args, check=False),
            "--best-checkpoint-metric map is an n-best metric where higher is better: add "
            "--maximize-best-checkpoint-metric")


@pytest.mark.training
@pytest.mark.parametrize("options, message", [
    (["--save-interval", 2], "--validate-interval 1 validates at the end of epochs that --save-interval 2 does "
                             "not save"),
    (["--validate-interval-updates", 5], "--validate-interval-updates 5 validates at updates that "
                                         "--save-interval-updates 0 does not save")])
def test_a_rule_keeping_validations_never_saved_stops_at_start_up(startup_corpus, options, message):
    """The issue's case: with --save-interval 2 the rule could keep epoch 1, which fairseq never saves."""
    refused(train(startup_corpus, "unsaved", "--max-epoch", 2, "--patience", 3, *options, check=False),
            "early stopping (proportional on map, patience 3, warm-up until significantly better than the first "
            f"validation, alpha 0.05) keeps a validation by having fairseq write checkpoint_best.pt, which fairseq "
            f"writes only when it saves: {message}")


@pytest.mark.training
def test_order_matching_with_a_gold_of_other_prompts_stops_at_start_up(startup_corpus):
    refused(train(startup_corpus, "order", "--max-epoch", 1, "--nbest-map", "order", "--nbest-gold",
                  startup_corpus.other, check=False),
            "--nbest-gold does not fit the 'valid' split: matching by order pairs line i of the 'valid' split with "
            f"prompt i of the gold {startup_corpus.other}, but only 0 of 40 lines are their prompt's text")


@pytest.fixture(scope="module")
def frozen(startup_corpus):
    """lr 0: every validation ties (an untrained model's MAP), the rule never leaves warm-up. 16 target
    positions with --nbest-max-len-b 200 (lists saved); two samples printed per validation."""
    save = startup_corpus.root / "frozen"
    result = train(startup_corpus, "frozen", "--max-epoch", 3, "--lr-scheduler", "fixed", "--lr", 0, "--patience", 3,
                   "--no-epoch-checkpoints", "--max-target-positions", 16, "--nbest-max-len-b", 200,
                   "--nbest-save-dir", save / "nbest", "--nbest-print-samples", 2)
    result.save = save
    return result


@pytest.mark.training
def test_the_end_of_training_says_what_checkpoint_best_holds(frozen):
    """Three tied validations: checkpoint_best.pt is the latest, and the last line says why."""
    assert [r["valid_map"] for r in frozen.valid] == [frozen.valid[0]["valid_map"]] * 3
    last = int(frozen.valid[-1]["valid_num_updates"])
    best = torch.load(frozen.save / "checkpoint_best.pt", map_location="cpu", weights_only=False)
    assert best["optimizer_history"][-1]["num_updates"] == last
    line = next(line for line in frozen.log.splitlines() if "translation_nbest: checkpoint_best.pt: " in line)
    assert f"proportional on map: kept validation 3 (update {last}, map " in line
    assert "the rule never left warm-up" in line
    assert frozen.log.index(line) < frozen.log.index("done training in")


@pytest.mark.training
def test_lengths_beyond_the_positions_are_a_warning_and_what_it_says_holds(frozen):
    """The longest valid source is 11 tokens (with </s>): 1.2 * 11 + 200 > 15, the most that 16 positions
    generate; the untrained model's hypotheses run to exactly that."""
    assert ("WARNING | nbest_eval.fairseq.startup | translation_nbest: --nbest-max-len-a 1.2 --nbest-max-len-b 200 "
            "allow 213 tokens for the longest scored valid source (11 tokens), beyond the model's 16 target "
            "positions: fairseq's beam search stops hypotheses at 15 tokens") in frozen.log
    lengths = [len(line.split("\t")[3].split()) for path in (frozen.save / "nbest").glob("*.tsv")
               for line in path.read_text().splitlines()[1:]]
    assert len(lengths) == 3 * 40 * 8 and max(lengths) == 15


@pytest.mark.training
def test_print_samples_logs_n_lists_at_each_validation(frozen):
    blocks = re.findall(r"translation_nbest: n-best samples at epoch (\d), update \d+ \(2 of \d+ prompts; \* a valid "
                        r"translation\):\n((?:  prompt_\w+: .*\n(?:    [ \d]\d [* ] .*\n){8}    gold: .*\n){2})",
                        frozen.log)
    assert [epoch for epoch, _ in blocks] == ["1", "2", "3"]
    prompts = [re.findall(r"  (prompt_\w+): (.*)\n", block) for _, block in blocks]
    assert prompts[0] == prompts[1] == prompts[2]  # the same two prompts at every validation
    assert all(prompt_id(text) == pid for pid, text in prompts[0])


@pytest.mark.training
def test_the_valid_line_keys_are_the_runs_own(frozen):
    """Derived from the run's criterion and task: what the valid line logs, and no hidden key."""
    models, cfg, task = load_ensemble(str(frozen.save / "checkpoint_last.pt"))
    keys = valid_line_keys(task, task.build_criterion(cfg.criterion))
    logged = {k.removeprefix("valid_") for k in frozen.valid[0]} - {"epoch", "best_map", "nbest_kept_update"}
    assert logged <= set(keys) and not any(k.startswith("_") for k in keys)


# -- --nbest-mode async (issue 33) ----------------------------------------------------------------

@pytest.mark.parametrize("change, refusal", [
    ({}, None),
    ({"nbest_async_device": "cuda:1"}, None),
    ({"nbest_async_device": "external"}, None),
    ({"nbest_async_device": "gpu"}, "--nbest-async-device 'gpu' is none of cpu, external or cuda[:N]"),
    ({"nbest_async_queue": 0}, "--nbest-async-queue must be >= 1, got 0"),
    ({"keep_best_checkpoints": 2}, "--keep-best-checkpoints keeps checkpoints by values fairseq sees at save time"),
    ({"lr_scheduler": "reduce_lr_on_plateau"}, "reduce_lr_on_plateau on an n-best measure would depend on when"),
    ({"gold": False}, "--nbest-mode async needs --nbest-gold"),
])
def test_async_mode_refuses_what_cannot_work(change, refusal):
    from nbest_eval.fairseq.startup import async_problem

    cfg = SimpleNamespace(nbest_async_queue=change.get("nbest_async_queue", 2), best_checkpoint_metric="map",
                          nbest_async_device=change.get("nbest_async_device"))
    root = SimpleNamespace(checkpoint=SimpleNamespace(keep_best_checkpoints=change.get("keep_best_checkpoints", -1)),
                           lr_scheduler={"_name": change.get("lr_scheduler", "inverse_sqrt")})
    problem = async_problem(cfg, root, NBEST if change.get("gold", True) else None)
    assert (problem is None) if refusal is None else refusal in problem


@pytest.mark.parametrize("flags, dtype", [({}, torch.float32), ({"fp16": True}, torch.float16),
                                          ({"memory_efficient_fp16": True}, torch.float16),
                                          ({"bf16": True}, torch.bfloat16)])
def test_checkpoints_generate_in_the_dtype_their_run_computed_in(flags, dtype):
    """select and the sidecar cast a loaded model as training ran it: an --fp16 run's lists come from half weights."""
    from omegaconf import OmegaConf

    from nbest_eval.fairseq.checkpoints import in_run_dtype

    cfg = OmegaConf.create({"common": {"fp16": False, "bf16": False, "memory_efficient_fp16": False, **flags}})
    weights = torch.nn.Linear(3, 2).half().state_dict()  # as an --fp16 run saves them
    model = torch.nn.Linear(3, 2)
    model.load_state_dict(weights)  # fairseq loads into a float32 model
    model = in_run_dtype(model, cfg)
    assert model.weight.dtype == dtype
    if dtype == torch.float16:
        assert torch.equal(model.weight, weights["weight"])
