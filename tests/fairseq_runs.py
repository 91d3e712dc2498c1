"""fairseq's command-line tools as the tests run them: the console scripts of this interpreter's
environment, the checkout's plugin, the tiny transformer's arguments, one thread per process.
Shared by the fairseq tests and selection/test_averaging.py (imported as ``from
fairseq_runs import ...``: tests/ is on sys.path); imports no framework itself."""

import json
import os
import shlex
import socket
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from nbest_eval.fairseq.command_line import fairseq_command as command  # noqa: F401 (the tests' name)

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "plugin"
TINY_ARGS = shlex.split(" ".join(line for line in (REPO / "configs" / "tiny_transformer.args").read_text().splitlines()
                                 if not line.lstrip().startswith("#")))
VALID_PROMPTS = 40  # of the corpus the fairseq tests train on (conftest.py's fairseq_corpus)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def run(cmd, log: Path, check=True, cwd=None):
    with open(log, "w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV, cwd=cwd)
    text = log.read_text()
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd[:3]))} ... failed ({proc.returncode}):\n{text[-4000:]}")
    return SimpleNamespace(returncode=proc.returncode, log=text, valid=valid_records(text))


def valid_records(log: str):
    """The valid lines of a --log-format json log (plain or hydra logging), values as floats."""
    records = []
    for line in log.splitlines():
        if '"valid_loss"' in line and "{" in line:
            record = json.loads(line[line.index("{"):])
            records.append({k: float(v) for k, v in record.items()})
    return records


def make_corpus(root: Path) -> SimpleNamespace:
    """40 valid prompts with complete gold sets, 3000 training pairs, and a 100-pair 'test' split for
    runs that only need cheap epochs (its file name is the only 'test' thing about it), binarized."""
    from nbest_eval.analysis.synth import generate, write_corpus

    synth = generate(seed=1, train_pairs=3000, valid_prompts=VALID_PROMPTS)
    text = root / "text"
    write_corpus(text, synth)
    for side, column in (("src", 0), ("tgt", 1)):
        (text / f"small.{side}").write_text("".join(pair[column] + "\n" for pair in synth.train[:100]))
    bin_dir = root / "bin"
    run(command("fairseq-preprocess") + [
        "--source-lang", "src", "--target-lang", "tgt", "--trainpref", str(text / "train"),
        "--validpref", str(text / "valid"), "--testpref", str(text / "small"), "--destdir", str(bin_dir),
        "--joined-dictionary", "--workers", "1"], root / "preprocess.log")
    return SimpleNamespace(root=root, text=text, bin=bin_dir, gold=text / "valid.gold.txt", synth=synth)


def train_command(corpus: SimpleNamespace, save_dir: Path, *extra):
    """fairseq-train the tiny transformer on ``corpus`` (:func:`make_corpus`) with the checkout's plugin."""
    return command("fairseq-train") + [str(corpus.bin), "--user-dir", str(PLUGIN), *TINY_ARGS,
                                       "--nbest-gold", str(corpus.gold), "--save-dir", str(save_dir), *map(str, extra)]


def train(corpus: SimpleNamespace, save_dir: Path, *extra, log_name=None, check=True):
    """Run :func:`train_command` to the end."""
    return run(train_command(corpus, save_dir, *extra), corpus.root / (log_name or f"{save_dir.name}.log"), check=check)


#: strict patience 1 stops at the first validation after 3 that does not improve MAP
STRICT_STOPPING = ("--patience", 1, "--nbest-stopping", "strict", "--nbest-stopping-warmup", 3)


def two_workers(corpus: SimpleNamespace, save_dir: Path, *extra, timeout: float = 120.0, check: bool = True):
    """:func:`train_command` on two CPU worker processes started by hand (gloo); their logs (rank 0's,
    rank 1's). Training all-reduces at every update, so a rank that stops at another validation than
    its peer leaves it waiting: a failure, or this ``timeout``'s (``check``: either fails the test)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs, logs = [], [corpus.root / f"{save_dir.name}-rank{rank}.log" for rank in (0, 1)]
    for rank, log in enumerate(logs):
        cmd = train_command(corpus, save_dir, *extra, "--distributed-world-size", 2, "--distributed-rank", rank,
                            "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn",
                            "--device-id", 0, "--distributed-backend", "gloo", "--ddp-backend", "legacy_ddp")
        with open(log, "w") as out:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV))
    deadline = time.monotonic() + timeout
    try:
        codes = [_wait(p, deadline) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    texts = [log.read_text() for log in logs]
    if check and codes != [0, 0]:
        pytest.fail(f"two workers: exit codes {codes}:\n{texts[0][-3000:]}\n{texts[1][-3000:]}")
    return texts


def _wait(proc: subprocess.Popen, deadline: float):
    """``proc``'s exit code, or "still running" at ``deadline`` (time.monotonic)."""
    try:
        return proc.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        return "still running"


def loop_stop(run: SimpleNamespace):
    """(the update a loop run stopped at or None, the update its rule kept)."""
    stopped = "early stop since valid performance hasn't improved" in run.log
    last = run.valid[-1]
    return (int(last["valid_num_updates"]) if stopped else None), int(last["valid_nbest_kept_update"])


def saved_record(run: SimpleNamespace, epoch: int, updates: int) -> dict:
    """A validation's record in the run's --nbest-save-dir (``run.save / "nbest"``): its values at full precision."""
    return json.loads((run.save / "nbest" / f"valid.epoch{epoch}.update{updates}.json").read_text())


def as_logged(values: dict) -> dict:
    """An evaluation's values as the task logs them: an undefined value as 0."""
    return {key: 0.0 if value is None else value for key, value in values.items()}
