"""The files `select` reads and writes (and the output rules `compare` and `ablate` share with it):
its own files and links in the input folder, the cache file (shared, damaged, edited behind its
back; single entries: test_select_cache.py), things that are no checkpoint, special files (FIFOs,
devices) as inputs, and outputs that cannot be written or would replace an input. Each class of
case is a table."""

import hashlib
import importlib.util
import json
import logging
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cases import random_case

from nbest_eval import Hyp, InputError, Scorer
from nbest_eval.cli import main
from nbest_eval.files.output import all_or_nothing, write_text
from nbest_eval.formats import read_gold, read_nbest, write_gold, write_nbest
from nbest_eval.selection.checkpoint_files import ScoreCache

CHECKPOINTS = ["checkpoint1.tsv", "checkpoint2.tsv", "checkpoint3.tsv", "checkpoint10.tsv", "checkpoint11.tsv"]


def needs(module):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"needs {module}")


@pytest.fixture
def world(tmp_path):
    """gold.txt and runs/: five 'checkpoints' whose lists keep a growing share of valid
    translations, then fewer (checkpoint3 is best), and the gold for comparisons."""
    gold, _ = random_case(4, n_prompts=15, nil_prompts=False)
    write_gold(gold, tmp_path / "gold.txt")
    (tmp_path / "runs").mkdir()
    for name, keep in zip(CHECKPOINTS, (0, 2, 4, 3, 1)):
        lists = {p.id: [Hyp(t, -i) for i, (t, _) in enumerate(p.translations[:keep])] + [Hyp("zz", -9.0)]
                 for p in gold}
        write_nbest(lists, tmp_path / "runs" / name, "tsv")
    return tmp_path


def select(tmp, *extra, capsys=None):
    """Run select over runs/ (JSON table); returns (status, table or None, stderr)."""
    status = main(["select", "--from-nbest", str(tmp / "runs"), "--gold", str(tmp / "gold.txt"), "--metrics", "map",
                   "--json", *map(str, extra)])
    out, err = capsys.readouterr() if capsys else ("", "")
    return status, (json.loads(out) if status == 0 and out else None), err


