"""Subword and tokenized corpora through the fairseq plugin, end to end with the real tools.

Three pipelines, each trained once (module-scoped fixtures) and checked by the same tests:

- ``sentencepiece``: a unigram model trained here (``sentencepiece`` Python API) on the synthetic
  corpus, pieces in the binarized data, ``--nbest-remove-bpe sentencepiece``;
- ``subword_nmt``: BPE codes learned here (``subword_nmt.learn_bpe`` / ``apply_bpe``), ``@@ ``
  continuation marks, ``--nbest-remove-bpe subword_nmt``;
- ``moses``: the synthetic corpus with punctuation and an apostrophe added to some sentences,
  tokenized (and escaped) by sacremoses' MosesTokenizer ('en' sources, 'pt' targets), ``--nbest-detok moses``.

Every pipeline encodes train and valid, runs ``fairseq-preprocess --joined-dictionary`` and
``fairseq-train`` with the installed user dir (``nbest-eval user-dir``) against the *raw-text* gold.
The tests check that each valid line, decoded by the plugin, is exactly its gold prompt (so matching
by STAPLE id works), that the valid lines log the n-best metrics, that the saved lists hold decoded
text, and that ``nbest-eval score`` re-scores them to the logged values. CPU only, one thread.
"""

import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, List, Optional, Tuple

import pytest
from cases import SYNTH_CORPUS

pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

import torch  # noqa: E402

torch.set_num_threads(1)

