"""Averaging the best checkpoints (``nbest-eval select --average K``): fairseq checkpoints and Hugging
Face checkpoint directories. Each average is checked against the element-wise mean computed here
with torch, loaded by the framework's own loader and used to generate; bad requests are refused
before anything is written, and a checkpoint that would run code is refused without running it.

The choice and refusal tests need no framework; the others import one (marked ``training``).
"""

import json
import os
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from nbest_eval.data import InputError
from nbest_eval.selection.averaging import best_k, check_request

torch = pytest.importorskip("torch")


class Payload:
    """Unpickling this runs a shell command (what a crafted checkpoint would carry)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def mean(tensors):
    """The reference: the element-wise mean, in float64, of what the checkpoints hold."""
    return torch.stack([t.double() for t in tensors]).mean(0)


# -- choosing and refusing (no framework) ---------------------------------------------------------

def test_best_k_is_best_first_and_ties_go_to_the_later_checkpoint():
    paths = ["c1", "c2", "c3", "c4", "c5"]
    assert best_k(paths, [0.1, 0.5, None, 0.5, 0.3], 3) == ["c4", "c2", "c5"]
    assert best_k(paths, [0.1, 0.5, float("nan"), 0.5, 0.3], 2, maximize=False) == ["c1", "c5"]
    with pytest.raises(InputError, match="--average 5: only 4 of the 5 checkpoints have a value"):
        best_k(paths, [0.1, 0.5, None, 0.5, 0.3], 5)
    with pytest.raises(InputError, match=r"\(>= 1\), got 0"):
        best_k(paths, [0.1] * 5, 0)


def test_requests_that_cannot_be_done_are_refused_before_any_loading(tmp_path):
    a, b = tmp_path / "checkpoint1.pt", tmp_path / "checkpoint2.pt"
    a.write_bytes(b"x")
    b.write_bytes(b"y")
    os.link(a, tmp_path / "second_name.pt")
    out = tmp_path / "avg.pt"
    with pytest.raises(InputError, match="no checkpoints to average"):
        check_request([], out, False)
    with pytest.raises(InputError, match="no such checkpoint file"):
        check_request([a, tmp_path / "checkpoint3.pt"], out, False)
    with pytest.raises(InputError, match="listed twice"):
        check_request([a, b, a], out, False)
    with pytest.raises(InputError, match="the same file as .*checkpoint1.pt: it would weigh twice"):
        check_request([a, tmp_path / "second_name.pt"], out, False)
    with pytest.raises(InputError, match="the averaged checkpoint is also an input.*even if asked to"):
        check_request([a, b], b, True)
    with pytest.raises(InputError, match="its folder .* does not exist"):
        check_request([a, b], tmp_path / "nowhere" / "avg.pt", False)
    out.write_bytes(b"mine")
    with pytest.raises(InputError, match="already exists"):
        check_request([a, b], out, False)
    assert check_request([a, b], out, True) == [str(a), str(b)]


def test_a_directory_output_never_touches_an_input_or_a_user_directory(tmp_path):
    inputs = [tmp_path / "run" / "checkpoint-1", tmp_path / "run" / "checkpoint-2"]
    for path in inputs:
        path.mkdir(parents=True)
    for out in (inputs[0], inputs[0] / "avg", tmp_path / "run"):
        with pytest.raises(InputError, match="is an input, inside one or holds one"):
            check_request(inputs, out, True, directory=True)
    home = tmp_path / "home"
    home.mkdir()
    with pytest.raises(InputError, match="already exists"):
        check_request(inputs, home, False, directory=True)
    with pytest.raises(InputError, match="not a model directory.*even if asked to"):
        check_request(inputs, home, True, directory=True)
    (home / "config.json").write_text("{}")
    check_request(inputs, home, True, directory=True)


# -- fairseq ----------------------------------------------------------------------------------------

# parameters that differ in dtype, name or shape (issue 22, class 4)

def _hand_made_checkpoint(path, **model):
    torch.save({"model": model, "cfg": {"model": {"_name": "tiny_hand_made"}}, "extra_state": {"epoch": 1}}, path)
    return str(path)


F = torch.tensor([1.0, 2.0])
DTYPE_CASES = {  # parameters of the best checkpoint, of the second; the average's or the parameter refused
    "floats average": ({"w": F}, {"w": F * 3}, {"w": F * 2}),
    "an int64 buffer is the best's": ({"w": F, "steps": torch.tensor([3, 4])},
                                      {"w": F, "steps": torch.tensor([7, 9])},
                                      {"w": F, "steps": torch.tensor([3, 4])}),
    "a bool mask is the best's": ({"w": F, "mask": torch.tensor([True, False])},
                                  {"w": F, "mask": torch.tensor([False, False])},
                                  {"w": F, "mask": torch.tensor([True, False])}),
    "float16 and float32 average as float32": ({"w": F.half()}, {"w": F * 3}, {"w": F * 2}),
    "int64 where the best has float": ({"w": F, "b": F}, {"w": F, "b": torch.tensor([1, 2])}, "its b is int64"),
    "float where the best has int64": ({"w": F, "b": torch.tensor([1, 2])}, {"w": F, "b": F},
                                       "its b is floating-point, int64 in"),
    "bool where the best has float": ({"w": F}, {"w": torch.tensor([True, True])}, "its w is bool"),
    "int32 where the best has int64": ({"s": torch.tensor([1])}, {"s": torch.tensor([1], dtype=torch.int32)},
                                       "its s is int32, int64 in"),
    "another name": ({"w": F}, {"v": F}, "it has no parameter w"),
    "another shape": ({"w": F}, {"w": torch.ones(3)}, "its w has shape [3], [2] in"),
}


@pytest.mark.parametrize("best, second, expected", DTYPE_CASES.values(), ids=DTYPE_CASES.keys())
def test_averaging_checks_names_shapes_and_dtypes(tmp_path, best, second, expected):
    """Tiny hand-made checkpoints (no training): each case's average is checked by hand."""
    pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
    from nbest_eval.fairseq.averaging import average_checkpoints

    paths = [_hand_made_checkpoint(tmp_path / "checkpoint2.pt", **best),
             _hand_made_checkpoint(tmp_path / "checkpoint1.pt", **second)]
    out = tmp_path / "average.pt"
    if isinstance(expected, str):
        with pytest.raises(InputError, match=f"checkpoint1.pt: cannot average it with .*{re.escape(expected)}"):
            average_checkpoints(paths, out)
        assert not os.path.exists(out)
        return
    average = torch.load(average_checkpoints(paths, out), weights_only=True)["model"]
    assert sorted(average) == sorted(expected)
    for name, value in expected.items():
        assert average[name].dtype == value.dtype and torch.equal(average[name], value), name



