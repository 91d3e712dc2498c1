"""What --known-threshold is a share of (issue 31 trial): the total weight of a prompt's distinct
normalized translations, each STAPLE key once, not the gold file's total; docs/metrics.md says so,
and its counts of en_pt dev prompts with no known translation are the tool's."""

import re
from pathlib import Path

from nbest_eval import GoldPrompt, Hyp, Scorer
from nbest_eval.metrics.user import known
from nbest_eval.prompt import PromptGold

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_the_threshold_is_a_share_of_the_distinct_keys_weight():
    """'a wifi' and 'a wi-fi' are one key (the hyphen is punctuation) of weight 0.3: the keys weigh
    0.3 + 0.2 + 0.2 = 0.7, so its share is 3/7 ~ 0.43 (0.3 of the file's 1.0)."""
    prompt = GoldPrompt("p", "x", (("a wifi", 0.3), ("a wi-fi", 0.3), ("b", 0.2), ("c", 0.2)))
    assert known(PromptGold(prompt), None, 0.4) == {"a wifi"}
    assert known(PromptGold(prompt), None, 0.44) == set()
    scorer = Scorer(["coverage"], known_threshold=0.4)
    assert scorer.values(scorer.prompt_stats(prompt, [Hyp("A WIFI!")]))["coverage"] == 1.0


def test_the_documented_counts_of_prompts_with_nothing_known_are_measured(en_pt_gold):
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    found = re.search(r"at 0\.05, (\d+) of the 500 prompts have no known translation, at 0\.1, (\d+)", text)
    assert found, "docs/metrics.md no longer states the counts at 0.05 and 0.1"
    measured = [sum(not known(PromptGold(p), None, tau) for p in en_pt_gold) for tau in (0.05, 0.1)]
    assert [int(n) for n in found.groups()] == measured

