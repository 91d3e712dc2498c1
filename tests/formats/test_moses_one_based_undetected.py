"""Issue 29 trial: a 1-based Moses file of near-garbage hypotheses shares too few words with the gold
for the 1-based check to see it; its last sentence id (the gold's size) is then out of range, and that
error suggests the ids may count from 1, with the renumbering that the 1-based refusal gives."""

import subprocess

import pytest

from nbest_eval import Hyp, InputError
from nbest_eval.formats import read_nbest

# THREE_PROMPT_GOLD (3 prompts) translated into words no gold translation has, numbered from 1
GARBAGE = "1 ||| xyz ||| ||| -1\n2 ||| qqq ||| ||| -1\n3 ||| www ||| ||| -1\n"
RENUMBERING = "perl -pe 's/^(\\s*)(\\d+)/$1.($2-1)/e' IN > OUT"


def test_the_out_of_range_last_sentence_suggests_the_ids_count_from_1(gold, tmp_path):
    path = tmp_path / "garbage.nbest"
    path.write_text(GARBAGE, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_nbest(path, gold, "moses")
    message = str(info.value)
    assert message.startswith(f"{path}:3: sentence id 3 is out of range: the gold has 3 prompts")
    assert "if the file numbers its sentences from 1" in message and RENUMBERING in message
    fixed = subprocess.run(["perl", "-pe", r"s/^(\s*)(\d+)/$1.($2-1)/e"], input=GARBAGE, capture_output=True,
                           text=True, check=True).stdout
    path.write_text(fixed, encoding="utf-8")
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
