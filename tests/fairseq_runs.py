"""fairseq's command-line tools as the tests run them: the console scripts of this interpreter's
environment, the checkout's plugin, the tiny transformer's arguments, one thread per process.
Shared by the fairseq tests and selection/test_averaging.py (imported as ``from
fairseq_runs import ...``: tests/ is on sys.path); imports no framework itself."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "plugin"
TINY_ARGS = shlex.split(" ".join(line for line in (REPO / "configs" / "tiny_transformer.args").read_text().splitlines()
                                 if not line.lstrip().startswith("#")))
VALID_PROMPTS = 40  # of the corpus the fairseq tests train on (conftest.py's fairseq_corpus)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def command(name):
    """A fairseq console script of this interpreter's environment."""
    script = Path(sys.executable).with_name(name)
    if script.exists():
        return [str(script)]
    module = {"fairseq-train": "fairseq_cli.train", "fairseq-preprocess": "fairseq_cli.preprocess",
              "fairseq-hydra-train": "fairseq_cli.hydra_train"}[name]
    return [sys.executable, "-c", f"import sys; from {module} import cli_main; sys.exit(cli_main())"]


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
