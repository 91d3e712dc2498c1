"""`score` on fairseq-generate output that lacks prompts says why that usually happens (fairseq
drops a last batch whose size is not a multiple of --required-batch-size-multiple) and how to avoid it;
other formats get the summary's count only."""

import pytest

from nbest_eval.cli import main

# samples 0 and 1 of THREE_PROMPT_GOLD; sample 2 is missing, as fairseq leaves out a dropped batch
GENERATE = ("S-1\thi\nH-1\t-0.5\tolá\nD-1\t-0.5\tolá\n"
            "S-0\twell, what did the coach say?\nH-0\t-0.2\tbem, o que o treinador disse?\n"
            "D-0\t-0.2\tbem, o que o treinador disse?\n")
HINT = ("nbest-eval score: warning: 1 of 3 prompts have no hypotheses in this fairseq output, and count as empty "
        "lists (as if nothing was generated). fairseq drops a last batch whose size is not a multiple of "
        "--required-batch-size-multiple (default 8; fairseq issue 5036): generate with "
        "--required-batch-size-multiple 1")


@pytest.mark.parametrize("extra", [[], ["--json"], ["--format", "fairseq"]])
def test_fairseq_output_lacking_prompts_gets_the_batch_hint(gold_file, tmp_path, capsys, extra):
    path = tmp_path / "generate-valid.txt"
    path.write_text(GENERATE, encoding="utf-8")
    assert main(["score", "--gold", str(gold_file), "--nbest", str(path), "--metrics", "map", *extra]) == 0
    captured = capsys.readouterr()
    assert HINT in captured.err.splitlines()
    assert "required-batch-size-multiple" not in captured.out


def test_complete_fairseq_output_and_other_formats_get_no_hint(gold_file, tmp_path, capsys):
    complete = tmp_path / "complete.txt"
    complete.write_text(GENERATE + "S-2\tnothing valid\nH-2\t-1\tnada\n", encoding="utf-8")
    partial_tsv = tmp_path / "partial.tsv"
    partial_tsv.write_text("p1\t1\t-0.2\tbem\n", encoding="utf-8")
    for path in (complete, partial_tsv):
        assert main(["score", "--gold", str(gold_file), "--nbest", str(path), "--metrics", "map"]) == 0
        assert "required-batch-size-multiple" not in capsys.readouterr().err
