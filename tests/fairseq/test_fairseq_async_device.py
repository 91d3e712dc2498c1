"""The child sidecar's default device follows fairseq's own choice of device: with no --cpu on a
machine without CUDA fairseq trains on the CPU, and a sidecar sent to cuda:0 there would die at once."""

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
async_train = pytest.importorskip("nbest_eval.fairseq.async_train")


@pytest.mark.parametrize("cpu, cuda, device", [(True, True, "cpu"), (True, False, "cpu"), (False, False, "cpu"),
                                               (False, True, "cuda:0")])
def test_the_sidecar_goes_where_fairseq_trains(monkeypatch, cpu, cuda, device):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    run_cfg = SimpleNamespace(common=SimpleNamespace(cpu=cpu))
    assert async_train.training_device(run_cfg) == device
