"""Moses sentence ids count from 0: a file numbered from 1 would be read one prompt off. One that looks
1-based (first sentence 1, no sentence 0 among its first lines, hypotheses that read far better against
the prompt before their sentence) is refused with the fix; a 0-based file that just lacks sentence 0 is
read as it is. A 1-based file of hypotheses too far from the gold for that check to see ends with a
sentence id out of range, and that error suggests the same renumbering."""

import subprocess

import pytest

from nbest_eval import Hyp, InputError
from nbest_eval.cli import main
from nbest_eval.formats import LineSource, iter_nbest, read_gold, read_nbest, write_nbest

# THREE_PROMPT_GOLD's p1 and p2 translated, numbered from 1
ONE_BASED = ("1 ||| bem , o que o treinador disse ? ||| F0= -1 ||| -1\n1 ||| o treinador ||| F0= -2 ||| -2\n"
             "2 ||| olá ||| ||| -1\n")
REFUSED = "the sentence ids look 1-based: the first is 1, none of the first 3 lines is sentence 0"
RENUMBERING = "perl -pe 's/^(\\s*)(\\d+)/$1.($2-1)/e' IN > OUT"
FIX = f"renumber the ids from 0, e.g. {RENUMBERING}"
# THREE_PROMPT_GOLD (3 prompts) translated into words no gold translation has, numbered from 1
GARBAGE = "1 ||| xyz ||| ||| -1\n2 ||| qqq ||| ||| -1\n3 ||| www ||| ||| -1\n"


def write(tmp_path, text, name="out.nbest"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("how", ["whole", "streamed", "detected"])
def test_a_one_based_file_is_refused_with_the_fix(gold, tmp_path, how):
    path = write(tmp_path, "\n" + ONE_BASED)
    with pytest.raises(InputError) as info:
        if how == "streamed":
            with open(path, "rb") as file:
                next(iter_nbest(LineSource(file, str(path)), gold, "moses"))
        else:
            read_nbest(path, gold, "auto" if how == "detected" else "moses")
    assert str(info.value).startswith(f"{path}:2: {REFUSED}")
    # p1's words in the two lines of sentence 1 (5 + 2), p2's "olá" in sentence 2; none of their own
    assert "share 8 words with the gold translations of the prompt before their sentence against 0" in str(info.value)
    assert FIX in str(info.value)


def renumbered(text):
    """``text`` renumbered by the suggested command."""
    return subprocess.run(["perl", "-pe", r"s/^(\s*)(\d+)/$1.($2-1)/e"], input=text, capture_output=True,
                          text=True, check=True).stdout


def test_the_suggested_renumbering_reads_right(gold, tmp_path):
    assert read_nbest(write(tmp_path, renumbered(ONE_BASED)), gold, "moses") == {
        "p1": [Hyp("bem , o que o treinador disse ?", -1.0), Hyp("o treinador", -2.0)], "p2": [Hyp("olá", -1.0)]}


@pytest.mark.parametrize("text, lists", [
    ("1 ||| olá ||| ||| -1\n2 ||| nada ||| ||| -1\n", {"p2": [Hyp("olá", -1.0)], "p3": [Hyp("nada", -1.0)]}),
    ("1 ||| xyz ||| ||| -1\n", {"p2": [Hyp("xyz", -1.0)]}),  # no evidence either way: read as it is
    ("1 ||| olá ||| ||| -1\n0 ||| bem ||| ||| -1\n", {"p2": [Hyp("olá", -1.0)], "p1": [Hyp("bem", -1.0)]}),
], ids=["lacks sentence 0", "no evidence", "sentence 0 later"])
def test_zero_based_files_without_a_first_sentence_0_are_read(gold, tmp_path, text, lists):
    assert read_nbest(write(tmp_path, text), gold, "moses") == lists


def test_real_aws_baseline_one_based_refused_zero_based_without_sentence_0_scored(staple_dir, tmp_path, capsys):
    """The AWS 1-best file as Moses lists: numbered from 1 it is refused (read by 3 workers too); from 0
    but without sentence 0 it scores as the tsv file without prompt 0 does."""
    gold_path = staple_dir / "dev.en_pt.2020-02-20.gold.txt"
    gold = read_gold(gold_path)
    aws = read_nbest(staple_dir / "dev.en_pt.aws_baseline.pred.txt", gold)
    ids = gold.ids()
    one_based = "".join(f"{i + 1} ||| {aws[pid][0].text} ||| F0= -1 ||| -1\n" for i, pid in enumerate(ids[:-1]))
    without_0 = {pid: [Hyp(aws[pid][0].text, -1.0)] for pid in ids[1:]}
    write_nbest(without_0, tmp_path / "without0.moses", "moses", gold=gold)
    write_nbest(without_0, tmp_path / "without0.tsv", "tsv")
    write(tmp_path, one_based, "one.moses")
    assert main(["score", "--gold", str(gold_path), "--nbest", str(tmp_path / "one.moses"), "--jobs", "3"]) == 2
    assert REFUSED.replace("3 lines", "200 lines") in capsys.readouterr().err
    values = []
    for name in ("without0.moses", "without0.tsv"):
        assert main(["score", "--gold", str(gold_path), "--nbest", str(tmp_path / name), "--jobs", "3",
                     "--metrics", "map,wf1,bleu_1x1", "--json"]) == 0
        values.append(capsys.readouterr().out)
    assert values[0] == values[1]


def test_the_out_of_range_last_sentence_suggests_the_ids_count_from_1(gold, tmp_path):
    path = tmp_path / "garbage.nbest"
    path.write_text(GARBAGE, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_nbest(path, gold, "moses")
    message = str(info.value)
    assert message.startswith(f"{path}:3: sentence id 3 is out of range: the gold has 3 prompts")
    assert "if the file numbers its sentences from 1" in message and RENUMBERING in message
    path.write_text(renumbered(GARBAGE), encoding="utf-8")
    assert read_nbest(path, gold, "moses") == {"p1": [Hyp("xyz", -1.0)], "p2": [Hyp("qqq", -1.0)],
                                               "p3": [Hyp("www", -1.0)]}


def test_an_id_further_out_gets_no_such_hint(gold, tmp_path):
    path = tmp_path / "far.nbest"
    path.write_text("0 ||| xyz ||| ||| -1\n7 ||| qqq ||| ||| -1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"sentence id 7 is out of range: the gold has 3 prompts \(sentence id i is "
                                         r"the gold's i-th prompt, from 0\)$"):
        read_nbest(path, gold, "moses")


def test_fairseq_sample_ids_get_no_such_hint(gold, tmp_path):
    path = tmp_path / "gen.out"
    path.write_text("S-3\thi\nH-3\t-1.0\tolá\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_nbest(path, gold, "fairseq")
    assert "sample id 3 is out of range" in str(info.value) and "from 1" not in str(info.value)
