"""`nbest-eval score` end to end, and the metric core on the real STAPLE en_pt data."""

import json
import random
import subprocess
import sys

import pytest
import pytrec_eval
from cases import random_case

from nbest_eval import DEFAULT_METRICS, Hyp, Scorer, norm
from nbest_eval.cli import main
from nbest_eval.formats import read_gold, read_nbest, write_gold, write_nbest

GOLD_FILE = "dev.en_pt.2020-02-20.gold.txt"
AWS_FILE = "dev.en_pt.aws_baseline.pred.txt"


@pytest.fixture
def random_gold_and_nbest(tmp_path):
    """(gold, nbest, folder): a random 12-prompt gold and n-best lists, written as gold.txt and nbest.tsv."""
    gold, nbest = random_case(5, n_prompts=12)
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest(nbest, tmp_path / "nbest.tsv", "tsv")
    return gold, nbest, tmp_path


def test_json_output_has_metric_keys_and_n_prompts(random_gold_and_nbest, capsys):
    gold, nbest, tmp = random_gold_and_nbest
    assert main(["score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "nbest.tsv"), "--json",
                 "--metrics", "map,bleu_2x3,wf1"]) == 0
    out, err = capsys.readouterr()
    values = json.loads(out)
    summary = {"n_prompts", "num_q", "num_ret", "num_rel", "num_rel_ret"}  # always there (test_score_summary.py)
    assert set(values) == {"map", "bleu_2x3", "wf1", "signatures"} | summary
    expected = Scorer(["map", "bleu_2x3", "wf1"]).score(gold, nbest).values
    assert {k: values[k] for k in expected} == expected and values["n_prompts"] == len(gold)
    longest = max(len(hyps) for hyps in nbest.values())
    assert values["signatures"]["bleu_2x3"].startswith(f"bleu_2x3|tok:13a|case:mixed|smooth:exp|nbest:{longest}|"
                                                       f"gold:12p.")
    assert f"{len(gold) - len(nbest)} with no hypotheses" in err


def test_summary_says_how_many_prompts_the_preference_correlation_counted(random_gold_and_nbest, capsys):
    gold, nbest, tmp = random_gold_and_nbest
    assert main(["score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "nbest.tsv"), "--json",
                 "--metrics", "pref_spearman"]) == 0
    scorer = Scorer(["pref_spearman"])
    counted = sum(int(scorer.prompt_stats(p, nbest.get(p.id, []))["pref_spearman:n"]) for p in gold)
    assert f"pref_spearman over {counted} prompts" in capsys.readouterr().err


