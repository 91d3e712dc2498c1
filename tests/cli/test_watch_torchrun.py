"""`nbest-eval watch` and torchrun's environment (issue 33): what it refuses to shard, and a trainer's
child sidecar, which inherits the torchrun environment of its trainer, watching in one process. The
sharded fairseq and HF sidecars run in tests/fairseq/test_fairseq_async_sharded.py and
tests/hf/test_hf_async_sharded.py."""

import os
import socket
import subprocess
import sys

import pytest
from test_watch import lists_queue

from nbest_eval.cli import main
from nbest_eval.training.heartbeat import Heartbeat

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_trainers_child_sidecar_watches_in_one_process_in_torchruns_environment(tmp_path):
    """The parent here is the "trainer" (its heartbeat names this test's pid): the watch it starts with
    WORLD_SIZE 2 evaluates alone. Were it to join a group of 2, it would wait for a peer that never comes."""
    _, queue = lists_queue(tmp_path)
    Heartbeat.of_trainer(queue).stop("done")
    env = {**ENV, "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    proc = subprocess.run([sys.executable, "-m", "nbest_eval", "watch", str(queue.root), "--until", "drained",
                           "--poll", "0.01"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "watch: 2 evaluated, 2 not evaluated (after the stop verdict); drained" in proc.stdout


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


@pytest.mark.training  # starts torch.distributed in two processes
def test_torchrun_refuses_to_shard_n_best_files(tmp_path):
    _, queue = lists_queue(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "nbest_eval", "watch", str(queue.root), "--until", "drained"],
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode != 0
    assert "n-best files cannot be sharded over processes: watch them in one" in proc.stdout + proc.stderr
    assert not queue.results() and len(queue.waiting()) == 4