def digest(root: Path):
    """Every file and link under root (hidden ones too), by content or target."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = Path(folder, name)
            found[str(path.relative_to(root))] = os.readlink(path) if path.is_symlink() else \
                hashlib.sha256(path.read_bytes()).hexdigest()
    return found


# --- own files, links and other names of inputs inside the --from-nbest folder -----------------------------

def gold_inside(tmp):
    (tmp / "runs" / "reference.txt").write_bytes((tmp / "gold.txt").read_bytes())
    return ["--gold", tmp / "runs" / "reference.txt"]  # the later --gold wins


def gold_linked_inside(tmp):
    (tmp / "runs" / "ref.out").symlink_to(tmp / "gold.txt")
    return []


def second_names(tmp):
    (tmp / "runs" / "alias.tsv").symlink_to(tmp / "runs" / "checkpoint2.tsv")
    os.link(tmp / "runs" / "checkpoint1.tsv", tmp / "runs" / "hard.tsv")
    return []


OWN_FILES = {
    "--link-best inside, run twice with --force": lambda tmp: ["--link-best", tmp / "runs" / "best.tsv", "--force"],
    "--save inside, run twice with --force": lambda tmp: ["--save", tmp / "runs" / "table.txt", "--force"],
    "--cache inside with an n-best name": lambda tmp: ["--cache", tmp / "runs" / "cache.jsonl"],
    "--save inside with an n-best name, run twice with --force": lambda tmp: ["--save", tmp / "runs" / "table.tsv",
                                                                              "--force"],
    "the gold inside under an n-best name": gold_inside,
    "a link to the gold inside": gold_linked_inside,
    "a link and a hard link to systems": second_names,
}


@pytest.mark.parametrize("setup", OWN_FILES.values(), ids=OWN_FILES.keys())
def test_select_never_reads_its_own_files_or_second_names_as_systems(world, capsys, setup):
    extra = setup(world)
    for _ in range(3):
        status, table, err = select(world, *extra, capsys=capsys)
        assert status == 0, err
        assert [s["name"] for s in table["systems"]] == CHECKPOINTS
        assert table["best"] == "checkpoint3.tsv"
    link = world / "runs" / "best.tsv"
    if link.is_symlink():  # a link to the file itself: never to itself, never to a link
        assert os.readlink(link) == str(world / "runs" / "checkpoint3.tsv")


def test_link_best_resolves_a_link_target(tmp_path):
    from nbest_eval.selection.checkpoint_files import link_best

    (tmp_path / "real.pt").write_bytes(b"w")
    (tmp_path / "alias.pt").symlink_to(tmp_path / "real.pt")
    link_best(str(tmp_path / "alias.pt"), str(tmp_path / "best.pt"))
    assert os.readlink(tmp_path / "best.pt") == str(tmp_path / "real.pt")
    link_best(str(tmp_path / "best.pt"), str(tmp_path / "best.pt"), force=True)  # "the best is the link itself"
    assert os.readlink(tmp_path / "best.pt") == str(tmp_path / "real.pt")


# --- the cache: keyed on content, damaged entries are misses, shared runs lose nothing -----------------------

CACHE = ".nbest-eval-select-cache.json"


def map_of(tmp, name):
    gold = read_gold(str(tmp / "gold.txt"))
    return Scorer(["map"]).score(gold, read_nbest(tmp / "runs" / name, gold)).values["map"]


def same_size_and_time(tmp):
    """Replace checkpoint2's hypotheses with x's of the same length; keep its size and mtime."""
    path = tmp / "runs" / "checkpoint2.tsv"
    stat = path.stat()
    lines = path.read_text().splitlines()
    fields = [line.split("\t") for line in lines[1:]]
    path.write_text("\n".join([lines[0]] + ["\t".join(f[:3] + ["x" * len(f[3].encode())]) for f in fields]) + "\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    return "checkpoint2.tsv"


def damage_entry(value):
    """Replace checkpoint3's cache entry ``entry`` with ``value(entry)`` (or ``value(entry, checkpoint1's)``),
    left bound to checkpoint3's content (swapped bindings: test_select_cache.py)."""
    def damage(tmp):
        cache = tmp / "runs" / CACHE
        entries = json.loads(cache.read_text())
        key = next(k for k, v in entries.items() if v["entry"]["values"]["map"] == map_of(tmp, "checkpoint3.tsv"))
        first = next(v["entry"] for v in entries.values()
                     if v["entry"]["values"]["map"] == map_of(tmp, "checkpoint1.tsv"))
        entry = entries[key]["entry"]
        entries[key]["entry"] = value(entry, first) if value.__code__.co_argcount == 2 else value(entry)
        cache.write_text(json.dumps(entries))
        return "checkpoint3.tsv"
    return damage


