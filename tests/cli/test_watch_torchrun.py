"""`nbest-eval watch` and torchrun's environment (issue 33): what it refuses to shard, and a trainer's
child sidecar, started without the torchrun environment of its trainer (one process). The
sharded fairseq and HF sidecars run in tests/fairseq/test_fairseq_async_sharded.py and
tests/hf/test_hf_async_sharded.py."""

import os
import subprocess
import sys

import pytest
from test_watch import lists_queue

from nbest_eval.cli import main
from nbest_eval.training.trainer_side import TrainerSide

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def test_a_trainers_child_sidecar_is_started_without_torchruns_environment(tmp_path, monkeypatch):
    """A trainer started by torchrun starts its child sidecar without torchrun's variables: with them the
    child would join a process group of the trainer's size and wait for peers that never come."""
    torchrun = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "x", "GROUP_RANK": "0"}
    for name, value in {**torchrun, "NBEST_EVAL_KEPT": "yes"}.items():
        monkeypatch.setenv(name, value)
    started = {}

    class Child:
        def __init__(self, command, env, **options):
            started.update(command=command, env=env)

    monkeypatch.setattr(subprocess, "Popen", Child)
    side = TrainerSide(str(tmp_path / "run"), "cpu", 2, False, 10.0, "test")
    side.queue.create()
    side._start_child()
    assert started["command"][1:4] == ["-m", "nbest_eval", "watch"]
    assert not set(torchrun) & set(started["env"]) and started["env"]["NBEST_EVAL_KEPT"] == "yes"


def test_under_torchrun_the_device_is_cpu_or_cuda(tmp_path, monkeypatch, capsys):
    _, queue = lists_queue(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["watch", str(queue.root), "--device", "cuda:1", "--until", "drained"]) == 2
    assert "under torchrun --device is cpu or cuda (each process takes cuda:LOCAL_RANK), not 'cuda:1'" \
        in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "two")
    assert main(["watch", str(queue.root), "--until", "drained"]) == 2
    assert "the environment's WORLD_SIZE is not a whole number: 'two'" in capsys.readouterr().err
    assert not queue.results()


@pytest.mark.parametrize("world_size", ["1", "2"])
def test_a_cuda_device_where_torch_sees_none_is_refused_at_once(tmp_path, monkeypatch, capsys, world_size):
    torch = pytest.importorskip("torch")
    _, queue = lists_queue(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", world_size)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["watch", str(queue.root), "--device", "cuda", "--until", "drained"]) == 2
    assert "--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False); use --device cpu" \
        in capsys.readouterr().err
    assert not queue.results()


@pytest.mark.training  # starts torch.distributed in two processes
def test_torchrun_refuses_to_shard_n_best_files(tmp_path):
    _, queue = lists_queue(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "nbest_eval", "watch", str(queue.root), "--until", "drained"],
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode != 0
    assert "n-best files cannot be sharded over processes: watch them in one" in proc.stdout + proc.stderr
    assert not queue.results() and len(queue.waiting()) == 4
