"""select's score cache, entry by entry: entries bound to the content they scored (swapped, copied
and forged entries are re-scored with a warning naming the file; statistics and list sizes no list
can give are refused), a settled checkpoint hashed once, and --link-best re-checking its pick
(deleted or replaced after scoring: refused, nothing written). Each class of case is a table. The
cache file as a whole (damaged, shared, edited behind its back): test_select_files.py."""

import json
import logging
import math
import os
from pathlib import Path

import pytest
from cases import random_case

from nbest_eval import Gold, GoldPrompt, Hyp, InputError, Scorer
from nbest_eval.cli import main
from nbest_eval.formats import read_gold, read_nbest, write_gold, write_nbest
from nbest_eval.selection.cache_entry import CacheEntry, relevance
from nbest_eval.selection.checkpoint_files import _seal, content_digest, link_best
from nbest_eval.stats import Stats

CHECKPOINTS = ["checkpoint1.tsv", "checkpoint2.tsv", "checkpoint3.tsv", "checkpoint4.tsv"]
PICK = "checkpoint3.tsv"  # the best: its lists keep the most valid translations


@pytest.fixture
def tree(tmp_path):
    """gold.txt and runs/: four 'checkpoints' keeping 0, 2, 4 and 1 valid translations per prompt."""
    gold, _ = random_case(4, n_prompts=12, nil_prompts=False)
    write_gold(gold, tmp_path / "gold.txt")
    (tmp_path / "runs").mkdir()
    for name, keep in zip(CHECKPOINTS, (0, 2, 4, 1)):
        lists = {p.id: [Hyp(t, -i) for i, (t, _) in enumerate(p.translations[:keep])] + [Hyp("zz", -9.0)]
                 for p in gold}
        write_nbest(lists, tmp_path / "runs" / name, "tsv")
    return tmp_path


def select(tmp, capsys, *extra):
    """select over runs/ with the cache tmp/cache.json: (status, JSON table or None, stderr)."""
    status = main(["select", "--from-nbest", str(tmp / "runs"), "--gold", str(tmp / "gold.txt"), "--metrics",
                   "map,bleu_1x1", "--cache", str(tmp / "cache.json"), "--json", *map(str, extra)])
    out, err = capsys.readouterr()
    return status, (json.loads(out) if status == 0 else None), err


def true_values(tmp, name, **options):
    """The file's values, scored afresh (the scorer is tested against trec_eval and sacrebleu elsewhere)."""
    gold = read_gold(str(tmp / "gold.txt"))
    return Scorer(["map", "bleu_1x1"], **options).score(gold, read_nbest(tmp / "runs" / name, gold)).values


# --- class 6: an entry is bound to the content (and settings) it scored ------------------------------------

def entries_by_checkpoint(tmp):
    """The cache's (key, entry) of each checkpoint, told by its MAP (distinct in the fixture)."""
    entries = json.loads((tmp / "cache.json").read_text())
    found = {}
    for key, raw in entries.items():
        scores = raw.get("entry", raw)  # the entry itself, wherever the cache keeps its binding
        name = next(n for n in CHECKPOINTS if scores["values"]["map"] == true_values(tmp, n)["map"])
        found[name] = key
    return entries, found


def write_entries(tmp, entries):
    (tmp / "cache.json").write_text(json.dumps(entries))


def swap(tmp):
    entries, key = entries_by_checkpoint(tmp)
    a, b = key["checkpoint1.tsv"], key[PICK]
    entries[a], entries[b] = entries[b], entries[a]
    write_entries(tmp, entries)
    return {"checkpoint1.tsv", PICK}


def swap_scores(tmp):
    """Only the scores of two entries swapped, each left beside its own content digest and settings."""
    entries, key = entries_by_checkpoint(tmp)
    a, b = entries[key["checkpoint1.tsv"]], entries[key[PICK]]
    a["entry"], b["entry"] = b["entry"], a["entry"]
    write_entries(tmp, entries)
    return {"checkpoint1.tsv", PICK}


