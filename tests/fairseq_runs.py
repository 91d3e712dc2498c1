"""fairseq's command-line tools as the tests run them: the console scripts of this interpreter's
environment, the checkout's plugin, the tiny transformer's arguments, one thread per process.
Shared by fairseq/test_fairseq_plugin.py and selection/test_averaging.py (imported as ``from
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
