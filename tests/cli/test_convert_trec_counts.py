"""convert --to trec reports what it wrote (issue 31 trial): the run holds each list's distinct keys,
so fewer lines than hypotheses where a list repeats a key after normalization, and says why."""

from nbest_eval.cli import main


def test_the_run_lines_written_are_reported(tmp_path, capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("p1|x\na|0.5\nb|0.5\n\np2|y\nc|1.0\n\n", encoding="utf-8")
    nbest = tmp_path / "n.tsv"
    # p1: a, "A!" (a again after normalization), z; p2: c, c -> 5 hypotheses, 3 distinct keys ranked
    nbest.write_text("p1\t1\t-1\ta\np1\t2\t-2\tA!\np1\t3\t-3\tz\np2\t1\t-1\tc\np2\t2\t-2\tc\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["convert", "--gold", str(gold), "--nbest", str(nbest), "--to", "trec", str(out)]) == 0
    err = capsys.readouterr().err
    assert len((tmp_path / "out.run").read_text().splitlines()) == 3
    assert len((tmp_path / "out.qrels").read_text().splitlines()) == 3
    assert (f"2 prompts, 5 hypotheses -> {out}.run: 3 distinct hypotheses (2 repeating a key of their list after "
            f"normalization left out: a run ranks each document once); {out}.qrels: 3 valid translations") in err


def test_a_run_without_repeats_says_none_left_out(tmp_path, capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("p1|x\na|1.0\n\n", encoding="utf-8")
    nbest = tmp_path / "n.tsv"
    nbest.write_text("p1\t1\t-1\ta\n", encoding="utf-8")
    assert main(["convert", "--gold", str(gold), "--nbest", str(nbest), "--to", "trec", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "1 prompt, 1 hypothesis ->" in err and ": 1 distinct hypothesis; " in err and "left out" not in err