def copy_over(tmp):
    entries, key = entries_by_checkpoint(tmp)
    entries[key["checkpoint4.tsv"]] = entries[key[PICK]]  # checkpoint4 would be reported best
    write_entries(tmp, entries)
    return {"checkpoint4.tsv"}


def forge(name, change):
    """checkpoint ``name``'s entry with each prompt's ``map`` statistic changed by ``change``, its
    values recomputed from its statistics and its seal from those, as a careful forger would (only
    the bounds can catch it)."""
    def edit(tmp):
        entries, key = entries_by_checkpoint(tmp)
        raw = entries[key[name]]
        scores = raw.get("entry", raw)
        scorer = Scorer(["map", "bleu_1x1"])
        column = scorer.stat_names.index("map")
        for number, row in enumerate(scores["stats"]):
            row[column] = change(number, row[column])
        total = sum((Stats.from_vector(scorer.stat_names, row) for row in scores["stats"]), scorer.zero())
        scores["values"] = scorer.values(total)
        raw["seal"] = _seal(raw["content"], raw["settings"], scores)
        write_entries(tmp, entries)
        return {name}
    return edit


def other_settings(tmp):
    """checkpoint3's entry scored with --bleu-tokenize char put where its 13a entry was."""
    _, key = entries_by_checkpoint(tmp)
    select_char = main(["select", "--from-nbest", str(tmp / "runs"), "--gold", str(tmp / "gold.txt"), "--metrics",
                        "map,bleu_1x1", "--cache", str(tmp / "cache.json"), "--json", "--bleu-tokenize", "char"])
    assert select_char == 0
    entries = json.loads((tmp / "cache.json").read_text())
    char_entry = next(v for k, v in entries.items() if k not in key.values() and
                      v.get("entry", v)["values"]["map"] == true_values(tmp, PICK)["map"])
    entries[key[PICK]] = char_entry
    write_entries(tmp, entries)
    return {PICK}


CACHE_FORGERIES = {
    "two checkpoints' entries swapped": swap,
    "two checkpoints' scores swapped, digests left in place": swap_scores,
    "the best entry copied over another": copy_over,
    "forged: AP 50 on every prompt (MAP 50), values and seal recomputed": forge("checkpoint1.tsv", lambda i, ap: 50.0),
    "forged: AP -0.5 on a prompt, values and seal recomputed": forge(PICK, lambda i, ap: -0.5 if i == 0 else ap),
    "forged: AP 1.5 on a prompt, values and seal recomputed":
        forge("checkpoint1.tsv", lambda i, ap: 1.5 if i == 3 else ap),
    "the same file's entry of other settings (--bleu-tokenize char)": other_settings,
}


@pytest.mark.parametrize("edit", CACHE_FORGERIES.values(), ids=CACHE_FORGERIES.keys())
def test_a_swapped_or_forged_entry_is_scored_again_naming_the_file(tree, capsys, caplog, monkeypatch, edit):
    from nbest_eval.cli import select_source

    assert select(tree, capsys)[0] == 0
    rescored = edit(tree)
    capsys.readouterr()
    read = []
    monkeypatch.setattr(select_source, "read_nbest",
                        lambda path, *a: read.append(os.path.basename(path)) or read_nbest(path, *a))
    with caplog.at_level(logging.WARNING):
        status, table, err = select(tree, capsys)
    assert status == 0, err
    assert set(read) == rescored and len(read) == len(rescored)
    for system in table["systems"]:
        assert system["values"] == pytest.approx(true_values(tree, system["name"]), rel=1e-12), system["name"]
    assert table["best"] == PICK
    for name in rescored:
        assert f"{tree / 'runs' / name} is not its scores" in caplog.text, caplog.text
    read.clear()
    assert select(tree, capsys)[0] == 0 and read == []  # the entries were repaired


# --- class 6: statistics that no list can give, for every kind of measure ---------------------------------

SCORER = Scorer(["map", "wf1", "pref_spearman", "coverage", "num_ret", "bleu_1x1"])


