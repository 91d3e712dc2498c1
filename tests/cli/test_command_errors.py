"""What every command refuses, as a clear error and with every file left as it was: an input it would
overwrite or misuse (the gold as an n-best file, one stream read twice), a value it cannot take (rank
gaps, strict numbers, an output it cannot write), absurd values and unwritable places. Every command
runs in this process."""

import hashlib

import pytest
from cases import THREE_PROMPT_GOLD, score_values

from nbest_eval.cli import main


def contents(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


GOLD_COPY = "gold-copy.txt:2: this looks like a STAPLE gold file (translation|weight lines), not predictions"
SELECT = ["select", "--from-nbest", "{t}/a.tsv", "{t}/b.tsv", "--gold", "{t}/gold.txt"]
REFUSED = {  # arguments ({t}: the folder) -> what the error says
    "select --save is a named input, --force": (SELECT + ["--save", "{t}/b.tsv", "--force", "--no-cache"],
                                                "b.tsv: --save is also an input"),
    "select --cache is a named input": (SELECT + ["--cache", "{t}/b.tsv"], "b.tsv: --cache is also an input"),
    "select the gold named as a checkpoint": (SELECT[:4] + ["{t}/gold-link.txt"] + SELECT[4:] + ["--no-cache"],
                                              "--gold and CHECKPOINT name the same file"),
    "score the gold as the n-best file": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/gold-link.txt"],
                                          "--gold and --nbest name the same file"),
    "compare the gold among the systems": (["compare", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                            "{t}/gold.txt"], "--gold and --nbest name the same file"),
    "ablate the gold among the systems": (["ablate", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                           "{t}/gold.txt"], "--gold and --nbest name the same file"),
    "score a copy of the gold": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/gold-copy.txt"], GOLD_COPY),
    "score a copy of the gold as staple": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/gold-copy.txt",
                                            "--format", "staple"], GOLD_COPY),
    "compare a copy of the gold": (["compare", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                    "{t}/gold-copy.txt"], GOLD_COPY),
    "select a copy of the gold": (SELECT[:4] + ["{t}/gold-copy.txt"] + SELECT[4:] + ["--no-cache"], GOLD_COPY),
    "select --link-best with no best checkpoint": (SELECT + ["--metric", "pref_spearman", "--link-best",
                                                             "{t}/best.tsv", "--no-cache"],
                                                   "--link-best: no checkpoint has a value for --metric pref_spearman"),
}


@pytest.mark.parametrize("argv, message", REFUSED.values(), ids=REFUSED.keys())
def test_inputs_are_never_overwritten_nor_misused(command_dir, capsys, argv, message):
    before = contents(command_dir)
    assert main([a.format(t=command_dir) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert contents(command_dir) == before


TSV_GAPS = "p1\t1\t\tx\np1\t5\t\ty\n"
REFUSALS = [  # (name, arguments with {dir}, n-best text, message); nothing is written
    ("gold and n-best from one stdin", ["score", "--gold", "-", "--nbest", "-"], None,
     "--gold and --nbest both read standard input, which can be read only once"),
    ("output is the n-best file", ["convert", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--to", "tsv",
                                   "{dir}/n.txt", "--force"], TSV_GAPS,
     "OUT is also an input; refusing to overwrite it, even with --force"),
    ("output is the gold", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--per-prompt",
                            "{dir}/gold.txt", "--force"], TSV_GAPS, "--per-prompt is also an input"),
    ("trec output is the gold", ["convert", "--gold", "{dir}/gold.txt.qrels", "--nbest", "{dir}/n.txt", "--to",
                                 "trec", "{dir}/gold.txt", "--force"], TSV_GAPS, "OUT.qrels is also an input"),
    ("missing folder", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--per-prompt",
                        "{dir}/nope/p.jsonl"], TSV_GAPS, "--per-prompt: its folder"),
    ("trec to stdout", ["convert", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--to", "trec", "-"],
     TSV_GAPS, "--to trec writes two files"),
    ("rank gaps", ["convert", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--to", "jsonl",
                   "{dir}/out.jsonl"], TSV_GAPS, "n.txt:2: prompt 'p1' has rank 5 but no rank 2"),
    ("strict numbers", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt"], "p1\t1\t+3\tx\n",
     "n.txt:1: score '+3' is not a number"),
    ("truncated line", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt"], "H-0\t-1\n",
     "n.txt:1: truncated H- line"),
    ("S- line of another prompt", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt"],
     "S-0\thi\nH-0\t-1\tolá\n", "n.txt:1: S-0 line 'hi' is not gold prompt 0"),
    ("-inf to JSON", ["convert", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--to", "jsonl",
                      "{dir}/out.jsonl"], "p1\t1\t-inf\tx\n", "score -inf cannot be written to a JSON file"),
    ("bad --max-line-bytes", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--max-line-bytes",
                              "1_0"], TSV_GAPS, "expected an integer >= 1"),
]


