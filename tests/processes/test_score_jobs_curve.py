"""experiments.score_jobs: the `score --jobs` curve, at a size that takes seconds."""

from cases import random_case

from experiments.score_jobs import curve
from nbest_eval.formats import write_gold
from nbest_eval.processes.workers import MIN_PROMPTS_PER_WORKER


def test_the_curve_times_each_job_count_and_its_serial_part(tmp_path):
    gold, _ = random_case(3, n_prompts=2 * MIN_PROMPTS_PER_WORKER, nil_prompts=False, max_valid=3)
    write_gold(gold, tmp_path / "base.gold.txt")
    found = curve(tmp_path, jobs=(1, 2), copies=1, size=3, gold=str(tmp_path / "base.gold.txt"))
    assert found["prompts"] == len(gold) and [row["jobs"] for row in found["rows"]] == [1, 2]
    one, two = found["rows"]
    assert one["serial_s"] is None and one["speedup"] == 1.0
    assert 0 < two["serial_s"] < two["wall_s"]  # two workers ran: their start and the merge were marked
    assert one["identical"] and two["identical"] and one["cpu_s"] > 0 and two["cpu_s"] > 0
