"""Hostile input, third pass (issue 22, class 4): averaging checkpoints whose parameters differ in
dtype. Tiny hand-made checkpoints (no training): each case's average is checked by hand."""

import os
import re

import pytest

from nbest_eval.data import InputError

torch = pytest.importorskip("torch")
pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")


def _checkpoint(path, **model):
    torch.save({"model": model, "cfg": {"model": {"_name": "tiny_hand_made"}}, "extra_state": {"epoch": 1}}, path)
    return str(path)


F = torch.tensor([1.0, 2.0])
CASES = {  # parameters of the best checkpoint, of the second; the average's or the parameter refused
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


@pytest.mark.parametrize("best, second, expected", CASES.values(), ids=CASES.keys())
def test_averaging_checks_names_shapes_and_dtypes(tmp_path, best, second, expected):
    from nbest_eval.fairseq.averaging import average_checkpoints

    paths = [_checkpoint(tmp_path / "checkpoint2.pt", **best), _checkpoint(tmp_path / "checkpoint1.pt", **second)]
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