@pytest.fixture(scope="module")
def fairseq_run(tmp_path_factory):
    """Two epochs of the tiny transformer (checkpoint1.pt, checkpoint2.pt) and a third checkpoint:
    checkpoint2's parameters perturbed, so that three distinct checkpoints are averaged."""
    pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
    from fairseq_runs import PLUGIN, TINY_ARGS, command, run

    from nbest_eval.analysis.synth import generate, write_corpus
    from nbest_eval.fairseq.safe_load import load_state

    root = tmp_path_factory.mktemp("averaging_fairseq")
    text, data, save = root / "text", root / "bin", root / "ckpt"
    write_corpus(text, generate(seed=1, train_pairs=300, valid_prompts=8))
    run(command("fairseq-preprocess") + [
        "--source-lang", "src", "--target-lang", "tgt", "--trainpref", str(text / "train"),
        "--validpref", str(text / "valid"), "--destdir", str(data), "--joined-dictionary", "--workers", "1"],
        root / "preprocess.log")
    gold = text / "valid.gold.txt"
    run(command("fairseq-train") + [str(data), "--user-dir", str(PLUGIN), *TINY_ARGS, "--nbest-gold", str(gold),
                                    "--save-dir", str(save), "--max-epoch", "2", "--nbest-beam", "2"],
        root / "train.log")
    state = load_state(str(save / "checkpoint2.pt"))
    generator = torch.Generator().manual_seed(0)
    for param in state["model"].values():
        param.add_(torch.randn(param.shape, generator=generator) * 0.01)
    torch.save(state, save / "checkpoint3.pt")
    paths = [str(save / f"checkpoint{epoch}.pt") for epoch in (2, 1, 3)]
    return SimpleNamespace(root=root, data=data, gold=gold, save=save, paths=paths, command=command, run=run,
                           plugin=PLUGIN, tiny_args=TINY_ARGS)


