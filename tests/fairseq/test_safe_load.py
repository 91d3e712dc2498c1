"""fairseq checkpoints load through torch's safe loader: a file carrying a pickled command is refused
with a clear error and the command never runs; files that are no checkpoint are named as such."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
pytestmark = pytest.mark.training  # imports fairseq (seconds): left out by `make test-fast`

import torch  # noqa: E402

from nbest_eval.analysis.synth import generate  # noqa: E402
from nbest_eval.cli import main  # noqa: E402
from nbest_eval.data import InputError  # noqa: E402
from nbest_eval.fairseq.safe_load import load_state  # noqa: E402
from nbest_eval.formats import write_gold  # noqa: E402


class Payload:
    """Unpickling this runs a shell command (what a crafted checkpoint would carry)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture
def crafted(tmp_path):
    marker = tmp_path / "PWNED"
    path = tmp_path / "ckpts" / "checkpoint1.pt"
    path.parent.mkdir()
    torch.save({"model": {}, "cfg": {"task": {"_name": "translation_nbest"}}, "extra": Payload(marker)}, path)
    return path, marker


def test_a_checkpoint_that_would_run_code_is_refused(crafted):
    path, marker = crafted
    with pytest.raises(InputError, match="refusing to load this checkpoint.*posix.system.*--trust-checkpoints"):
        load_state(str(path))
    assert not marker.exists()


def test_select_refuses_it_without_a_traceback(crafted, tmp_path, capsys):
    path, marker = crafted
    gold = tmp_path / "gold.txt"
    write_gold(generate(seed=1, train_pairs=10, valid_prompts=3).gold, gold)
    (tmp_path / "bin").mkdir()
    code = main(["select", "--fairseq-data", str(tmp_path / "bin"), "--gold", str(gold), str(path), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and "refusing to load this checkpoint" in err and "Traceback" not in err
    assert not marker.exists()


@pytest.mark.parametrize("content, message", [(b"hello world\n", "not a fairseq checkpoint"), (b"", "ends early"),
                                              (b"\x80\x04K\x01.", "not a checkpoint")])
def test_a_file_that_is_no_checkpoint_is_named(tmp_path, content, message):
    path = tmp_path / "checkpoint2.pt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        load_state(str(path))


def test_importing_the_task_keeps_safe_loading_on():
    code = "import os, nbest_eval.fairseq.task; import sys; sys.exit('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD' in os.environ)"
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)


def test_the_explicit_opt_in_loads_it_fully(crafted, monkeypatch):
    from fairseq.checkpoint_utils import load_checkpoint_to_cpu

    from nbest_eval.fairseq.safe_load import FULL_LOAD, trust_checkpoints_in_this_run, trusted

    path, marker = crafted
    monkeypatch.delenv(FULL_LOAD, raising=False)
    with trusted(False), pytest.raises(Exception, match="Weights only load failed"):
        load_checkpoint_to_cpu(str(path))
    assert not marker.exists()
    with trusted():  # select --trust-checkpoints: for the duration only
        torch.load(path, map_location="cpu")
    assert marker.exists() and FULL_LOAD not in os.environ
    marker.unlink()
    try:
        trust_checkpoints_in_this_run()  # fairseq-train --nbest-trust-checkpoints: for the rest of the process
        torch.load(path, map_location="cpu")
        assert marker.exists()
    finally:
        os.environ.pop(FULL_LOAD, None)  # but not for the tests after this one