def test_table_output_and_default_metrics(random_gold_and_nbest, capsys):
    _, nbest, tmp = random_gold_and_nbest
    assert main(["score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "nbest.tsv")]) == 0
    out = capsys.readouterr().out
    assert "12 prompts" in out
    table, rest = out.split("\nsummary:\n")
    summary, signatures = rest.split("\nsignatures:\n")
    assert [line.split()[0] for line in table.splitlines()[1:]] == list(DEFAULT_METRICS)
    assert [line.split()[0] for line in summary.splitlines()] == ["n_prompts", "num_q", "num_ret", "num_rel",
                                                                  "num_rel_ret"]
    assert [line.split()[0] for line in signatures.splitlines()] == list(DEFAULT_METRICS)


def test_per_prompt_file(random_gold_and_nbest, capsys):
    gold, nbest, tmp = random_gold_and_nbest
    out = tmp / "per_prompt.jsonl"
    args = ["score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "nbest.tsv"), "--metrics", "map,rr",
            "--per-prompt", str(out)]
    assert main(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == gold.ids()
    scorer = Scorer(["map"])
    for row, prompt in zip(rows, gold):
        assert row["map"] == scorer.values(scorer.prompt_stats(prompt, nbest.get(prompt.id, [])))["map"]
    assert main(args) == 2  # never overwritten without --force
    assert "--force" in capsys.readouterr().err
    assert main(args + ["--force"]) == 0


@pytest.mark.parametrize("gold_text, nbest_text, message", [
    ("p1|hello\nola|0.5\nbad line\n", "p1\t1\t\tola\n", "gold.txt:3:"),
    ("p1|hello\nola|-1\n", "p1\t1\t\tola\n", "gold.txt:2:"),
    ("p1|hello\nola|1\n", "p1\t1\t\tola\np2\t1\t\tola\n", "nbest.txt:2:"),
    ("p1|hello\nola|1\n", "p1\t1\t\tola\np1\t1\t\toi\n", "nbest.txt:2:"),
])
def test_bad_input_names_file_and_line(tmp_path, capsys, gold_text, nbest_text, message):
    (tmp_path / "gold.txt").write_text(gold_text)
    (tmp_path / "nbest.txt").write_text(nbest_text)
    assert main(["score", "--gold", str(tmp_path / "gold.txt"), "--nbest", str(tmp_path / "nbest.txt")]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("option", [["--metrics", "map,nope"], ["--wf1-top", "0"], ["--format", "xml"],
                                    ["--metrics", "map", "--bleu-tokenize", "nope"],
                                    ["--metrics", "bleu_1x1", "--bleu-tokenize", "nope"]])
def test_bad_options_fail_cleanly(random_gold_and_nbest, option):
    _, _, tmp = random_gold_and_nbest
    result = subprocess.run([sys.executable, "-m", "nbest_eval", "score", "--gold", str(tmp / "gold.txt"),
                             "--nbest", str(tmp / "nbest.tsv")] + option, capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "error" in result.stderr


def test_console_script_is_installed(random_gold_and_nbest):
    _, _, tmp = random_gold_and_nbest
    result = subprocess.run(["nbest-eval", "score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "nbest.tsv"),
                             "--json", "--metrics", "map"], capture_output=True, text=True,
                            env={"PATH": f"{sys.prefix}/bin"})
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout)) == {"map", "n_prompts", "num_q", "num_ret", "num_rel", "num_rel_ret",
                                              "signatures"}


def synthetic_nbest(gold, size, seed=0):
    rng = random.Random(seed)
    nbest = {}
    for prompt in gold:
        texts = [t for t, _ in prompt.translations]
        hyps = [Hyp(rng.choice(texts) if rng.random() < 0.5 else rng.choice(texts) + " x") for _ in range(size)]
        nbest[prompt.id] = hyps
    return nbest


def test_real_gold_ranking_measures_equal_trec_eval(staple_dir):
    gold = read_gold(staple_dir / GOLD_FILE)
    nbest = synthetic_nbest(gold, 20)
    qrels = {p.id: {norm(t): 1 for t, _ in p.translations} for p in gold}
    run = {}
    for pid, hyps in nbest.items():
        keys = list(dict.fromkeys(norm(h.text) for h in hyps))
        run[pid] = {k: float(len(keys) - i) for i, k in enumerate(keys)}
    measures = {"map": "map", "rr": "recip_rank", "p10": "P_10", "rprec": "Rprec"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(measures.values())).evaluate(run)
    values = Scorer(list(measures)).score(gold, nbest).values
    for key, trec_key in measures.items():
        expected = sum(q[trec_key] for q in per_query.values()) / len(gold)
        assert values[key] == pytest.approx(expected, abs=1e-9), key


def test_real_aws_baseline(staple_dir, capsys):
    assert main(["score", "--gold", str(staple_dir / GOLD_FILE), "--nbest", str(staple_dir / AWS_FILE), "--json",
                 "--metrics", "wf1,precision,map,bleu_1x1"]) == 0
    values = json.loads(capsys.readouterr().out)
    assert values["n_prompts"] == 500
    # a 1-best system: precision is the share of prompts whose one answer is valid, and AP = 1/R there
    gold = read_gold(staple_dir / GOLD_FILE)
    nbest = read_nbest(staple_dir / AWS_FILE, gold)
    valid = [p for p in gold if norm(nbest[p.id][0].text) in {norm(t) for t, _ in p.translations}]
    assert values["precision"] == pytest.approx(len(valid) / 500)
    assert values["map"] == pytest.approx(sum(1 / len({norm(t) for t, _ in p.translations}) for p in valid) / 500)
    assert 0.1 < values["wf1"] < 0.5 and 0 < values["bleu_1x1"] <= 100