from nbest_eval.data import Gold, GoldPrompt, InputError, prompt_id  # noqa: E402
from nbest_eval.fairseq.checkpoints import load_ensemble  # noqa: E402
from nbest_eval.fairseq.generation import TextDecoder, plan_dataset  # noqa: E402
from nbest_eval.formats import read_gold  # noqa: E402
from nbest_eval.formats.staple import format_gold  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`

REPO = Path(__file__).resolve().parents[2]
TINY_ARGS = shlex.split(" ".join(line for line in (REPO / "configs" / "tiny_transformer.args").read_text().splitlines()
                                 if not line.lstrip().startswith("#")))
METRICS = ["map", "rr", "bleu_1x1", "bleu_100x100", "wf1"]  # the args file's --nbest-metrics
VALID_PROMPTS = SYNTH_CORPUS["valid_prompts"]  # conftest's synth, the corpus trained on
EPOCHS = 3
BEAM = 8  # the args file's --nbest-beam
# smaller batches, no dropout or label smoothing: enough for the tiny model to find some gold
# translations within three short epochs, however the text is encoded
FAST = ["--max-tokens", "250", "--dropout", "0", "--label-smoothing", "0"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
PIPELINES = ["sentencepiece", "subword_nmt", "moses"]


# -- running the tools -------------------------------------------------------------------------------

def command(name):
    """A fairseq console script of this interpreter's environment."""
    script = Path(sys.executable).with_name(name)
    if script.exists():
        return [str(script)]
    module = {"fairseq-train": "fairseq_cli.train", "fairseq-preprocess": "fairseq_cli.preprocess"}[name]
    return [sys.executable, "-c", f"import sys; from {module} import cli_main; sys.exit(cli_main())"]


def run(cmd, log: Path) -> str:
    with open(log, "w") as out:
        proc = subprocess.run(list(map(str, cmd)), stdout=out, stderr=subprocess.STDOUT, env=ENV)
    text = log.read_text()
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd[:3]))} ... failed ({proc.returncode}):\n{text[-4000:]}")
    return text


def valid_records(log: str):
    """The valid lines of a --log-format json log, values as floats."""
    return [{k: float(v) for k, v in json.loads(line[line.index("{"):]).items()}
            for line in log.splitlines() if '"valid_loss"' in line and "{" in line]


def logged(value: float, reference: float) -> bool:
    """fairseq's json log prints 6 significant digits ('{:g}')."""
    return abs(value - reference) <= 5e-6 * max(1.0, abs(reference))


@pytest.fixture(scope="module")
def user_dir() -> str:
    """The installed user dir, as a user gets it: `nbest-eval user-dir`."""
    out = subprocess.run([sys.executable, "-m", "nbest_eval", "user-dir"], capture_output=True, text=True,
                         env=ENV, check=True).stdout.strip()
    assert Path(out, "__init__.py").is_file(), out
    return out


# -- one pipeline: raw corpus -> encoded files -> fairseq-preprocess -> fairseq-train -----------------

Pairs = List[Tuple[str, str]]


@dataclass
class Pipeline:
    """A raw-text corpus and gold, how its text is encoded for fairseq, and how the plugin undoes it."""

    name: str
    train: Pairs
    valid: Pairs  # raw sources are the gold prompts, in gold order
    gold: Gold
    encode_src: Callable[[str], str]
    encode_tgt: Callable[[str], str]
    remove_bpe: Optional[str] = None  # --nbest-remove-bpe
    detok: str = "space"  # --nbest-detok
    langs: Tuple[str, str] = ("src", "tgt")  # file suffixes, --source-lang/--target-lang
    markers: Tuple[str, ...] = ()  # what encoded text holds and decoded text must not


def train_pipeline(root: Path, pipe: Pipeline, user_dir: str) -> SimpleNamespace:
    """Encode, binarize and train ``pipe``; the run's directories, log and valid records."""
    src, tgt = pipe.langs
    text = root / "text"
    text.mkdir()
    gold_path = text / "valid.gold.txt"  # the raw-text gold, never encoded
    gold_path.write_text(format_gold(pipe.gold, str(gold_path)))
    encoded = {}
    for split, pairs in (("train", pipe.train), ("valid", pipe.valid)):
        for lang, column, encode in ((src, 0, pipe.encode_src), (tgt, 1, pipe.encode_tgt)):
            lines = [encode(pair[column]) for pair in pairs]
            encoded[split, lang] = lines
            (text / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines))
    bin_dir = root / "bin"
    run(command("fairseq-preprocess") + [
        "--source-lang", src, "--target-lang", tgt, "--trainpref", text / "train", "--validpref", text / "valid",
        "--destdir", bin_dir, "--joined-dictionary", "--workers", "1"], root / "preprocess.log")
    save = root / "checkpoints"
    plugin = ["--nbest-detok", pipe.detok] + (["--nbest-remove-bpe", pipe.remove_bpe] if pipe.remove_bpe else [])
    start = time.perf_counter()
    log = run(command("fairseq-train") + [
        bin_dir, "--user-dir", user_dir, *TINY_ARGS, "--source-lang", src, "--target-lang", tgt,
        "--nbest-gold", gold_path, "--save-dir", save, "--nbest-save-dir", save / "nbest",
        "--max-epoch", EPOCHS, "--no-epoch-checkpoints", *FAST, *plugin], root / "train.log")
    return SimpleNamespace(pipe=pipe, root=root, bin=bin_dir, gold=gold_path, save=save, nbest=save / "nbest",
                           encoded=encoded, log=log, valid=valid_records(log), seconds=time.perf_counter() - start)


def joint_text(synth) -> List[str]:
    """What the subword models learn from: train.src + train.tgt."""
    return [src for src, _ in synth.train] + [tgt for _, tgt in synth.train]


@pytest.fixture(scope="module")
def sentencepiece_run(synth, user_dir, tmp_path_factory):
    spm = pytest.importorskip("sentencepiece")
    model = io.BytesIO()
    # vocabulary 150 of the ~180 pieces this corpus allows: about half the words are split
    spm.SentencePieceTrainer.train(sentence_iterator=iter(joint_text(synth)), model_writer=model, vocab_size=150,
                                   model_type="unigram", character_coverage=1.0, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())

    def encode(line):
        return " ".join(sp.encode(line, out_type=str))

    pipe = Pipeline("sentencepiece", synth.train, synth.valid, synth.gold, encode, encode,
                    remove_bpe="sentencepiece", markers=("\u2581",))
    return train_pipeline(tmp_path_factory.mktemp("sentencepiece"), pipe, user_dir)


@pytest.fixture(scope="module")
def subword_nmt_run(synth, user_dir, tmp_path_factory):
    pytest.importorskip("subword_nmt")
    from subword_nmt.apply_bpe import BPE
    from subword_nmt.learn_bpe import learn_bpe

    codes = io.StringIO()
    # 150 merges: about two thirds of the source lines hold a split word, every target line does
    learn_bpe(io.StringIO("".join(line + "\n" for line in joint_text(synth))), codes, 150)
    codes.seek(0)
    bpe = BPE(codes)  # separator '@@'

    def encode(line):
        return bpe.process_line(line)

    pipe = Pipeline("subword_nmt", synth.train, synth.valid, synth.gold, encode, encode,
                    remove_bpe="subword_nmt", markers=("@@",))
    return train_pipeline(tmp_path_factory.mktemp("subword_nmt"), pipe, user_dir)


#: (source prefix, target prefix) and end marks added to the synthetic sentences for the Moses run
PREFIXES = [("", ""), ("well, ", "nu, "), ("let's see: ", "vidu: ")]
END_MARKS = ["", ".", "?", "!"]


def punctuate(index: int, src: str, tgt: str) -> Tuple[str, str]:
    (src_head, tgt_head), end = PREFIXES[index % 3], END_MARKS[(index // 3) % 4]
    return src_head + src + end, tgt_head + tgt + end


def punctuate_gold(gold: Gold) -> Gold:
    prompts = []
    for index, prompt in enumerate(gold):
        text, _ = punctuate(index, prompt.text, "")
        translations = tuple((punctuate(index, "", t)[1], w) for t, w in prompt.translations)
        prompts.append(GoldPrompt(prompt_id(text), text, translations))
    return Gold(prompts)


@pytest.fixture(scope="module")
def moses_run(synth, user_dir, tmp_path_factory):
    sacremoses = pytest.importorskip("sacremoses")
    tokenizers = {lang: sacremoses.MosesTokenizer(lang) for lang in ("en", "pt")}

    def tokenizer(lang):
        # fairseq's moses tokenizer's defaults: aggressive dash splits, HTML escaping (' -> &apos;)
        return lambda line: tokenizers[lang].tokenize(line, aggressive_dash_splits=True, return_str=True, escape=True)

    gold = punctuate_gold(synth.gold)
    valid = [punctuate(i, src, tgt) for i, (src, tgt) in enumerate(synth.valid)]
    assert [p.text for p in gold] == [src for src, _ in valid]
    train = [punctuate(i, src, tgt) for i, (src, tgt) in enumerate(synth.train)]
    pipe = Pipeline("moses", train, valid, gold, tokenizer("en"), tokenizer("pt"), detok="moses",
                    langs=("en", "pt"), markers=("&apos;", " ,", " ?", " !", " :"))
    return train_pipeline(tmp_path_factory.mktemp("moses"), pipe, user_dir)


@pytest.fixture(scope="module", params=PIPELINES)
def pipeline_run(request):
    """Each pipeline's trained run in turn."""
    return request.getfixturevalue(f"{request.param}_run")


def tsv_rows(path: Path):
    """prompt id -> [(rank, score, hypothesis)] of a saved TSV list."""
    lists = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        pid, rank, score, hyp = line.split("\t")
        lists.setdefault(pid, []).append((int(rank), float(score), hyp))
    return lists


def saved_stem(pipeline_run, record) -> Path:
    return pipeline_run.nbest / f"valid.epoch{int(record['epoch'])}.update{int(record['valid_num_updates'])}"


# -- the tests ------------------------------------------------------------------------------------------

def test_the_encoding_changes_the_text(pipeline_run):
    """The binarized data holds subword units (or Moses tokens), not the gold's text."""
    pipe = pipeline_run.pipe
    for (split, lang), lines in pipeline_run.encoded.items():
        raw = [pair[0 if lang == pipe.langs[0] else 1] for pair in (pipe.train if split == "train" else pipe.valid)]
        changed = sum(enc != text for enc, text in zip(lines, raw))
        assert changed >= len(lines) // 2, (split, lang, changed, len(lines))
        assert any(marker in line for line in lines for marker in pipe.markers), (split, lang)


def test_valid_lines_decode_to_their_gold_prompts(pipeline_run):
    """The plugin's decoding of each binarized valid source is exactly its gold prompt: every line is
    matched by STAPLE id, in gold order, none left out."""
    pipe = pipeline_run.pipe
    assert (f"translation_nbest: 'valid' against {pipeline_run.gold}: {VALID_PROMPTS} prompts matched by id ("
            in pipeline_run.log), pipeline_run.log[-3000:]
    assert "named by no line" not in pipeline_run.log
    _, _, task = load_ensemble(str(pipeline_run.save / "checkpoint_last.pt"))
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    decode = TextDecoder(task.source_dictionary, pipe.remove_bpe, pipe.detok, pipe.langs[0])
    decoded = [decode(dataset[i]["source"]) for i in range(len(dataset))]
    prompts = [p.text for p in pipe.gold]
    assert decoded == prompts
    assert task.plan.rows == {i: prompt_id(text) for i, text in enumerate(prompts)}
    assert [p.id for p in task.plan.gold] == [p.id for p in pipe.gold]


def test_valid_lines_log_the_nbest_metrics(pipeline_run):
    assert [int(r["epoch"]) for r in pipeline_run.valid] == list(range(1, EPOCHS + 1)), pipeline_run.log[-3000:]
    for record in pipeline_run.valid:
        for key in METRICS + ["nbest_prompts", "nbest_gen_s", "nbest_score_s"]:
            assert f"valid_{key}" in record, key
        assert record["valid_nbest_prompts"] == VALID_PROMPTS
    # gold translations are raw text: only decoded hypotheses can match them
    last = pipeline_run.valid[-1]
    assert last["valid_map"] > 0 and last["valid_wf1"] > 0, last
    print(f"\n{pipeline_run.pipe.name}: MAP by epoch {[r['valid_map'] for r in pipeline_run.valid]}, "
          f"BLEU 100x100 {[r['valid_bleu_100x100'] for r in pipeline_run.valid]}; training {pipeline_run.seconds:.0f}s")


def test_saved_lists_hold_decoded_text(pipeline_run):
    """The saved lists (what was scored, see the next test) hold plain text: no subword marks or Moses
    tokens, and some hypotheses are gold translations that only decoding can spell."""
    pipe = pipeline_run.pipe
    assert [p.text for p in read_gold(pipeline_run.nbest / "valid.gold.txt")] == [p.text for p in pipe.gold]
    gold_texts = {p.id: {t for t, _ in p.translations} for p in pipe.gold}
    vocabulary = {w for _, tgt in pipe.train for w in tgt.split()}
    in_gold = whole_words = total = 0
    decoded_hits = set()  # gold translations found whose encoded form differs: only decoding gives them
    for record in pipeline_run.valid:
        lists = tsv_rows(Path(f"{saved_stem(pipeline_run, record)}.tsv"))
        assert list(lists) == [p.id for p in pipe.gold]
        for pid, hyps in lists.items():
            assert [rank for rank, _, _ in hyps] == list(range(1, BEAM + 1))
            for _, _, hyp in hyps:
                assert not any(marker in hyp for marker in pipe.markers), (pid, hyp)
                assert hyp == hyp.strip() and "  " not in hyp, hyp
                total += 1
                in_gold += hyp in gold_texts[pid]
                whole_words += set(hyp.split()) <= vocabulary
                if hyp in gold_texts[pid] and pipe.encode_tgt(hyp) != hyp:
                    decoded_hits.add(hyp)
    # decoded, a hypothesis is a gold translation (some) or at least made of the corpus's words (most)
    assert in_gold > 0 and whole_words > total // 2, (in_gold, whole_words, total)
    assert decoded_hits, f"no gold translation found that the {pipe.name} encoding changes"


def test_saved_lists_rescore_to_the_logged_values(pipeline_run):
    """`nbest-eval score --json` on each validation's saved list gives the values logged on its valid line."""
    gold = pipeline_run.nbest / "valid.gold.txt"
    for record in pipeline_run.valid:
        stem = saved_stem(pipeline_run, record)
        proc = subprocess.run([sys.executable, "-m", "nbest_eval", "score", "--gold", gold, "--nbest", f"{stem}.tsv",
                               "--metrics", ",".join(METRICS), "--json"],
                              capture_output=True, text=True, env=ENV)
        assert proc.returncode == 0, proc.stderr
        rescored = json.loads(proc.stdout)
        saved = json.loads(Path(f"{stem}.json").read_text())
        assert rescored["n_prompts"] == VALID_PROMPTS
        for key in METRICS:
            assert logged(record[f"valid_{key}"], rescored[key]), (stem.name, key, record[f"valid_{key}"], rescored)
            assert abs(saved[key] - rescored[key]) < 1e-9, (stem.name, key)
    assert len(list(pipeline_run.nbest.glob("*.tsv"))) == len(pipeline_run.valid) == EPOCHS


def test_without_moses_detokenization_the_sources_are_not_prompts(moses_run):
    """The same binarized sources decoded without --nbest-detok moses: line 2 ('well , ...') is
    tokenized text, no gold prompt, and the plugin's start-up check names it (no silent zeros)."""
    _, _, task = load_ensemble(str(moses_run.save / "checkpoint_last.pt"))
    task.load_dataset("valid")
    line = moses_run.encoded["valid", "en"][1]
    assert line.startswith("well , ")
    with pytest.raises(InputError, match=re.escape(f"line 2 of the 'valid' split, {line!r}, is not a prompt")):
        plan_dataset(task.dataset("valid"), task.source_dictionary, moses_run.pipe.gold, detok="space", lang="en")


def test_real_staple_prompts_round_trip_through_moses_and_the_plugin(staple_dir, tmp_path):
    """The real STAPLE en_pt dev gold (when present; no training): every English prompt (apostrophes,
    commas, question marks), Moses-tokenized and escaped, binarized by fairseq-preprocess and decoded by
    the plugin with --nbest-detok moses is exactly its prompt, so all 500 are matched in gold order; so
    is each prompt's most frequent Portuguese translation (accents), decoded as hypotheses are."""
    sacremoses = pytest.importorskip("sacremoses")
    from fairseq.data import Dictionary
    from fairseq.tasks.translation import load_langpair_dataset

    gold = read_gold(staple_dir / "dev.en_pt.2020-02-20.gold.txt")
    pairs = {"en": [p.text for p in gold], "pt": [p.translations[0][0] for p in gold]}
    for lang, lines in pairs.items():
        tok = sacremoses.MosesTokenizer(lang)
        encoded = [tok.tokenize(line, aggressive_dash_splits=True, return_str=True, escape=True) for line in lines]
        (tmp_path / f"valid.{lang}").write_text("".join(line + "\n" for line in encoded), encoding="utf-8")
    assert "&apos;" in (tmp_path / "valid.en").read_text(encoding="utf-8")
    bin_dir = tmp_path / "bin"
    run(command("fairseq-preprocess") + [
        "--source-lang", "en", "--target-lang", "pt", "--trainpref", tmp_path / "valid", "--validpref",
        tmp_path / "valid", "--destdir", bin_dir, "--joined-dictionary", "--workers", "1"], tmp_path / "preprocess.log")
    dictionary = Dictionary.load(str(bin_dir / "dict.en.txt"))
    dataset = load_langpair_dataset(str(bin_dir), "valid", "en", dictionary, "pt", dictionary, combine=False,
                                    dataset_impl=None, upsample_primary=1, left_pad_source=True,
                                    left_pad_target=False, max_source_positions=1024, max_target_positions=1024)
    plan = plan_dataset(dataset, dictionary, gold, detok="moses", lang="en")
    assert len(plan) == len(gold) and plan.rows == {i: p.id for i, p in enumerate(gold)}
    decode = TextDecoder(dictionary, None, "moses", "pt")
    assert [decode(dataset[i]["target"]) for i in range(len(dataset))] == pairs["pt"]
