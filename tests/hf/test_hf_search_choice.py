"""choose_search: the pruning beam search on a CPU in every dtype, transformers' own on an accelerator
in every dtype (issue 30), each with a one-line reason that says how to override the choice."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from nbest_eval.hf.beam_search import choose_search  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device, pruning", [("cpu", True), (torch.device("cpu"), True), ("cuda", False),
                                             ("cuda:1", False), ("mps", False)])
def test_the_pruning_search_on_a_cpu_only(device, pruning, dtype):
    chosen, reason = choose_search(device, dtype)
    assert chosen is pruning
    assert "\n" not in reason and str(dtype).replace("torch.", "") in reason
    assert torch.device(device).type in reason
    assert '{"custom_generate": None}' in reason and "nbest_eval.hf.beam_search.beam_search" in reason