def set_stat(name, value, prompt=0):
    return lambda row, at: row.__setitem__(at(name), value(row[at(name)]) if callable(value) else value)


def bleu_correct_above_total(row, at):
    row[at("bleu_1x1:correct_1")] = row[at("bleu_1x1:total_1")] + 1


def bleu_total_not_length(row, at):
    row[at("bleu_1x1:total_1")] += 1
    row[at("bleu_1x1:correct_1")] = 0


def pref_without_count(row, at):
    row[at("pref_spearman")], row[at("pref_spearman:n")] = 0.3, 0.0


OUT_OF_RANGE = {  # a change to the first prompt's row -> what the error names
    "map 1.5": (set_stat("map", 1.5), "map"),
    "map -0.25": (set_stat("map", -0.25), "map"),
    "wf1 1.01": (set_stat("wf1", 1.01), "wf1"),
    "pref_spearman 1.5 where it is defined": (
        lambda row, at: (row.__setitem__(at("pref_spearman:n"), 1.0), row.__setitem__(at("pref_spearman"), 1.5)),
        "pref_spearman"),
    "pref_spearman 0.3 where its count says undefined": (pref_without_count, "pref_spearman"),
    "pref_spearman counted twice in one prompt": (set_stat("pref_spearman:n", 2.0), "pref_spearman"),
    "coverage 2": (lambda row, at: (row.__setitem__(at("known:n"), 1.0), row.__setitem__(at("coverage"), 2.0)),
                   "coverage"),
    "num_ret -1": (set_stat("num_ret", -1.0), "num_ret"),
    "num_ret 2.5": (set_stat("num_ret", 2.5), "num_ret"),
    "bleu: more matches than n-grams": (bleu_correct_above_total, "bleu_1x1"),
    "bleu: unigrams other than the length": (bleu_total_not_length, "bleu_1x1"),
    "bleu: a negative length": (lambda row, at: [row.__setitem__(at(f"bleu_1x1:{s}"), -4.0)
                                                 for s in ("sys_len", "total_1")], "bleu_1x1"),
    "bleu: a fractional reference length": (set_stat("bleu_1x1:ref_len", lambda v: v + 0.5), "bleu_1x1"),
}


@pytest.mark.parametrize("change, named", OUT_OF_RANGE.values(), ids=OUT_OF_RANGE.keys())
def test_statistics_out_of_their_measures_range_are_refused(change, named):
    gold, nbest = random_case(7, n_prompts=6, nil_prompts=False)
    good = CacheEntry.of(SCORER.score(gold, nbest, keep_per_prompt=True), SCORER).as_json()
    relevant = relevance(SCORER, gold)
    assert CacheEntry.verified(good, SCORER, relevant).values == good["values"]
    stats = [list(row) for row in good["stats"]]
    change(stats[0], SCORER.stat_names.index)
    total = sum((Stats.from_vector(SCORER.stat_names, row) for row in stats), SCORER.zero())
    forged = {**good, "stats": stats, "values": SCORER.values(total)}  # consistent: only the range tells
    with pytest.raises(ValueError, match=rf"prompt 1: .*{named}"):
        CacheEntry.verified(forged, SCORER, relevant)


# --- class 7: --link-best re-checks its pick before linking -------------------------------------------------

def deleted(pick: Path):
    pick.unlink()  # as save_total_limit and --keep-last-epochs do in a running training


def replaced(pick: Path):
    new = pick.with_name("incoming.tmp")
    new.write_bytes(pick.read_bytes().replace(b"zz", b"yy"))
    os.replace(new, pick)  # as a save writes a new file and renames it over the old one