CACHE_EDITS = {
    "untouched": lambda tmp: None,
    "edited to the same size and mtime": same_size_and_time,
    "entry of the wrong type": damage_entry(lambda entry: [entry]),
    "entry missing the metric": damage_entry(lambda entry: {**entry, "values": {}}),
    "entry with a string value": damage_entry(lambda entry: {**entry, "values": {"map": "0.5"}}),
    "entry with an infinite value": damage_entry(lambda entry: {**entry, "values": {"map": 1e999}}),
    "entry without per-prompt statistics": damage_entry(lambda entry: {"values": entry["values"]}),
    "entry with a prompt's statistics missing": damage_entry(lambda entry: {**entry, "stats": entry["stats"][1:]}),
    "entry with an infinite statistic": damage_entry(
        lambda entry: {**entry, "stats": [[1e999] * len(entry["stats"][0])] + entry["stats"][1:]}),
    # issue 22, class 2: entries that are of the right shape but not what their statistics give
    "a value edited to be the best": damage_entry(lambda entry: {**entry, "values": {"map": 0.999}}),
    "another checkpoint's statistics": damage_entry(lambda entry, other: {**entry, "stats": other["stats"]}),
    "another checkpoint's whole entry but its list size": damage_entry(
        lambda entry, other: {**other, "nbest_size": entry["nbest_size"]}),
    "nbest_size 999999": damage_entry(lambda entry: {**entry, "nbest_size": 999999}),
    "nbest_size of 50 digits": damage_entry(lambda entry: {**entry, "nbest_size": 10 ** 50}),
    "statistics of 1e308": damage_entry(lambda entry: {**entry, "stats": [[1e308] * len(r) for r in entry["stats"]]}),
    "all-zero statistics": damage_entry(lambda entry: {**entry, "stats": [[0] * len(r) for r in entry["stats"]]}),
    "a prompt counted twice": damage_entry(lambda entry: {**entry, "stats": [[2] + r[1:] for r in entry["stats"]]}),
    "a boolean statistic": damage_entry(lambda entry: {**entry, "stats": [[True] + r[1:] for r in entry["stats"]]}),
    "a fractional list size": damage_entry(
        lambda entry: {**entry, "stats": [r[:3] + [r[3] + 0.5] + r[4:] for r in entry["stats"]]}),
    "an extra field": damage_entry(lambda entry: {**entry, "trusted": True}),
}


@pytest.mark.parametrize("edit", CACHE_EDITS.values(), ids=CACHE_EDITS.keys())
def test_cache_rescores_exactly_what_changed(world, capsys, monkeypatch, caplog, edit):
    from nbest_eval.cli import select_source as select_module

    assert select(world, capsys=capsys)[0] == 0
    changed = edit(world)
    read = []
    monkeypatch.setattr(select_module, "read_nbest",
                        lambda path, *a: read.append(os.path.basename(path)) or read_nbest(path, *a))
    with caplog.at_level(logging.WARNING):
        status, table, err = select(world, capsys=capsys)
    assert status == 0, err
    assert read == ([changed] if changed else [])
    assert [s["values"]["map"] for s in table["systems"]] == [map_of(world, n) for n in CHECKPOINTS]
    assert ("scoring it again" in caplog.text) == (changed == "checkpoint3.tsv")
    assert (f"{CHECKPOINTS[2]} is not its scores" in caplog.text) == (changed == "checkpoint3.tsv")
    status, _, _ = select(world, capsys=capsys)  # the entry was repaired: nothing is read again
    assert status == 0 and read == ([changed] if changed else [])


CACHE_FILES = {  # a --cache file that no entry can be read from: refused, named, left as it is
    "nested 100,000 deep": "[" * 100000 + "]" * 100000,
    "a NUL byte": '{"a": \x00}',
    "a JSON list": "[]",
    "an object of other keys": '{"settings": {"a": 1}}',
    "NaN keys": '{"NaN": NaN}',
    "a 10,000-digit number": '{"' + "z" * 64 + '": ' + "9" * 10000 + "}",
}


@pytest.mark.parametrize("text", CACHE_FILES.values(), ids=CACHE_FILES.keys())
def test_a_cache_file_that_is_no_select_cache_is_refused(world, capsys, text):
    (world / "c.json").write_text(text)
    before = digest(world)
    status, _, err = select(world, "--cache", world / "c.json", capsys=capsys)
    assert status == 2 and f"{world / 'c.json'}:" in err and "Traceback" not in err, err
    assert digest(world) == before


