"""The demo pipeline, fast variant: synth -> fairseq-train with the plugin -> select -> compare -> report.

Also checks `select` over real fairseq checkpoints: its scores equal the plugin's in-loop values for
the same checkpoints, the best link points at the best, and checkpoints are left byte for byte.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "fairseq_demo.py"
pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`

pytest.importorskip("fairseq")

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "run"
    result = subprocess.run([sys.executable, str(DEMO), "--fast", "--out", str(out)],
                            capture_output=True, text=True, env=ENV, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, result.stdout


def test_demo_writes_the_report_and_plots(demo):
    out, stdout = demo
    assert f"{out}/REPORT.md" in stdout
    report = (out / "REPORT.md").read_text()
    for section in ("## Checkpoints", "## How sure is each pick?", "## Agreement with MAP",
                    "## Where 1-best 1-reference BLEU and MAP disagree", "## x-best y-reference BLEU against MAP",
                    "## Recall-precision: the best checkpoint against the first and the last"):
        assert section in report
    sure = report.split("## How sure is each pick?")[1].split("\n## ")[0]
    rows = [line.strip("| ").split(" | ") for line in sure.splitlines() if line.startswith("| map |")]
    assert len(rows) == 1  # | map | epoch | value | [low, high] | tied epochs |
    _, epoch, value, interval, tied = rows[0]
    low, high = (float(v) for v in interval.strip("[]").split(", "))
    assert low <= float(value) <= high and epoch in tied.split(", ")
    histograms = sorted(p.name for p in out.glob("rprec-epoch*-vs-epoch*.png"))  # the best against the first, the last
    assert histograms, "MAP rises in training (see the next test), so the best epoch is never the first"
    for png in ("curves.png", "bleu-curves.png", "agreement.png", "bleu-grid.png", "map-vs-bleu1x1.png", "pr-curve.png",
                *histograms):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert f"({png})" in report


def in_loop_values(out: Path):
    """The plugin's logged values per epoch (full precision, from --nbest-save-dir)."""
    records = [json.loads(p.read_text()) for p in (out / "nbest").glob("valid.epoch*.json")]
    return {f"checkpoint{r['epoch']}.pt": r for r in records}


def test_select_equals_the_in_loop_values_and_links_the_best(demo):
    out, _ = demo
    table = json.loads((out / "select.json").read_text())
    logged = in_loop_values(out)
    assert [s["name"] for s in table["systems"]] == sorted(logged, key=lambda n: int(n[10:-3]))
    for system in table["systems"]:
        for key in ("map", "bleu_1x1", "bleu_100x100", "wf1"):
            assert system["values"][key] == pytest.approx(logged[system["name"]][key], abs=1e-9), (system["name"], key)
    maps = [s["values"]["map"] for s in table["systems"]]
    best = max(i for i, v in enumerate(maps) if v == max(maps))  # ties: the latest, like checkpoint_best.pt
    assert table["best"] == table["systems"][best]["name"]
    assert os.path.realpath(out / "best.pt") == str(out / "checkpoints" / table["best"])
    assert maps[-1] > maps[0], "MAP should rise during the demo's training"
    assert table["best"] in table["tied"] and table["choice"] == table["best"]
    for system in table["systems"]:
        assert system["ci_low"] <= system["values"]["map"] <= system["ci_high"] or system["values"]["map"] == 0


def test_select_leaves_checkpoints_untouched(demo):
    out, _ = demo
    checkpoints = out / "checkpoints"

    def digest():
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(checkpoints.iterdir())}

    before = digest()
    result = subprocess.run([sys.executable, "-m", "nbest_eval", "select", "--fairseq-data", str(out / "data-bin"),
                             "--gold", str(out / "data" / "valid.gold.txt"), str(checkpoints / "checkpoint*.pt"),
                             "--metrics", "map", "--beam", "8", "--max-len-a", "1.2", "--max-len-b", "4",
                             "--no-cache", "--json"], capture_output=True, text=True, env=ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    table = json.loads(result.stdout)
    assert "checkpoint_best.pt" not in [s["name"] for s in table["systems"]]  # aliases are left out
    assert digest() == before


def test_demo_refuses_a_directory_it_did_not_make(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    result = subprocess.run([sys.executable, str(DEMO), "--fast", "--out", str(tmp_path)],
                            capture_output=True, text=True, env=ENV)
    assert result.returncode != 0 and "not made by the demo" in result.stderr
    assert (tmp_path / "mine.txt").read_text() == "keep me"