@pytest.fixture(scope="module")
def fairseq_average(fairseq_run):
    from nbest_eval.fairseq.averaging import average_checkpoints

    out = fairseq_run.root / "average.pt"
    assert average_checkpoints(fairseq_run.paths, out) == str(out)
    return out


@pytest.fixture
def safe_loading(monkeypatch):
    """torch's safe loader in force (a test elsewhere may have opted this process out)."""
    from nbest_eval.fairseq.safe_load import FULL_LOAD

    monkeypatch.delenv(FULL_LOAD, raising=False)


@pytest.mark.training
def test_fairseq_average_is_the_mean_with_the_first_checkpoints_settings(fairseq_run, fairseq_average, safe_loading):
    inputs = [torch.load(path, map_location="cpu", weights_only=True) for path in fairseq_run.paths]
    average = torch.load(fairseq_average, map_location="cpu", weights_only=True)
    assert list(average["model"]) == list(inputs[0]["model"])
    for name, param in average["model"].items():
        assert param.dtype == inputs[0]["model"][name].dtype
        torch.testing.assert_close(param.double(), mean([state["model"][name] for state in inputs]),
                                   rtol=1e-6, atol=1e-7)
    assert not torch.equal(average["model"]["encoder.embed_tokens.weight"],
                           inputs[0]["model"]["encoder.embed_tokens.weight"])
    for field in set(inputs[0]) - {"model"}:  # cfg, extra_state, optimizer state: the first's, as fairseq's script
        assert repr(average[field]) == repr(inputs[0][field]), field


@pytest.mark.training
def test_fairseq_loads_and_generates_with_the_average(fairseq_run, fairseq_average, safe_loading):
    from fairseq import checkpoint_utils

    from nbest_eval.fairseq.checkpoints import checkpoint_nbest
    from nbest_eval.fairseq.safe_load import allow_fairseq_checkpoints
    from nbest_eval.formats import read_gold

    allow_fairseq_checkpoints()
    models, _ = checkpoint_utils.load_model_ensemble([str(fairseq_average)])  # fairseq-generate's loader
    saved = torch.load(fairseq_average, map_location="cpu", weights_only=True)["model"]
    assert torch.equal(models[0].state_dict()["decoder.layers.0.fc1.weight"], saved["decoder.layers.0.fc1.weight"])
    nbest = checkpoint_nbest(str(fairseq_average), str(fairseq_run.gold), beam=2, data=str(fairseq_run.data))
    gold = read_gold(str(fairseq_run.gold))
    assert set(nbest) == {prompt.id for prompt in gold} and all(len(hyps) == 2 for hyps in nbest.values())


@pytest.mark.training
def test_fairseq_train_resumes_from_the_average(fairseq_run, fairseq_average):
    """--restore-file: the first checkpoint's (epoch 2) optimizer and iterator state, the averaged weights;
    training goes on with epoch 3."""
    save = fairseq_run.root / "resumed"
    result = fairseq_run.run(fairseq_run.command("fairseq-train") + [
        str(fairseq_run.data), "--user-dir", str(fairseq_run.plugin), *fairseq_run.tiny_args,
        "--nbest-gold", str(fairseq_run.gold), "--save-dir", str(save), "--restore-file", str(fairseq_average),
        "--max-epoch", "3", "--nbest-beam", "2"], fairseq_run.root / "resumed.log")
    assert f"Loaded checkpoint {fairseq_average} (epoch 3 @ " in result.log
    assert len(result.valid) == 1 and (save / "checkpoint3.pt").is_file()