def rewritten_same_size_and_time(pick: Path):
    stat = pick.stat()
    pick.write_bytes(pick.read_bytes().replace(b"zz", b"yy"))
    os.utime(pick, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def a_link_to_another(pick: Path):
    pick.unlink()
    pick.symlink_to(pick.with_name("checkpoint1.tsv"))


PICK_CHANGES = {  # what happens to the pick after it was scored -> the error (None: it is still the pick)
    "deleted": (deleted, "no longer exists"),
    "replaced by a new file": (replaced, "not the content that was scored"),
    "rewritten to the same size and mtime": (rewritten_same_size_and_time, "not the content that was scored"),
    "replaced by a link to another checkpoint": (a_link_to_another, "not the content that was scored"),
    "touched, content unchanged": (lambda pick: os.utime(pick, ns=(1, 1)), None),
}


@pytest.mark.parametrize("change, message", PICK_CHANGES.values(), ids=PICK_CHANGES.keys())
@pytest.mark.parametrize("cache", ["--cache", "--no-cache"])
def test_link_best_rechecks_its_pick_and_writes_all_or_nothing(tree, capsys, monkeypatch, change, message, cache):
    from nbest_eval.selection import scoring as select_module

    real_select = select_module.select

    def select_then_change(*args, **kwargs):  # after every checkpoint was scored, before the outputs
        change(tree / "runs" / PICK)
        return real_select(*args, **kwargs)

    monkeypatch.setattr(select_module, "select", select_then_change)
    link, table = tree / "best.tsv", tree / "table.json"
    argv = ["select", "--from-nbest", tree / "runs", "--gold", tree / "gold.txt", "--metrics", "map",
            "--link-best", link, "--save", table] + (["--cache", tree / "c.json"] if cache == "--cache" else [cache])
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    if message is None:
        assert status == 0 and os.path.realpath(link) == str(tree / "runs" / PICK) and table.exists(), err
        return
    assert status == 2 and f"{tree / 'runs' / PICK}: " in err and message in err and "Traceback" not in err, err
    assert "nothing written" in err, err
    assert not os.path.lexists(link) and not table.exists()
    assert not [p for p in tree.iterdir() if p.name.endswith(".partial")]


def test_link_best_rechecks_a_checkpoint_directory(tmp_path):
    """An HF checkpoint is a directory: a file in it changed after scoring is a changed pick."""
    pick = tmp_path / "checkpoint-500"
    pick.mkdir()
    (pick / "config.json").write_text("{}")
    (pick / "model.safetensors").write_bytes(b"weights")
    scored = content_digest(str(pick))
    (pick / "model.safetensors").write_bytes(b"w31ghts")
    with pytest.raises(InputError, match="checkpoint-500: .*not the content that was scored"):
        link_best(str(pick), str(tmp_path / "best"), scored=scored)
    assert not os.path.lexists(tmp_path / "best")
    (pick / "model.safetensors").write_bytes(b"weights")
    assert link_best(str(pick), str(tmp_path / "best"), scored=scored) == "link"


#: a key of every registered measure: its pattern with numbers in place of its parameters
EVERY_MEASURE = [spec.pattern.replace("{k}", "3").replace("{x}x{y}", "2x3").replace("{b}", "2").replace("{r}", "0.5")
                 for spec in __import__("nbest_eval.metrics", fromlist=["REGISTRY"]).REGISTRY]


@pytest.mark.parametrize("seed", range(6))
def test_every_measure_of_real_lists_is_within_its_range(seed):
    """The ranges hold for what the scorer computes (random lists, nil prompts and duplicates included),
    and no registered measure is left without one."""
    gold, nbest = random_case(seed, n_prompts=25)
    scorer = Scorer(EVERY_MEASURE, known_threshold=0.2 if seed % 2 else None)
    entry = CacheEntry.of(scorer.score(gold, nbest, keep_per_prompt=True), scorer)
    assert CacheEntry.verified(entry.as_json(), scorer, relevance(scorer, gold)) == entry


def test_every_measure_of_the_aws_baseline_is_within_its_range(staple_dir, en_pt_gold):
    nbest = read_nbest(staple_dir / "dev.en_pt.aws_baseline.pred.txt", en_pt_gold)
    scorer = Scorer(EVERY_MEASURE)
    entry = CacheEntry.of(scorer.score(en_pt_gold, nbest, keep_per_prompt=True), scorer)
    assert CacheEntry.verified(entry.as_json(), scorer, relevance(scorer, en_pt_gold)) == entry


# --- the checks cost no second read of a checkpoint ---------------------------------------------------------

def rewrite_same_size_and_time(path: Path):
    stat = path.stat()
    path.write_bytes(b"W" * stat.st_size)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


DIGEST_READS = {  # (seconds since the file's last change, what happens between digests) -> files hashed
    "settled and unchanged: hashed once": (60, lambda path: None, 1),
    "settled, rewritten to the same size and mtime: hashed again": (60, rewrite_same_size_and_time, 2),
    "settled, replaced by a rename: hashed again": (60, lambda path: os.replace(path.with_name("other"), path), 2),
    "changed within a clock tick or two of the hashing: hashed each time": (0, lambda path: None, 3),
}


@pytest.mark.parametrize("age, between, hashed", DIGEST_READS.values(), ids=DIGEST_READS.keys())
def test_a_settled_checkpoint_is_hashed_once_while_unchanged(tmp_path, monkeypatch, age, between, hashed):
    import hashlib
    import time

    path = tmp_path / "checkpoint1.pt"
    path.write_bytes(b"weights" * 1000)
    (tmp_path / "other").write_bytes(b"others!" * 1000)
    real_now, real_sha256, calls = time.time_ns(), hashlib.sha256, []
    monkeypatch.setattr(time, "time_ns", lambda: real_now + age * 10 ** 9)
    monkeypatch.setattr(hashlib, "sha256", lambda *a: calls.append(1) or real_sha256(*a))
    first = content_digest(str(path))
    between(path)
    digests = [content_digest(str(path)) for _ in range(2)]
    assert len(calls) == hashed
    assert digests[0] == digests[1] == real_sha256(path.read_bytes()).hexdigest()
    assert (first == digests[0]) == (hashed != 2)


# -- per-prompt bounds of a cached entry --------------------------------------------------------------

def test_a_cached_ap_above_what_the_list_can_reach_is_refused():
    """One hypothesis, a valid one, against 3 valid translations: AP = (1/1) / 3 = 1/3 (hand-computed),
    the most a 1-long list can reach; an entry saying AP 1.0 (its values made to agree) is refused."""
    from nbest_eval.stats import Stats

    scorer = Scorer(["map"])
    gold = Gold([GoldPrompt("p1", "a cat", (("um gato", 0.5), ("uma gata", 0.3), ("o gato", 0.2)))])
    good = CacheEntry.of(scorer.score(gold, {"p1": ["um gato"]}, keep_per_prompt=True), scorer).as_json()
    assert relevance(scorer, gold) == [3]
    assert math.isclose(good["values"]["map"], 1 / 3)
    assert CacheEntry.verified(good, scorer, relevance(scorer, gold)).values == good["values"]
    row = list(good["stats"][0])
    row[scorer.stat_names.index("map")] = 1.0
    forged = {**good, "stats": [row], "values": scorer.values(Stats.from_vector(scorer.stat_names, row))}
    assert forged["values"]["map"] == 1.0
    with pytest.raises(ValueError, match=r"prompt 1: its map 1 is above what 1 hypotheses can reach with 3 valid "
                                         r"translations, min\(1, 3\) / 3"):
        CacheEntry.verified(forged, scorer, relevance(scorer, gold))


def test_a_cached_nbest_size_of_over_40_digits_is_said_so():
    """read_cache reads a 400-digit integer as infinite: the message says so, not 'inf'."""
    scorer = Scorer(["map"])
    gold = Gold([GoldPrompt("p1", "a cat", (("um gato", 1.0),))])
    good = CacheEntry.of(scorer.score(gold, {"p1": ["um gato"]}, keep_per_prompt=True), scorer).as_json()
    with pytest.raises(ValueError, match=r"^nbest_size of over 40 digits \(or Infinity\) is not the longest list, 1$"):
        CacheEntry.verified({**good, "nbest_size": math.inf}, scorer, relevance(scorer, gold))