def test_interleaved_caches_keep_both_entries(tmp_path):
    (tmp_path / "a.pt").write_bytes(b"a")
    (tmp_path / "b.pt").write_bytes(b"b")
    first, second = (ScoreCache(str(tmp_path / "cache.json"), {}) for _ in range(2))  # both read it empty
    first.get_or_score(str(tmp_path / "a.pt"), lambda: {"values": {"map": 0.1}, "stats": [], "nbest_size": 1})
    second.get_or_score(str(tmp_path / "b.pt"), lambda: {"values": {"map": 0.2}, "stats": [], "nbest_size": 1})
    entries = json.loads((tmp_path / "cache.json").read_text()).values()
    assert sorted(v["entry"]["values"]["map"] for v in entries) == [0.1, 0.2]


def _select_in_child(barrier, argv):
    barrier.wait()
    os._exit(main(argv))


def test_concurrent_selects_sharing_a_cache_lose_no_entries(world):
    gold, _ = random_case(4, n_prompts=15, nil_prompts=False)
    argvs = []
    for run in ("a", "b"):
        folder = world / run
        folder.mkdir()
        for i in range(1, 31):
            write_nbest({p.id: [Hyp(t) for t, _ in p.translations[: (i + len(run)) % 5]] + [Hyp(run)] for p in gold},
                        folder / f"checkpoint{i}.tsv", "tsv")
        argvs.append(["select", "--from-nbest", str(folder), "--gold", str(world / "gold.txt"), "--metrics", "map",
                      "--cache", str(world / "shared.json"), "--json"])
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    children = [context.Process(target=_select_in_child, args=(barrier, argv)) for argv in argvs]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
    assert [child.exitcode for child in children] == [0, 0]
    assert len(json.loads((world / "shared.json").read_text())) == 60


# --- clear errors, nothing written: bad checkpoints, unwritable outputs, outputs that are inputs ------------

def not_a_fairseq_checkpoint(tmp):
    (tmp / "ck").mkdir()
    (tmp / "ck" / "checkpoint1.pt").write_text("not a checkpoint\n")
    (tmp / "data").mkdir()
    return ["select", "--fairseq-data", tmp / "data", "--gold", tmp / "gold.txt", tmp / "ck" / "checkpoint*.pt"], \
        tmp / "ck" / "checkpoint1.pt"


#: what an HF checkpoint without the callback's settings file is generated with: every setting given
HF_SETTINGS = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "5", "--lenpen", "1"]


def broken_hf_checkpoint(config):
    def make(tmp):
        folder = tmp / "out" / "checkpoint-500"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(config)
        return ["select", "--hf", *HF_SETTINGS, "--gold", tmp / "gold.txt", tmp / "out" / "checkpoint-*"], folder
    return make


def compare(outputs):
    def make(tmp):
        runs = [tmp / "runs" / name for name in CHECKPOINTS[:3]]
        return ["compare", "--gold", tmp / "gold.txt", "--nbest", *runs, "--metrics", "p1",
                "--write-scores", tmp / "scores.json", *outputs(tmp)], outputs(tmp)[-1]
    return make


def output_is_input(command, option, which):
    def make(tmp):
        target = which(tmp)
        if command == "select":
            return ["select", "--from-nbest", tmp / "runs", "--gold", tmp / "gold.txt", option, target, "--force"], \
                target
        runs = [tmp / "runs" / name for name in CHECKPOINTS[:3]]
        return [command, "--gold", tmp / "gold.txt", "--nbest", *runs, option, target, "--force"], target
    return make


def gold_hard_link(tmp):
    os.link(tmp / "gold.txt", tmp / "gold-copy.txt")
    return tmp / "gold-copy.txt"


