"""The pruning beam search gives transformers' lists (texts, order and scores, exactly) on the CPU
with fp32, bf16 and fp16 weights and with fp32 weights under autocast in bf16 (issue 30), and
experiments.generation_matrix times and compares that matrix. A tiny encoder-decoder built from a
config (test_hf_beam_search's), nothing downloaded."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from test_hf_beam_search import DecoderRows, NumberTokenizer, build, number_gold  # noqa: E402

from experiments.generation_matrix import SEARCHES, WEIGHTS, matrix, search_kwargs, table  # noqa: E402
from nbest_eval.hf import NBestEvaluator  # noqa: E402

BEAMS = 5


def lists(model, search, weights):
    """The evaluator's lists, (text, score) pairs, of every prompt in one batch (prompts settle apart)."""
    evaluator = NBestEvaluator(number_gold(), NumberTokenizer(), num_beams=BEAMS, max_new_tokens=14, batch_size=8,
                               metrics="map", generation_kwargs=search_kwargs(search), precision=WEIGHTS[weights][1])
    return [[(h.text, h.score) for h in hyps] for hyps in evaluator.generate(model)]


def model_in(weights):
    return build("marian", eos_bias=4.0).to(getattr(torch, WEIGHTS[weights][0]))


@pytest.fixture(scope="module")
def fp32_lists():
    return lists(model_in("fp32"), "transformers", "fp32")


@pytest.mark.parametrize("weights", list(WEIGHTS))
def test_the_pruning_search_gives_transformers_lists_in_every_precision(weights, fp32_lists):
    """Exact on the CPU, though the pruning search's decoder batch shrinks: a row's arithmetic does
    not depend on the other rows of a CPU matmul here, in any of these dtypes."""
    model = model_in(weights)
    rows = DecoderRows(model)
    theirs = lists(model, "transformers", weights)
    full, rows.rows = rows.rows, []
    ours = lists(model, "pruning", weights)
    assert ours == theirs  # texts, order, scores (==)
    assert set(full) == {8 * BEAMS} and min(rows.rows) < 8 * BEAMS  # the pruning search dropped rows
    assert (theirs == fp32_lists) == (weights == "fp32")  # the precision took effect


def test_the_matrix_rows():
    model = build("marian", eos_bias=4.0)
    before = [p.clone() for p in model.parameters()]
    rows = matrix(model, NumberTokenizer(), number_gold(), "cpu", beams=3, batch_size=4,
                  evaluator_options=dict(max_new_tokens=8))
    assert [(r["weights"], r["search"]) for r in rows] == [(w, s) for w in WEIGHTS for s in SEARCHES]
    for row in rows:
        assert "error" not in row, row
        assert row["ran"] == ("transformers" if row["search"] == "transformers" else "pruning")
        assert row["seconds"] > 0 and row["same_texts"] is True and row["max_score_diff"] == 0.0
        assert row["texts_changed_vs_fp32"] == 0 or row["weights"] != "fp32"
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # rows ran on copies
    assert table(rows).count("\n") == len(rows) + 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_that_fails_gives_rows_with_the_error():
    rows = matrix(build("marian", eos_bias=4.0), NumberTokenizer(), number_gold(), "cuda", beams=2, batch_size=4,
                  weights=["fp32"], searches=["pruning", "transformers"])
    assert [r["search"] for r in rows] == ["transformers", "pruning"]
    assert all(r["error"] and "seconds" not in r for r in rows)
    assert "error" in table(rows)


def test_unknown_rows_are_refused():
    with pytest.raises(ValueError, match="fp64"):
        matrix(None, None, None, "cpu", weights=["fp64"])


def versus(same_texts=True, texts_changed=0, max_score_diff=0.0):
    return {"same_texts": same_texts, "texts_changed": texts_changed, "max_score_diff": max_score_diff}


@pytest.mark.parametrize("lists, tolerance, problems", [
    ({"hf": versus()}, 0.0, []),
    ({"hf": versus(max_score_diff=None)}, 0.0, []),  # lists without scores
    ({"hf": versus(max_score_diff=5e-5)}, 1e-4, []),
    ({"hf": versus(max_score_diff=5e-5)}, 0.0, ["hf: scores differ from transformers' search by up to 5e-05"]),
    ({"hf": versus(), "hf_pruning": versus(False, 3, 2e-4)}, 1e-4,
     ["hf_pruning: 3 prompts' lists have other texts", "hf_pruning: scores differ from transformers' search by up "
                                                       "to 0.0002 (tolerance 0.0001)"]),
])
def test_bench_judges_texts_exactly_and_scores_within_the_tolerance(lists, tolerance, problems):
    from experiments.bench import lists_problems

    found = lists_problems({"lists": lists, "score_tolerance": tolerance})
    assert len(found) == len(problems) and all(found[i].startswith(p) for i, p in enumerate(problems)), found


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_bench_refuses_a_cuda_device_it_does_not_have(capsys):
    from experiments.bench import main

    with pytest.raises(SystemExit):
        main(["--only", "generation", "--runs", "fairseq_run", "hf_run", "--device", "cuda"])
    assert "--device cuda: torch sees no CUDA device" in capsys.readouterr().err