def _edited_copy(source, target, edit):
    from nbest_eval.fairseq.safe_load import load_state

    state = load_state(str(source))
    edit(state)
    torch.save(state, target)
    return str(target)


@pytest.mark.training
@pytest.mark.parametrize("edit, message", [
    (lambda s: setattr(s["cfg"]["model"], "encoder_normalize_before", True),
     "its encoder_normalize_before is True, False in"),
    (lambda s: s["model"].pop("decoder.layers.1.fc2.bias"), "it has no parameter decoder.layers.1.fc2.bias"),
    (lambda s: s["model"].update({"extra.weight": torch.zeros(2)}), "its parameter extra.weight is not in"),
    (lambda s: s["model"].update({"encoder.layers.0.fc1.bias": torch.zeros(3)}),
     r"its encoder.layers.0.fc1.bias has shape \[3\], \[128\] in"),
])
def test_fairseq_checkpoints_of_different_architectures_are_refused(fairseq_run, tmp_path, edit, message):
    from nbest_eval.fairseq.averaging import average_checkpoints

    other = _edited_copy(fairseq_run.paths[1], tmp_path / "checkpoint9.pt", edit)
    out = tmp_path / "average.pt"
    with pytest.raises(InputError, match=f"checkpoint9.pt: cannot average it with .*checkpoint2.pt: not the same "
                                         f"architecture \\({message}"):
        average_checkpoints([fairseq_run.paths[0], other], out)
    assert not out.exists()


@pytest.mark.training
def test_fairseq_dropout_differences_do_not_matter(fairseq_run, tmp_path):
    from nbest_eval.fairseq.averaging import average_checkpoints

    other = _edited_copy(fairseq_run.paths[1], tmp_path / "checkpoint9.pt",
                         lambda s: setattr(s["cfg"]["model"], "dropout", 0.3))
    average_checkpoints([fairseq_run.paths[0], other], tmp_path / "average.pt")


@pytest.mark.training
def test_fairseq_float16_checkpoints_average_as_float32_as_fairseqs_script(fairseq_run, tmp_path, safe_loading):
    from nbest_eval.fairseq.averaging import average_checkpoints

    def halved(state):
        state["model"] = {name: param.half() for name, param in state["model"].items()}

    halves = [_edited_copy(path, tmp_path / f"checkpoint{i}.pt", halved) for i, path in enumerate(fairseq_run.paths)]
    average = torch.load(average_checkpoints(halves, tmp_path / "average.pt"), weights_only=True)["model"]
    inputs = [torch.load(path, weights_only=True)["model"] for path in halves]
    for name, param in average.items():
        assert param.dtype == torch.float32
        torch.testing.assert_close(param.double(), mean([model[name] for model in inputs]), rtol=1e-6, atol=1e-7)


@pytest.mark.training
def test_fairseq_output_rules(fairseq_run, fairseq_average, tmp_path):
    from nbest_eval.fairseq.averaging import average_checkpoints

    before = fairseq_average.read_bytes()
    with pytest.raises(InputError, match="already exists"):
        average_checkpoints(fairseq_run.paths[:2], fairseq_average)
    assert fairseq_average.read_bytes() == before
    with pytest.raises(InputError, match="also an input.*even if asked to"):
        average_checkpoints(fairseq_run.paths[:2], fairseq_run.paths[1], overwrite=True)
    out = tmp_path / "average.pt"
    out.write_bytes(b"old")
    average_checkpoints(fairseq_run.paths[:1], out, overwrite=True)  # K = 1: the checkpoint re-saved
    assert out.read_bytes() != b"old"
    assert sorted(os.listdir(tmp_path)) == ["average.pt"]  # no temporary left


