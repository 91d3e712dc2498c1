"""Issue 29, compare: --shared-prompts scores every system on the prompts they all cover; a table of a
1-best and an 8-best system is signed nbest:1-8, not nbest:8; a progress bar on stderr (on a terminal,
once the work has lasted a while), never on stdout."""

import io
import json
import sys

import pytest

from nbest_eval.cli import main

GOLD = "p1|one\nolá|1\n\np2|two\ntchau|1\n\np3|three\nsim|1\n"
# a: p1 right, p2 wrong, p3 right (AP 1, 0, 1); b: p1 wrong, p2 right, no list for p3 (AP 0, 1, 0)
SYSTEMS = {"a": "p1\t1\t-1\tolá\np2\t1\t-1\tx\np3\t1\t-1\tsim\n", "b": "p1\t1\t-1\tx\np2\t1\t-1\ttchau\n"}


@pytest.fixture
def ab_files(tmp_path):
    (tmp_path / "gold.txt").write_text(GOLD, encoding="utf-8")
    for name, text in SYSTEMS.items():
        (tmp_path / f"{name}.tsv").write_text(text, encoding="utf-8")
    return tmp_path


def compare(capsys, ab_files, *options):
    status = main(["compare", "--gold", str(ab_files / "gold.txt"), "--nbest", str(ab_files / "a.tsv"),
                   str(ab_files / "b.tsv"), "--metrics", "p1", *map(str, options)])
    out, err = capsys.readouterr()
    return status, out, err


def test_shared_prompts_scores_the_prompts_every_system_covers(ab_files, capsys):
    status, out, err = compare(capsys, ab_files, "--json", "--write-scores", ab_files / "all.json")
    values = {s["name"]: s["values"]["map"] for s in json.loads((ab_files / "all.json").read_text())["systems"]}
    assert status == 0 and values == pytest.approx({"a": 2 / 3, "b": 1 / 3})  # p3 is an empty list for b
    assert "--shared-prompts scores the prompts they all cover" in err
    assert json.loads(out)["signatures"]["map"].split("|")[2].startswith("gold:3p.")

    status, out, err = compare(capsys, ab_files, "--json", "--shared-prompts", "--write-scores",
                               ab_files / "shared.json")
    values = {s["name"]: s["values"]["map"] for s in json.loads((ab_files / "shared.json").read_text())["systems"]}
    assert status == 0 and values == pytest.approx({"a": 1 / 2, "b": 1 / 2})  # p1 and p2 only
    assert "--shared-prompts: scoring the 2 gold prompts (of 3) that every system has hypotheses for" in err
    assert "warning" not in err
    result = json.loads(out)
    assert result["n_prompts"] == 2 and result["coverage"] == {"a": 3, "b": 2}
    assert result["signatures"]["map"].split("|")[2].startswith("gold:2p.")


def test_shared_prompts_lets_systems_of_different_coverage_be_paired(ab_files, capsys):
    status, _, err = compare(capsys, ab_files, "--paired", "t")
    assert status == 2 and "b cannot be paired with a" in err
    assert "(pass --shared-prompts to pair them on the prompts both cover)" in err
    status, out, _ = compare(capsys, ab_files, "--paired", "t", "--shared-prompts", "--json")
    assert status == 0 and json.loads(out)["paired"]["systems"]["b"]["map"]["p_value"] == pytest.approx(1.0)


def test_shared_prompts_with_no_prompt_in_common_is_an_error(ab_files, capsys):
    (ab_files / "b.tsv").write_text("p3\t1\t-1\tsim\n", encoding="utf-8")
    (ab_files / "a.tsv").write_text("p1\t1\t-1\tolá\n", encoding="utf-8")
    status, _, err = compare(capsys, ab_files, "--shared-prompts")
    assert status == 2 and "--shared-prompts: no gold prompt has hypotheses in every system's file" in err


def test_ablate_takes_shared_prompts_too(ab_files, capsys):
    status = main(["ablate", "--gold", str(ab_files / "gold.txt"), "--nbest", str(ab_files / "a.tsv"),
                   str(ab_files / "b.tsv"), "--shared-prompts", "--json", "--fractions", "1"])
    assert status == 0 and json.loads(capsys.readouterr().out)["n_prompts"] == 2


@pytest.mark.parametrize("b_size, signed", [(1, "nbest:1-8"), (8, "nbest:8")])
def test_a_table_of_a_1_best_and_an_8_best_system_is_signed_with_the_range(ab_files, capsys, b_size, signed):
    eight = "".join(f"p{p}\t{r}\t-{r}\thyp {r}\n" for p in (1, 2, 3) for r in range(1, 9))
    (ab_files / "a.tsv").write_text(eight, encoding="utf-8")
    (ab_files / "b.tsv").write_text("".join(f"p{p}\t{r}\t-{r}\thyp {r}\n" for p in (1, 2, 3)
                                         for r in range(1, b_size + 1)), encoding="utf-8")
    status, out, _ = compare(capsys, ab_files, "--json")
    assert status == 0
    assert all(f"|{signed}|" in sig for sig in json.loads(out)["signatures"].values())


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_goes_to_stderr_on_a_terminal_never_to_stdout(ab_files, capsys, monkeypatch):
    monkeypatch.setattr("nbest_eval.cli.common.PROGRESS_DELAY_S", 0)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    status, out, _ = compare(capsys, ab_files, "--json")
    assert status == 0 and "scoring systems" in terminal.getvalue()
    assert "scoring systems" not in out and json.loads(out)["systems"] == ["a", "b"]
    monkeypatch.undo()
    status, _, err = compare(capsys, ab_files)  # not a terminal: no bar
    assert status == 0 and "scoring systems" not in err
