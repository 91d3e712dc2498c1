"""Issue 29, compare: --shared-prompts scores every system on the prompts they all cover; a table of a
1-best and an 8-best system is signed nbest:1-8, not nbest:8; a progress bar on stderr (on a terminal,
once the work has lasted a while), never on stdout."""

import json

import pytest

from nbest_eval.cli import main

GOLD = "p1|one\nolá|1\n\np2|two\ntchau|1\n\np3|three\nsim|1\n"
# a: p1 right, p2 wrong, p3 right (AP 1, 0, 1); b: p1 wrong, p2 right, no list for p3 (AP 0, 1, 0)
SYSTEMS = {"a": "p1\t1\t-1\tolá\np2\t1\t-1\tx\np3\t1\t-1\tsim\n", "b": "p1\t1\t-1\tx\np2\t1\t-1\ttchau\n"}


@pytest.fixture
def files(tmp_path):
    (tmp_path / "gold.txt").write_text(GOLD, encoding="utf-8")
    for name, text in SYSTEMS.items():
        (tmp_path / f"{name}.tsv").write_text(text, encoding="utf-8")
    return tmp_path


def compare(capsys, files, *options):
    status = main(["compare", "--gold", str(files / "gold.txt"), "--nbest", str(files / "a.tsv"),
                   str(files / "b.tsv"), "--metrics", "p1", *map(str, options)])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("b_size, signed", [(1, "nbest:1-8"), (8, "nbest:8")])
def test_a_table_of_a_1_best_and_an_8_best_system_is_signed_with_the_range(files, capsys, b_size, signed):
    eight = "".join(f"p{p}\t{r}\t-{r}\thyp {r}\n" for p in (1, 2, 3) for r in range(1, 9))
    (files / "a.tsv").write_text(eight, encoding="utf-8")
    (files / "b.tsv").write_text("".join(f"p{p}\t{r}\t-{r}\thyp {r}\n" for p in (1, 2, 3)
                                         for r in range(1, b_size + 1)), encoding="utf-8")
    status, out, _ = compare(capsys, files, "--json")
    assert status == 0
    assert all(f"|{signed}|" in sig for sig in json.loads(out)["signatures"].values())