@pytest.mark.training
def test_a_fairseq_checkpoint_that_would_run_code_is_refused_without_running_it(fairseq_run, tmp_path,
                                                                               safe_loading):
    from nbest_eval.fairseq.averaging import average_checkpoints

    marker = tmp_path / "PWNED"
    crafted = _edited_copy(fairseq_run.paths[1], tmp_path / "checkpoint9.pt",
                           lambda s: s["extra_state"].update(note=Payload(marker)))
    out = tmp_path / "average.pt"
    with pytest.raises(InputError, match="checkpoint9.pt: refusing to load this checkpoint.*posix.system"):
        average_checkpoints([fairseq_run.paths[0], crafted], out)
    assert not marker.exists() and not out.exists()
    # --trust-checkpoints: the user vouches for it, and it loads fully (running the command)
    average_checkpoints([fairseq_run.paths[0], crafted], out, trust=True)
    assert marker.exists() and out.is_file()


# -- Hugging Face -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    """Three tiny T5 checkpoint directories (one config, three initializations) with their tokenizer,
    as save_pretrained writes them, and a gold file of the synthetic corpus."""
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    from experiments import hf_toy
    from nbest_eval.analysis.synth import generate
    from nbest_eval.formats import write_gold

    root = tmp_path_factory.mktemp("averaging_hf")
    corpus = generate(seed=1, train_pairs=50, valid_prompts=4)
    tokenizer = hf_toy.build_tokenizer([text for pair in corpus.train for text in pair])
    paths = []
    for seed in (1, 2, 3):
        path = root / "run" / f"checkpoint-{seed}"
        hf_toy.build_model(tokenizer, seed=seed, d_model=16, layers=1, heads=2, ffn=32).save_pretrained(path)
        tokenizer.save_pretrained(path)
        (path / "trainer_state.json").write_text("{}")
        paths.append(str(path))
    gold = root / "gold.txt"
    write_gold(corpus.gold, gold)
    return SimpleNamespace(root=root, paths=paths, gold=gold, tokenizer=tokenizer, hf_toy=hf_toy)


@pytest.fixture(scope="module")
def hf_average(hf_run):
    from nbest_eval.hf.averaging import average_checkpoints

    out = hf_run.root / "average"
    assert average_checkpoints(hf_run.paths, out) == str(out)
    return out


def _weights(path):
    from safetensors.torch import load_file

    return load_file(os.path.join(path, "model.safetensors"))


@pytest.mark.training
def test_hf_average_is_the_mean_and_from_pretrained_loads_it(hf_run, hf_average):
    from transformers import AutoModelForSeq2SeqLM

    inputs = [_weights(path) for path in hf_run.paths]
    model = AutoModelForSeq2SeqLM.from_pretrained(hf_average)
    state = model.state_dict()
    for name in inputs[0]:
        assert state[name].dtype == inputs[0][name].dtype
        torch.testing.assert_close(state[name].double(), mean([weights[name] for weights in inputs]),
                                   rtol=1e-6, atol=1e-7)
    # the tied embeddings and output layer are one averaged tensor
    assert torch.equal(state["lm_head.weight"], state["shared.weight"])
    assert torch.equal(state["decoder.embed_tokens.weight"], state["shared.weight"])
    assert sorted(os.listdir(hf_average)) == ["config.json", "generation_config.json", "model.safetensors",
                                               "tokenizer.json", "tokenizer_config.json"]
    for name in ("config.json", "generation_config.json", "tokenizer.json"):
        assert (hf_average / name).read_bytes() == (Path(hf_run.paths[0]) / name).read_bytes()


@pytest.mark.training
def test_hf_average_generates_as_select_scores_it(hf_run, hf_average):
    from nbest_eval.formats import read_gold
    from nbest_eval.hf import checkpoint_nbest

    nbest = checkpoint_nbest(hf_average, hf_run.gold, beam=2, max_len_b=5, device="cpu")
    assert set(nbest) == {prompt.id for prompt in read_gold(str(hf_run.gold))}
    assert all(len(hyps) == 2 for hyps in nbest.values())


def _hf_copy(hf_run, tmp_path, name="checkpoint-9", **config):
    """A copy of the first checkpoint directory with ``config`` changes in config.json."""
    path = tmp_path / name
    shutil.copytree(hf_run.paths[0], path)
    settings = json.loads((path / "config.json").read_text())
    settings.update(config)
    (path / "config.json").write_text(json.dumps(settings))
    return str(path)


@pytest.mark.training
def test_hf_checkpoints_of_different_architectures_are_refused(hf_run, tmp_path):
    from safetensors.torch import save_file

    from nbest_eval.hf.averaging import average_checkpoints

    wider = tmp_path / "checkpoint-9"
    hf_run.hf_toy.build_model(hf_run.tokenizer, seed=1, d_model=32, layers=1, heads=2, ffn=32).save_pretrained(wider)
    out = tmp_path / "average"
    with pytest.raises(InputError, match=r"checkpoint-9: cannot average it with .*checkpoint-1: not the same "
                                         r"architecture \(its d_kv is 16, 8 in"):
        average_checkpoints([hf_run.paths[0], wider], out)
    gated = _hf_copy(hf_run, tmp_path, "checkpoint-8", feed_forward_proj="gated-gelu")
    with pytest.raises(InputError, match="its feed_forward_proj is 'gated-gelu', 'relu' in"):
        average_checkpoints([hf_run.paths[0], gated], out)
    bart = _hf_copy(hf_run, tmp_path, "checkpoint-7", model_type="bart")
    with pytest.raises(InputError, match="its model_type is 'bart', 't5' in"):
        average_checkpoints([hf_run.paths[0], bart], out)
    assert not out.exists()
    # integer weights cannot be averaged: equal ones are kept, others refused
    steps = _hf_copy(hf_run, tmp_path, "checkpoint-5")
    weights = {**_weights(steps), "steps": torch.tensor([3, 4])}
    save_file(weights, os.path.join(steps, "model.safetensors"), metadata={"format": "pt"})
    weights["steps"] = torch.tensor([3, 5])
    save_file(weights, os.path.join(_hf_copy(hf_run, tmp_path, "checkpoint-4"), "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(InputError, match=r"checkpoint-4: .*\(its steps \(torch.int64\) differs and cannot be averaged"):
        average_checkpoints([steps, str(tmp_path / "checkpoint-4")], out)
    # a dropout rate is no architecture
    average_checkpoints([hf_run.paths[0], _hf_copy(hf_run, tmp_path, "checkpoint-6", dropout_rate=0.3)], out)


@pytest.mark.training
def test_a_pickled_hf_checkpoint_is_refused_without_loading_it(hf_run, tmp_path):
    from nbest_eval.hf.averaging import average_checkpoints

    pickled = Path(_hf_copy(hf_run, tmp_path))
    marker = tmp_path / "PWNED"
    (pickled / "model.safetensors").unlink()
    torch.save({"weights": Payload(marker)}, pickled / "pytorch_model.bin")
    out = tmp_path / "average"
    with pytest.raises(InputError, match="checkpoint-9: its weights are only in pytorch_model.bin, a pickle"):
        average_checkpoints([hf_run.paths[0], pickled], out)
    assert not marker.exists() and not out.exists()
    (pickled / "pytorch_model.bin").unlink()
    with pytest.raises(InputError, match="checkpoint-9: no model weights in it"):
        average_checkpoints([hf_run.paths[0], pickled], out)


@pytest.mark.training
def test_hf_output_rules(hf_run, tmp_path):
    from nbest_eval.hf.averaging import average_checkpoints

    out = tmp_path / "average"
    with pytest.raises(InputError, match="is an input, inside one or holds one.*even if asked to"):
        average_checkpoints(hf_run.paths[:2], hf_run.paths[1], overwrite=True)
    with pytest.raises(InputError, match="is an input, inside one or holds one"):
        average_checkpoints(hf_run.paths[:2], Path(hf_run.paths[0]) / "average", overwrite=True)
    average_checkpoints(hf_run.paths[:2], out)
    first = _weights(out)
    with pytest.raises(InputError, match="already exists"):
        average_checkpoints(hf_run.paths, out)
    (out / "stale.txt").write_text("from before")
    average_checkpoints(hf_run.paths, out, overwrite=True)  # replaced whole: nothing of the old one is left
    assert not (out / "stale.txt").exists()
    assert not torch.equal(first["shared.weight"], _weights(out)["shared.weight"])
    assert sorted(os.listdir(tmp_path)) == ["average"]  # no temporary left


# -- select --average, end to end ---------------------------------------------------------------

def _select_average(argv, capsys):
    import json

    from nbest_eval.cli import main

    assert main(argv) == 0, capsys.readouterr().err
    table = json.loads(capsys.readouterr().out)
    return {s["name"]: s for s in table["systems"]}, table


def _check_average_row(rows, table, name, k):
    """The average is the table's last row, of the k best single checkpoints (by map, best first),
    with its interval and a p-value against the best single one."""
    singles = [row for row in rows.values() if "averaged" not in row]
    ranked = [row for _, row in sorted(enumerate(singles), key=lambda ir: (ir[1]["values"]["map"], ir[0]),
                                       reverse=True)[:k]]  # ties: the later checkpoint first
    average = rows[name]
    assert list(rows)[-1] == name and average["averaged"] == "+".join(row["name"] for row in ranked)
    assert average["ci_low"] <= average["ci_high"] and 0 < average["p_value"] <= 1
    assert table["best"] == ranked[0]["name"]


@pytest.mark.training
def test_select_averages_the_best_fairseq_checkpoints_and_scores_the_average(fairseq_run, tmp_path, capsys,
                                                                           safe_loading):
    out = tmp_path / "avg.pt"
    argv = ["select", "--fairseq-data", str(fairseq_run.data), *fairseq_run.paths, "--gold", str(fairseq_run.gold),
            "--beam", "2", "--metrics", "map", "--no-cache", "--average", "2", "--average-out", str(out), "--json"]
    rows, table = _select_average(argv, capsys)
    _check_average_row(rows, table, "avg.pt", 2)
    from nbest_eval.fairseq.safe_load import load_state

    chosen = [load_state(str(fairseq_run.save / name))["model"] for name in rows["avg.pt"]["averaged"].split("+")]
    for name, param in load_state(str(out))["model"].items():
        torch.testing.assert_close(param.double(), mean([state[name] for state in chosen]), rtol=1e-6, atol=1e-7)
    from nbest_eval.cli import main

    assert main(argv) == 2 and "--average-out" in capsys.readouterr().err  # never replaced without --force
    assert main(argv[:-5] + ["--average", "4", "--average-out", str(tmp_path / "b.pt")]) == 2
    assert "--average 4: there are only 3 checkpoints" in capsys.readouterr().err


@pytest.mark.training
def test_select_averages_the_best_hf_checkpoints_and_scores_the_average(hf_run, tmp_path, capsys):
    rows, table = _select_average(["select", "--hf", *hf_run.paths, "--gold", str(hf_run.gold), "--beam", "2",
                                   "--max-len-a", "0", "--max-len-b", "5", "--lenpen", "1",  # no settings file
                                   "--metrics", "map", "--no-cache", "--average", "3",
                                   "--average-out", str(tmp_path / "average"), "--json"], capsys)
    _check_average_row(rows, table, "average", 3)
    assert (tmp_path / "average" / "model.safetensors").is_file()


@pytest.mark.training
def test_the_same_checkpoints_in_another_order_average_to_the_same_bits(fairseq_run, hf_run, tmp_path, safe_loading):
    """Floating-point sums depend on their order, and a last-bit difference can change bf16 lists: select's
    best-K and last-K averages of the same checkpoints must be one model whatever order names them."""
    from nbest_eval.fairseq.averaging import average_checkpoints as fairseq_average
    from nbest_eval.hf.averaging import average_checkpoints as hf_average

    averages = [fairseq_average(paths, tmp_path / f"fairseq-{k}.pt")
                for k, paths in enumerate((fairseq_run.paths, fairseq_run.paths[::-1]))]
    first, second = (torch.load(path, map_location="cpu", weights_only=True)["model"] for path in averages)
    assert all(torch.equal(first[name], second[name]) for name in first)
    averages = [hf_average(paths, tmp_path / f"hf-{k}") for k, paths in enumerate((hf_run.paths, hf_run.paths[::-1]))]
    first, second = (_weights(path) for path in averages)
    assert all(torch.equal(first[name], second[name]) for name in first)