REFUSALS = {
    "--fairseq-data missing": (lambda tmp: (["select", "--fairseq-data", tmp / "nodata", "--gold", tmp / "gold.txt",
                                             tmp / "runs"], tmp / "nodata"), "no such directory"),
    "fairseq: a text file named checkpoint1.pt": pytest.param(not_a_fairseq_checkpoint, "checkpoint",
                                                              marks=needs("fairseq")),
    "hf: config.json is not JSON": pytest.param(broken_hf_checkpoint('{"model_type": "t5", broken'), "config",
                                                marks=needs("transformers")),
    "hf: config.json with a wrong type": pytest.param(broken_hf_checkpoint('{"model_type": "t5", "d_model": "x"}'),
                                                      "d_model", marks=needs("transformers")),
    "compare: a plot's folder is missing": (compare(lambda tmp: ["--scatter", "map,p1", tmp / "gone" / "f.png"]),
                                            "does not exist"),
    "compare: two outputs name one file": (compare(lambda tmp: ["--heatmap", tmp / "scores.json"]), "the same file"),
    "compare: --write-scores is the gold": (output_is_input("compare", "--write-scores", lambda tmp: tmp / "gold.txt"),
                                            "even with --force"),
    "compare: --heatmap is a system": (output_is_input("compare", "--heatmap",
                                                       lambda tmp: tmp / "runs" / CHECKPOINTS[1]), "even with --force"),
    "ablate: --plot is the gold by a hard link": (output_is_input("ablate", "--plot", gold_hard_link),
                                                  "even with --force"),
    "select: --save is the gold": (output_is_input("select", "--save", lambda tmp: tmp / "gold.txt"),
                                   "even with --force"),
    "select: --cache is the gold": (output_is_input("select", "--cache", lambda tmp: tmp / "gold.txt"),
                                    "even with --force"),
    "select: --link-best is a system": (output_is_input("select", "--link-best",
                                                        lambda tmp: tmp / "runs" / CHECKPOINTS[0]),
                                          "even with --force"),
}


@pytest.mark.parametrize("make, message", REFUSALS.values(), ids=REFUSALS.keys())
def test_refusals_are_clear_and_write_nothing(world, capsys, make, message):
    argv, named = make(world)
    before = digest(world)
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"{named}:" in err and message in err, err
    assert "Traceback" not in err, err
    assert digest(world) == before


def fifo(tmp):
    os.mkfifo(tmp / "n.fifo")
    return tmp / "n.fifo"


def zero_in_checkpoint(tmp):
    (tmp / "checkpoint-1").mkdir()
    (tmp / "checkpoint-1" / "config.json").write_text("{}")
    (tmp / "checkpoint-1" / "model.safetensors").symlink_to("/dev/zero")
    return tmp / "checkpoint-1" / "model.safetensors"


SPECIAL = {  # select's inputs -> the file named in the error
    "a FIFO with no writer": lambda tmp: (["--from-nbest", tmp / "a.tsv", fifo(tmp)], tmp / "n.fifo"),
    "/dev/zero": lambda tmp: (["--from-nbest", tmp / "a.tsv", "/dev/zero"], "/dev/zero"),
    "a link to /dev/zero in an HF checkpoint": lambda tmp: (["--hf", *HF_SETTINGS, zero_in_checkpoint(tmp).parent],
                                                            tmp / "checkpoint-1" / "model.safetensors"),
}


