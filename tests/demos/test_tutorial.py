"""docs/tutorial.md, run as written: its files and commands, taken from the page's marked fenced blocks,
in a temporary folder on the real STAPLE data at tiny sizes (the page reads its sizes from the
environment), so the page and what it runs cannot drift apart.

    <!-- tutorial: file NAME -->   the next fenced block is written to NAME
    <!-- tutorial: run -->         the next fenced block is run by bash, in page order, in one shell

``python tests/demos/test_tutorial.py RECORD_DIR > tutorial.sh`` prints the page's script with each
command block's output (stdout and stderr) going to RECORD_DIR/blockN.txt: run it at the page's own
sizes to get the output the page shows."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "tutorial.md"
MARKED = re.compile(r"<!-- tutorial: (run|file (\S+)) -->\n```(\w+)\n(.*?)^```$", re.S | re.M)
#: tiny sizes: 300 training prompts (about 500 pairs), 50 validation prompts, 2 epochs
TINY = {"TRAIN_PROMPTS": "300", "VALID_PROMPTS": "50", "EPOCHS": "2", "PATIENCE": "1"}
BLOCK_MARK = "### tutorial block"


def page_script(page: str = None, record: str = None) -> str:
    """The page's marked blocks as one bash script: files written with quoted here-documents, commands
    as they are (or, with ``record``, with their output to RECORD/blockN.txt), each block announced on
    stderr so that a failure names it."""
    parts = ["set -euo pipefail"]
    for number, match in enumerate(MARKED.finditer(page if page is not None else PAGE.read_text()), 1):
        what, name, body = match.group(1), match.group(2), match.group(4).rstrip("\n")
        parts.append(f"echo {shlex.quote(f'{BLOCK_MARK} {number}: {what}')} >&2")
        if name:
            parts.append(f"cat > {shlex.quote(name)} <<'TUTORIAL_EOF'\n{body}\nTUTORIAL_EOF")
        else:  # a { ...; } group is no subshell: a cd in it still holds for the next block
            parts.append(f"{{\n{body}\n}} > {shlex.quote(f'{record}/block{number}.txt')} 2>&1" if record else body)
    return "\n".join(parts) + "\n"


def test_the_page_marks_its_blocks():
    """Every marked block is found (a marker that stops matching would silently drop a command), the
    files are python and the commands bash, and every fenced block of the page is either marked or
    shown output (```text)."""
    page = PAGE.read_text()
    marked = list(MARKED.finditer(page))
    assert page.count("<!-- tutorial:") == len(marked) >= 10
    assert all(m.group(3) == ("python" if m.group(2) else "bash") for m in marked)
    opening = re.findall(r"^```(\w*)$", page, re.M)
    assert len(opening) == 2 * (len(marked) + opening.count("text"))  # each block opens and closes once


def test_page_script_writes_files_and_runs_commands_in_order():
    page = ("<!-- tutorial: file a.py -->\n```python\nprint(1)\n```\n\ntext\n\n"
            "<!-- tutorial: run -->\n```bash\npython a.py\n```\n\n```text\n1\n```\n")
    assert page_script(page) == ("set -euo pipefail\n"
                                 "echo '### tutorial block 1: file a.py' >&2\n"
                                 "cat > a.py <<'TUTORIAL_EOF'\nprint(1)\nTUTORIAL_EOF\n"
                                 "echo '### tutorial block 2: run' >&2\n"
                                 "python a.py\n")
    assert "{\npython a.py\n} > /r/block2.txt 2>&1\n" in page_script(page, record="/r")


@pytest.fixture(scope="module")
def tutorial(staple_dir, tmp_path_factory):
    """The page run at TINY sizes in a fresh folder, with this interpreter's environment first on PATH
    (python, nbest-eval, fairseq-train): (its working folder, the completed process)."""
    for module in ("fairseq", "transformers", "sentencepiece"):
        pytest.importorskip(module)
    work = tmp_path_factory.mktemp("tutorial")
    (work / "tutorial.sh").write_text(page_script())
    env = {**os.environ, **TINY, "NBEST_EVAL_STAPLE_DIR": str(staple_dir), "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "tutorial.sh"], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        failed = [line for line in result.stderr.splitlines() if line.startswith(BLOCK_MARK)][-1:]
        pytest.fail(f"docs/tutorial.md failed in {failed} ({result.returncode}):\n"
                    f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return work / "tutorial", result


def test_the_page_selects_without_generation_flags():
    """What the page promises: select takes the generation settings from what each run recorded."""
    commands = [m.group(4) for m in MARKED.finditer(PAGE.read_text()) if "nbest-eval select" in m.group(4)]
    assert len(commands) == 3 and "--hf" in commands[1] and "--fairseq-data" in commands[0]
    for flag in ("--beam", "--nbest-size", "--max-len-a", "--max-len-b", "--lenpen", "--remove-bpe", "--metrics"):
        assert flag not in "".join(commands)


def test_both_runs_end_by_saying_what_they_kept(tutorial):
    folder, _ = tutorial
    assert "checkpoint_best.pt: proportional on map: kept validation" in (folder / "train-fairseq.log").read_text()
    assert "n-best early stopping: proportional on map: kept validation" in (folder / "train-hf.log").read_text()


def select_json(folder: Path, *args: str):
    """``nbest-eval select ARGS --json`` in ``folder`` (the page's runs are cached: no generation)."""
    done = subprocess.run([str(Path(sys.executable).with_name("nbest-eval")), "select", *args, "--json"],
                          cwd=folder, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    return {system["name"]: system["values"] for system in json.loads(done.stdout)["systems"]}


def test_select_without_flags_gives_the_fairseq_log(tutorial):
    """The page's select on the fairseq checkpoints (no generation flags) equals what training logged."""
    folder, _ = tutorial
    logged = {f"checkpoint{r['epoch']}.pt": r for r in map(json.loads, map(Path.read_text,
                                                                           folder.glob("nbest-fairseq/valid.epoch*.json")))}
    selected = select_json(folder, "--fairseq-data", "data-bin", "--gold", "data/valid.gold.txt",
                           "checkpoints/checkpoint[0-9]*.pt")
    assert sorted(selected) == sorted(logged) and len(logged) == int(TINY["EPOCHS"])
    for name, values in selected.items():
        assert values == pytest.approx({key: logged[name][key] for key in values}, abs=1e-9), name


def test_select_without_flags_gives_the_hf_log(tutorial):
    """The page's select on the Hugging Face checkpoints (no generation flags) equals what training logged."""
    folder, _ = tutorial
    history = json.loads(max(folder.glob("hf/checkpoint-*/trainer_state.json"),
                             key=lambda p: int(p.parent.name.split("-")[1])).read_text())["log_history"]
    logged = {f"checkpoint-{e['step']}": e for e in history if "eval_map" in e}
    selected = select_json(folder, "--hf", "--gold", "data/valid.gold.txt", "hf/checkpoint-*")
    assert sorted(selected) == sorted(logged) and len(logged) == int(TINY["EPOCHS"])
    for name, values in selected.items():
        assert values == pytest.approx({key: logged[name][f"eval_{key}"] for key in values}, abs=1e-9), name


def test_compare_puts_both_runs_beside_the_baseline(tutorial):
    _, result = tutorial
    assert "prompts with hypotheses (of 50 in the gold): fairseq 50, hf 50, aws 50" in result.stderr
    assert re.search(r"^aws +\d", result.stdout, re.M) and "against aws" in result.stdout


if __name__ == "__main__":
    print(page_script(record=os.path.abspath(sys.argv[1])), end="")