@pytest.mark.parametrize("args, nbest, message", [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS])
def test_commands_refuse_up_front_and_write_nothing(tmp_path, capsys, args, nbest, message):
    (tmp_path / "gold.txt").write_text(THREE_PROMPT_GOLD)
    (tmp_path / "gold.txt.qrels").write_text(THREE_PROMPT_GOLD)
    if nbest is not None:
        (tmp_path / "n.txt").write_text(nbest)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    try:
        status = main([a.format(dir=tmp_path) for a in args])
    except SystemExit as exit:  # argparse refuses an option's value
        status = exit.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_rank_gaps_allowed_on_request(tmp_path, capsys):
    (tmp_path / "gold.txt").write_text(THREE_PROMPT_GOLD)
    (tmp_path / "n.tsv").write_text(TSV_GAPS)
    assert main(["score", "--gold", str(tmp_path / "gold.txt"), "--nbest", str(tmp_path / "n.tsv"), "--json",
                 "--metrics", "map", "--allow-rank-gaps"]) == 0
    assert score_values(capsys.readouterr().out) == {"map": 0.0, "n_prompts": 3, "num_q": 2, "num_ret": 2,
                                                     "num_rel": 4, "num_rel_ret": 0}  # x, y: neither valid


TRACEBACKS = {  # arguments -> message (argparse refusals exit through SystemExit)
    "--max-line-bytes beyond any memory": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                            "--max-line-bytes", "9" * 30], "is too large: at most"),
    "a metric key of 5000 digits": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv", "--metrics",
                                     "p" + "9" * 5000], "a number of more than 9 digits is out of range"),
    "synth into a path under a file": (["synth", "{t}/gold.txt/corpus"],
                                       "gold.txt/corpus: OUT_DIR: cannot be created"),
    "synth into a folder that cannot be made": (["synth", "/proc/nbest-eval/corpus"], "cannot create this folder"),
    "synth with a training set beyond memory": (["synth", "{t}/c", "--train-pairs", "9" * 15],
                                                "at most 10000000 training pairs"),
    "compare: a --scatter measure not scored": (["compare", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                                 "{t}/gold.txt.tsv", "--metrics", "p1", "--scatter", "map,wf1",
                                                 "{t}/s.png"], "--scatter: wf1 is not scored"),
    "compare: an unknown --reference": (["compare", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                         "{t}/gold.txt.tsv", "--reference", "mapp"], "--reference: unknown metric"),
}


@pytest.mark.parametrize("argv, message", TRACEBACKS.values(), ids=TRACEBACKS.keys())
def test_absurd_values_and_unwritable_places_are_errors(command_dir, capsys, argv, message):
    (command_dir / "gold.txt.tsv").write_text("p1\t1\t-1\toi\n")  # compare's second system (never read: refused first)
    try:
        status = main([a.format(t=command_dir) for a in argv])
    except SystemExit as exit:
        status = exit.code
    err = capsys.readouterr().err
    assert status == 2 and message in err and "Traceback" not in err, err
    assert not (command_dir / "c").exists() and not (command_dir / "s.png").exists()
