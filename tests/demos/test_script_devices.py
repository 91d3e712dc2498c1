"""--device and --precision of scripts/staple_en_pt.py, examples/fairseq_demo.py and scripts/train_hf.py:
resolved (auto: the GPU when torch sees one), refused where a framework cannot train so, reaching
fairseq-train's command line and the Trainer's arguments, and recorded in the runs' summaries. No
GPU needed: a GPU is pretended where only the command line is built."""

import argparse
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from experiments.staple import cli, fairseq_run, settings
from experiments.staple.summary import TrainingRun, timing
from nbest_eval.data import InputError
from nbest_eval.training import devices

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def pretend_gpu(monkeypatch):
    """torch.cuda.is_available() says True (nothing here runs on the device)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


def demo_module():
    spec = importlib.util.spec_from_file_location("fairseq_demo", REPO / "examples" / "fairseq_demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def value_after(words, option):
    return words[len(words) - 1 - words[::-1].index(option) + 1]  # the last one given counts


# -- resolving and refusing ------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: auto is cuda")
def test_auto_is_the_cpu_here_and_cuda_is_refused_without_a_gpu():
    assert devices.resolve_device("auto") == "cpu" and devices.resolve_device("cpu") == "cpu"
    with pytest.raises(InputError, match="--device cuda: torch sees no CUDA device"):
        devices.resolve_device("cuda")


def test_auto_is_the_gpu_where_torch_sees_one(pretend_gpu):
    assert devices.resolve_device("auto") == "cuda" and devices.resolve_device("cpu") == "cpu"


@pytest.mark.parametrize("framework, precision", [("fairseq", "bf16"), ("fairseq", "fp16"), ("hf", "fp16")])
def test_a_precision_that_cannot_train_on_the_cpu_is_refused(framework, precision):
    with pytest.raises(InputError, match=f"--precision {precision} needs --device cuda"):
        devices.check_precision(framework, "cpu", precision)
    devices.check_precision(framework, "cuda", precision)  # fine on a GPU


def test_fairseq_words():
    assert devices.fairseq_words("cpu", "fp32") == ["--cpu"]
    assert devices.fairseq_words("cuda", "fp32") == []
    assert devices.fairseq_words("cuda", "bf16") == ["--bf16"] and devices.fairseq_words("cuda", "fp16") == ["--fp16"]


def test_the_sidecar_runs_beside_training_unless_told():
    assert devices.sidecar_device("cpu") == "cpu" and devices.sidecar_device("cuda") == "cuda:0"
    assert devices.sidecar_device("cuda", "cpu") == "cpu" and devices.sidecar_device("cpu", "external") == "external"


# -- scripts/staple_en_pt.py -----------------------------------------------------------------------


def staple_args(tmp_path, **given):
    defaults = dict(device="cpu", precision="fp32", nbest_mode="loop", async_device=None, beam=4, patience=None,
                    stopping="strict")
    return argparse.Namespace(**{**defaults, **given})


@pytest.mark.parametrize("mode", ["loop", "async", "off"])
def test_staple_fairseq_command_on_the_cpu_is_todays_with_cpu(mode, tmp_path):
    words = fairseq_run.train_options(staple_args(tmp_path, nbest_mode=mode), tmp_path)
    assert "--cpu" in words and "--bf16" not in words and "--fp16" not in words
    # fairseq's default for validation batches, as before: the configuration's --max-tokens
    assert value_after(words, "--max-tokens-valid") == value_after(words, "--max-tokens") == "2000"
    if mode == "async":
        assert value_after(words, "--nbest-async-device") == "cpu"


@pytest.mark.parametrize("mode", ["loop", "async", "off"])
def test_staple_fairseq_command_on_the_gpu(mode, tmp_path):
    words = fairseq_run.train_options(staple_args(tmp_path, device="cuda", precision="bf16", nbest_mode=mode),
                                      tmp_path)
    assert "--cpu" not in words and "--bf16" in words
    assert value_after(words, "--max-tokens-valid") == str(settings.CUDA_MAX_TOKENS_VALID)
    if mode == "async":
        assert value_after(words, "--nbest-async-device") == "cuda:0"
    told = fairseq_run.train_options(staple_args(tmp_path, device="cuda", nbest_mode="async", async_device="cpu"),
                                     tmp_path)
    assert value_after(told, "--nbest-async-device") == "cpu" and "--bf16" not in told


def test_fairseqs_parser_takes_the_gpu_command(tmp_path):
    """fairseq reads the words as meant (the plain command: its parser without the plugin)."""
    pytest.importorskip("fairseq")
    from fairseq import options

    for device, precision in (("cuda", "fp16"), ("cpu", "fp32")):
        words = fairseq_run.train_options(staple_args(tmp_path, device=device, precision=precision, nbest_mode="off"),
                                          tmp_path)
        parsed = options.parse_args_and_arch(options.get_training_parser(), ["data-bin", *words])
        assert (parsed.cpu, parsed.fp16, parsed.bf16) == (device == "cpu", precision == "fp16", False)
        assert int(parsed.max_tokens_valid) == (2000 if device == "cpu" else settings.CUDA_MAX_TOKENS_VALID)


@pytest.mark.parametrize("argv, message", [
    (["--framework", "fairseq", "--device", "cpu", "--precision", "bf16"], "--precision bf16 needs --device cuda"),
    (["--framework", "hf", "--device", "cpu", "--precision", "fp16"], "--precision fp16 needs --device cuda")])
def test_staple_refuses_before_writing_anything(argv, message, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["--data", str(tmp_path), "--out", str(out), *argv]) == 2
    assert message in capsys.readouterr().err and not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_staple_device_cuda_without_a_gpu_is_an_error(tmp_path, capsys):
    assert cli.main(["--data", str(tmp_path), "--out", str(tmp_path / "run"), "--framework", "hf",
                     "--device", "cuda"]) == 2
    assert "staple_en_pt.py: error: --device cuda: torch sees no CUDA device" in capsys.readouterr().err


def test_staple_timing_sums_and_shares():
    rows = [{"gen_seconds": 1.25, "score_seconds": 0.5, "overhead_seconds": 0.25},
            {"gen_seconds": 0.75, "score_seconds": 0.25, "overhead_seconds": 0.0}]
    found = timing(TrainingRun(rows, 8.0, 2), "loop")
    assert (found["generation_seconds"], found["score_seconds"], found["overhead_seconds"]) == (2.0, 0.8, 0.2)
    assert found["generation_share"] == 0.25  # 2.0 of 8.0 s
    off = timing(TrainingRun([{"loss": 1.0}], 8.0, 1), "off")
    assert "generation_seconds" not in off and "generation_share" not in off


# -- examples/fairseq_demo.py ----------------------------------------------------------------------


def test_demo_command_follows_the_device(tmp_path):
    demo = demo_module()
    config = REPO / "configs" / "tiny_transformer.args"
    cpu = demo.train_args(tmp_path, config, 2, 1, "async", "cpu", "fp32")
    assert "--cpu" in cpu and value_after(cpu, "--nbest-async-device") == "cpu"
    gpu = demo.train_args(tmp_path, config, 2, 1, "async", "cuda", "fp16")
    assert "--cpu" not in gpu and "--fp16" in gpu and value_after(gpu, "--nbest-async-device") == "cuda:0"
    off = demo.train_args(tmp_path, config, 2, 1, "off", "cuda", "bf16")
    assert "--bf16" in off and "--nbest-async-device" not in off


def test_demo_refuses_fairseq_half_precision_on_the_cpu(tmp_path):
    out = tmp_path / "demo"
    with pytest.raises(SystemExit, match="--precision fp16 needs --device cuda"):
        demo_module().main(["--out", str(out), "--fast", "--device", "cpu", "--precision", "fp16"])
    assert not out.exists()


# -- scripts/train_hf.py and the Trainer's arguments -------------------------------------------------


def trainer_arguments(tmp_path, **given):
    from experiments import hf_toy

    return hf_toy.device_arguments(hf_toy.DemoConfig(str(tmp_path), **given))


def test_trainer_arguments_follow_device_and_precision(tmp_path, pretend_gpu):
    pytest.importorskip("transformers")
    assert trainer_arguments(tmp_path) == {"use_cpu": False, "bf16": False, "fp16": False}  # auto: the GPU
    assert trainer_arguments(tmp_path, precision="fp16") == {"use_cpu": False, "bf16": False, "fp16": True}
    assert trainer_arguments(tmp_path, device="cpu", precision="bf16") == {"use_cpu": True, "bf16": True,
                                                                             "fp16": False}
    with pytest.raises(InputError, match="--precision fp16 needs --device cuda"):
        trainer_arguments(tmp_path, device="cpu", precision="fp16")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_train_hf_device_cuda_without_a_gpu_is_an_error(tmp_path, capsys):
    pytest.importorskip("transformers")
    from experiments import train_hf

    assert train_hf.main(["--output-dir", str(tmp_path / "run"), "--data", str(tmp_path / "synth"),
                          "--device", "cuda"]) == 2
    assert "train_hf.py: error: --device cuda: torch sees no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "synth").exists()  # refused before the corpus is made


@pytest.mark.training
def test_train_hf_in_bf16_on_the_cpu(synth_dir, tmp_path, monkeypatch):
    """A tiny real run: the Trainer trains in bf16 and the callback validates in it; both recorded."""
    pytest.importorskip("transformers")
    from experiments import train_hf
    from nbest_eval.hf.settings import read_settings

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "run"
    assert train_hf.main(["--output-dir", str(out), "--data", str(synth_dir), "--max-steps", "10", "--eval-steps", "5",
                          "--num-beams", "2", "--batch-size", "16", "--device", "cpu", "--precision", "bf16"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["device"], summary["precision"], summary["global_step"]) == ("cpu", "bf16", 10)
    arguments = torch.load(out / "checkpoint-10" / "training_args.bin", weights_only=False)
    assert arguments.bf16 and not arguments.fp16 and arguments.use_cpu
    recorded = read_settings(out / "checkpoint-10")["evaluator"]  # the callback validated in bf16, today's batches
    assert (recorded["precision"], recorded["batch_size"], recorded["batch_tokens"]) == ("bf16", 32, None)
    state = json.loads((out / "trainer_state.json").read_text())
    assert [e["step"] for e in state["log_history"] if "eval_map" in e] == [5, 10]
