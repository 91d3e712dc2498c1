"""`nbest-eval select --hf` says the precision it replays (issue 30: the header listed beam, batches
and prompts, not the bf16 it applied), checkpoints that recorded different precisions are refused,
and a batch option below 1 is refused at the option, not blamed on the checkpoint's record."""

import json
import shutil

import pytest

pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
from test_select_hf_batches import recorded_checkpoint, select_hf  # noqa: E402

from nbest_eval.cli import main  # noqa: E402

pytestmark = pytest.mark.training


@pytest.fixture(scope="module")
def bf16_hf_checkpoint(tmp_path_factory):
    """A tiny Marian checkpoint whose evaluator generated under bf16 autocast (the CPU has it), the gold,
    and that evaluator."""
    return recorded_checkpoint(tmp_path_factory.mktemp("select_hf_precision"), 3, precision="bf16")


def test_select_says_the_recorded_precision_and_scores_in_it(bf16_hf_checkpoint, capsys):
    gold, path, evaluator = bf16_hf_checkpoint
    assert hf.checkpoints.recorded_settings(path)["precision"] == "bf16"
    model, _ = hf.load_model(path, "cpu")
    loop = evaluator.evaluate(model)
    code, table, err = select_hf(capsys, path, "--gold", gold, "--metrics", "map")
    assert code == 0, err
    header = next(line for line in err.splitlines() if "generating as" in line)
    assert "batch_tokens none, precision bf16, prompts " in header
    assert table["systems"][0]["values"]["map"] == pytest.approx(loop.values["map"], rel=1e-9, abs=1e-12)


def recorded_copy(path, target, edit):
    """A copy of checkpoint ``path`` at ``target`` whose recorded evaluator settings ``edit`` changed in place."""
    shutil.copytree(path, target)
    settings = target / "nbest_eval.json"
    record = json.loads(settings.read_text())
    edit(record["evaluator"])
    settings.write_text(json.dumps(record))
    return target


def test_a_record_without_precision_is_said_as_none(bf16_hf_checkpoint, tmp_path, capsys):
    """A record of a version before precision generated without autocast: "none", as the other unset values."""
    gold, path, _ = bf16_hf_checkpoint
    old = recorded_copy(path, tmp_path / "checkpoint-7", lambda evaluator: evaluator.pop("precision"))
    code, _, err = select_hf(capsys, old, "--gold", gold, "--metrics", "map")
    assert code == 0, err
    assert "precision none, prompts " in err


def test_checkpoints_that_recorded_different_precisions_are_refused(bf16_hf_checkpoint, tmp_path, capsys):
    gold, path, _ = bf16_hf_checkpoint
    other = recorded_copy(path, tmp_path / "checkpoint-9", lambda evaluator: evaluator.update(precision="fp32"))
    code, _, err = select_hf(capsys, path, other, "--gold", gold, "--metrics", "map")
    assert code == 2
    assert "recorded different precision (bf16 and fp32): score them in separate runs" in err


@pytest.mark.parametrize("option", ["--batch-tokens", "--batch-size"])
@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_batch_option_below_one_is_refused_at_the_option(bf16_hf_checkpoint, capsys, option, value):
    """Issue 30: --batch-tokens 0 reached the evaluator, which blamed the checkpoint's nbest_eval.json."""
    gold, path, _ = bf16_hf_checkpoint
    with pytest.raises(SystemExit) as exit:
        main(["select", "--hf", str(path), "--gold", str(gold), f"{option}={value}", "--no-cache"])
    err = capsys.readouterr().err
    assert exit.value.code == 2
    assert f"argument {option}: expected an integer >= 1, got '{value}'" in err
    assert "nbest_eval.json" not in err