@pytest.mark.parametrize("make", SPECIAL.values(), ids=SPECIAL.keys())
def test_select_refuses_special_files_at_once(command_dir, make):
    inputs, named = make(command_dir)
    result = subprocess.run([sys.executable, "-m", "nbest_eval", "select", *map(str, inputs), "--gold",
                             str(command_dir / "gold.txt"), "--no-cache"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"{named}: not a regular file (a pipe, a FIFO or a device)" in result.stderr, result.stderr


def test_compare_leaves_nothing_when_a_later_write_fails(world, capsys, monkeypatch):
    from matplotlib.figure import Figure

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", disk_full)
    argv, _ = compare(lambda tmp: ["--heatmap", tmp / "h.png"])(world)
    before = digest(world)
    assert main([str(a) for a in argv]) == 2
    assert "h.png: cannot write: No space left on device" in capsys.readouterr().err
    assert digest(world) == before and not any(p.name.endswith(".partial") for p in world.iterdir())


def test_a_failure_while_placing_outputs_removes_those_already_placed(tmp_path):
    with pytest.raises(InputError, match="b.txt: already exists"):
        with all_or_nothing():
            write_text(tmp_path / "a.txt", "a")
            write_text(tmp_path / "b.txt", "b")
            assert os.listdir(tmp_path) != [] and not (tmp_path / "a.txt").exists()  # staged, not placed
            (tmp_path / "b.txt").write_text("someone else's")
    assert sorted(os.listdir(tmp_path)) == ["b.txt"] and (tmp_path / "b.txt").read_text() == "someone else's"


def test_compare_and_ablate_report_prompt_coverage(world, capsys):
    gold_path = world / "gold.txt"
    partial = world / "partial.tsv"
    lines = (world / "runs" / "checkpoint3.tsv").read_text().splitlines(keepends=True)
    ids = list(dict.fromkeys(line.split("\t")[0] for line in lines[1:]))
    partial.write_text(lines[0] + "".join(line for line in lines[1:] if line.split("\t")[0] not in ids[:4]))
    runs = [world / "runs" / "checkpoint2.tsv", world / "runs" / "checkpoint3.tsv"]
    for command in ("compare", "ablate"):
        assert main([command, "--gold", str(gold_path), "--nbest", *map(str, runs), "--json"]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out)["coverage"] == {"checkpoint2": 15, "checkpoint3": 15}
        assert "checkpoint2 15, checkpoint3 15" in err and "warning" not in err
        assert main([command, "--gold", str(gold_path), "--nbest", *map(str, runs[:1] + [partial]), "--json"]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out)["coverage"] == {"checkpoint2": 15, "partial": 11}
        assert "warning: the systems have hypotheses for different prompts" in err


def test_an_output_that_is_a_device_is_refused_even_with_force():
    from nbest_eval.files.writable import check_outputs

    with pytest.raises(InputError, match="not a regular file .*give -"):
        check_outputs({"--per-prompt": "/dev/null"}, [], overwrite=True)


# --- issue 22, class 1: an output is never an input, however the input was found ----------------------------

def _glob(tmp):
    return str(tmp / "runs" / "checkpoint*.tsv")


def _hard_link_elsewhere(tmp):
    os.link(tmp / "runs" / "checkpoint2.tsv", tmp / "elsewhere.json")
    return tmp / "elsewhere.json"


def _fake_checkpoints(tmp, hf=False):
    """Three 'checkpoints' (never loaded: every refusal comes before) and fairseq's best alias."""
    (tmp / "ck").mkdir()
    (tmp / "data").mkdir()
    for i in (1, 2, 3):
        if hf:
            (tmp / "ck" / f"checkpoint-{i}").mkdir()
            (tmp / "ck" / f"checkpoint-{i}" / "config.json").write_text("{}")
        else:
            (tmp / "ck" / f"checkpoint{i}.pt").write_bytes(bytes([i]) * 10)
    if not hf:
        (tmp / "ck" / "checkpoint_best.pt").write_bytes(b"best" * 4)
    source = ["--hf", tmp / "ck" / "checkpoint-*"] if hf else ["--fairseq-data", tmp / "data", tmp / "ck" / "*.pt"]
    return ["select", *source, "--gold", tmp / "gold.txt", "--average", "2"]


def _average(out, extra, hf=False):
    return lambda tmp: (_fake_checkpoints(tmp, hf) + ["--average-out", out(tmp), *extra(tmp)], out(tmp))


FOUND_INPUTS = {
    "folder: --save is an n-best file in it": (lambda tmp: [tmp / "runs"], "--save",
                                               lambda tmp: tmp / "runs" / "checkpoint2.tsv", "even with --force"),
    "folder: --cache is an n-best file in it": (lambda tmp: [tmp / "runs"], "--cache",
                                                lambda tmp: tmp / "runs" / "checkpoint1.tsv", "even with --force"),
    "folder: --link-best is an n-best file in it": (lambda tmp: [tmp / "runs"], "--link-best",
                                                    lambda tmp: tmp / "runs" / "checkpoint3.tsv", "even with --force"),
    "glob: --save is a file it finds": (lambda tmp: [_glob(tmp)], "--save",
                                        lambda tmp: tmp / "runs" / "checkpoint3.tsv", "even with --force"),
    "glob: --cache is a file it finds": (lambda tmp: [_glob(tmp)], "--cache",
                                         lambda tmp: tmp / "runs" / "checkpoint10.tsv", "even with --force"),
    "glob: --save is a hard link elsewhere to a file it finds": (lambda tmp: [_glob(tmp)], "--save",
                                                                 _hard_link_elsewhere, "even with --force"),
    "--cache is a JSON file that is no select cache": (
        lambda tmp: [tmp / "runs"], "--cache", lambda tmp: (tmp / "notes.json").write_text('{"a": 1}\n') and
        tmp / "notes.json", "not a select cache"),
    "--cache is a table, not a cache": (
        lambda tmp: [tmp / "runs"], "--cache", lambda tmp: (tmp / "t.json").write_text('{"systems": []}\n') and
        tmp / "t.json", "not a select cache"),
}


@pytest.mark.parametrize("inputs, option, target, message", FOUND_INPUTS.values(), ids=FOUND_INPUTS.keys())
def test_an_output_found_as_an_input_is_refused_even_with_force(world, capsys, inputs, option, target, message):
    path = target(world)
    before = digest(world)
    status = main([str(a) for a in ["select", "--from-nbest", *inputs(world), "--gold", world / "gold.txt",
                                    "--metrics", "map", option, path, "--force"]])
    err = capsys.readouterr().err
    assert status == 2 and f"{path}:" in err and message in err and "Traceback" not in err, err
    assert digest(world) == before


AVERAGE_OUTPUTS = {
    "fairseq: --average-out is a checkpoint the glob finds": _average(lambda tmp: tmp / "ck" / "checkpoint2.pt",
                                                                      lambda tmp: ["--force"]),
    "fairseq: --average-out is the best alias the glob finds": _average(lambda tmp: tmp / "ck" / "checkpoint_best.pt",
                                                                        lambda tmp: ["--force"]),
    "fairseq: --average-out is --save": _average(lambda tmp: tmp / "avg.pt", lambda tmp: ["--save", tmp / "avg.pt"]),
    "fairseq: --average-out is --cache": _average(lambda tmp: tmp / "avg.pt", lambda tmp: ["--cache", tmp / "avg.pt"]),
    "fairseq: --average-out is --link-best": _average(lambda tmp: tmp / "avg.pt",
                                                      lambda tmp: ["--link-best", tmp / "avg.pt"]),
    "hf: --average-out is a checkpoint the glob finds": _average(lambda tmp: tmp / "ck" / "checkpoint-2",
                                                                 lambda tmp: ["--force"], hf=True),
    "hf: --average-out (an earlier average) holds --save": _average(
        lambda tmp: tmp / "avg", lambda tmp: ["--save", tmp / "avg" / "t.json", "--force"], hf=True),
    "hf: --average-out (an earlier average) holds --cache": _average(
        lambda tmp: tmp / "avg", lambda tmp: ["--cache", tmp / "avg" / "c", "--force"], hf=True),
}


@pytest.mark.parametrize("make", AVERAGE_OUTPUTS.values(), ids=AVERAGE_OUTPUTS.keys())
def test_average_out_is_checked_against_inputs_and_outputs_before_any_work(world, capsys, make):
    argv, named = make(world)
    (world / "avg").mkdir()  # an earlier average: the HF cases' --save and --cache are in it
    (world / "avg" / "config.json").write_text("{}")
    before = digest(world)
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err, err
    assert f"{named}:" in err or f"{named}'s" in err, err
    assert any(m in err for m in ("even with --force", "name the same file", "would replace")), err
    assert digest(world) == before
