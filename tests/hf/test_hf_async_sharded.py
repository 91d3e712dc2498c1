"""`nbest-eval watch` under torchrun on a Hugging Face queue (issue 33): two CPU processes (gloo) each
generate their share of a snapshot's batches; rank 0 alone places the result and saves the lists. The
values are the one-process evaluator's (summed in another order: equal up to float64 rounding), the
per-prompt rows and the lists exactly. CPU, an untrained tiny T5, no training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")

from experiments import hf_toy as hf_demo  # noqa: E402
from nbest_eval.analysis.synth import GOLD_FILE  # noqa: E402
from nbest_eval.formats import save_nbest  # noqa: E402
from nbest_eval.hf.async_eval import TOKENIZER  # noqa: E402
from nbest_eval.hf.settings import settings_of  # noqa: E402
from nbest_eval.training.handoff import Queue  # noqa: E402
from nbest_eval.training.handoff_files import Tags  # noqa: E402
from nbest_eval.training.trainer_side import new_manifest  # noqa: E402

pytestmark = pytest.mark.training  # runs transformers in two torchrun processes: left out by `make test-fast`

#: the one-process evaluator adds every prompt's statistics in turn, two ranks their own and then the
#: two sums: the same float64 additions in another order
RELATIVE = 1e-12


def test_a_two_process_watch_gives_the_one_process_evaluators_values_rows_and_lists(synth_dir, tmp_path):
    pairs = hf_demo.load_pairs(synth_dir, "train") + hf_demo.load_pairs(synth_dir, "valid")
    tokenizer = hf_demo.build_tokenizer([s for pair in pairs for s in pair])
    model = hf_demo.build_model(tokenizer, seed=3)
    loop = hf.NBestEvaluator(synth_dir / GOLD_FILE, tokenizer, synth_dir / "valid.src", num_beams=4,
                             max_new_tokens=10, batch_size=8, subset_size=30, metrics="map,bleu_1x1,wf1")
    expected = loop.evaluate(model, gather_nbest=True)  # 4 batches: 2 for each rank
    queue = Queue(tmp_path / "run")
    queue.create()
    tokenizer.save_pretrained(queue.path(TOKENIZER))
    lists = tmp_path / "lists"
    queue.write_manifest(new_manifest("hf", loop.full_gold.path, loop.full_gold.digest(), settings_of(loop), None, 2,
                                      False, dtype="float32", threads=1,
                                      save_lists={"dir": str(lists), "format": "tsv", "name": None}))
    queue.put(model.save_pretrained, Tags(None, 0, 7, "s"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "nbest_eval", "watch", str(queue.root), "--until", "drained"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "watch: 1 evaluated" in proc.stdout and "rank 1 validated its shard of 1 snapshots" in proc.stdout
    result = queue.result(1)
    for key, value in expected.values.items():
        found = result["values"][key]
        assert found == pytest.approx(value, rel=RELATIVE, abs=0), key
    assert result["n_prompts"] == len(loop.prompts) == 30
    assert np.array_equal(np.array(result["per_prompt"]["rows"]), expected.per_prompt.matrix)
    assert sorted(os.listdir(lists)) == ["gold.txt", "nbest-step7.tsv"]  # rank 0's: once
    again = save_nbest(expected.nbest, tmp_path / "loop-lists", "nbest-step7", "tsv", loop.gold)
    assert (lists / "nbest-step7.tsv").read_bytes() == Path(again).read_bytes()
    assert json.loads(Path(queue.path("results.jsonl")).read_text().splitlines()[0])["seq"] == 1
