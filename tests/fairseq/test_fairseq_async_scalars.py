"""The sidecar's TensorBoard scalars on a real fairseq run (issue 33): the child sidecar writes them to
the run's own --tensorboard-logdir (`nbest-eval watch --tensorboard-logdir`), beside fairseq's valid
curves (the same tags, the same updates), and they hold results.jsonl's values.
CPU only, one thread per process."""

import json
from pathlib import Path

import numpy as np
import pytest
from fairseq_runs import train

pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
pytest.importorskip("tensorboard", reason="reading the event files needs tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from nbest_eval.training.handoff import Queue  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`


def scalars(folder: Path) -> EventAccumulator:
    events = EventAccumulator(str(folder))
    events.Reload()
    return events


def test_the_sidecars_scalars_line_up_with_fairseqs_valid_curves(fairseq_corpus):
    save, logdir = fairseq_corpus.root / "scalars-async", fairseq_corpus.root / "scalars-tb"
    # the child sidecar that training starts gets fairseq's own --tensorboard-logdir
    run = train(fairseq_corpus, save, "--max-epoch", 4, "--nbest-mode", "async", "--nbest-async-device", "cpu",
                "--tensorboard-logdir", logdir)
    lines = [json.loads(line) for line in Path(Queue(save).path("results.jsonl")).read_text().splitlines()]
    updates = [int(record["valid_num_updates"]) for record in run.valid]
    assert [line["tags"]["update"] for line in lines] == updates and all("values" in line for line in lines)
    ours, theirs = scalars(logdir / "valid_sidecar"), scalars(logdir / "valid")
    for key in lines[0]["values"]:  # each measure: results.jsonl's values (as float32) at fairseq's valid updates
        expected = [(line["tags"]["update"], float(np.float32(line["values"][key]))) for line in lines
                    if line["values"][key] is not None]
        assert [(event.step, event.value) for event in ours.Scalars(key)] == expected, key
        assert [event.step for event in theirs.Scalars(key)] == updates, key
    lags = [(event.step, event.value) for event in ours.Scalars("nbest_lag_s")]
    assert [step for step, _ in lags] == updates and all(lag > 0 for _, lag in lags)
