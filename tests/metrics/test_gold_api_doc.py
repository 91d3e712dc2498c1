"""The Python API for reading the gold (read_gold, Gold, GoldPrompt, ids, weights), used by the
Hugging Face examples, is documented in docs/metrics.md; its example runs as written."""

import re
from pathlib import Path

from nbest_eval import Gold
from nbest_eval.data import prompt_id
from nbest_eval.formats import read_gold

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def documented_example() -> str:
    section = DOC.read_text(encoding="utf-8").split("### The gold in Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_gold_example_runs(tmp_path, monkeypatch):
    texts = ["Hello.", "Nothing to say", "Good night"]
    blocks = [f"{prompt_id(texts[0])}|{texts[0]}\nolá|0.6\noi|0.4", f"{prompt_id(texts[1])}|{texts[1]}",
              f"{prompt_id(texts[2])}|{texts[2]}\nboa noite|1"]
    (tmp_path / "dev.en_pt.gold.txt").write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(documented_example(), names)
    gold, prompt = names["gold"], names["prompt"]
    assert isinstance(gold, Gold) and len(gold) == 3 and gold.ids() == [prompt_id(t) for t in texts]
    assert (prompt.text, prompt.translations) == ("Hello.", (("olá", 0.6), ("oi", 0.4)))
    assert gold[prompt.id] is prompt and prompt_id(prompt.text) == prompt.id
    assert [p.text for p in names["answered"]] == ["Hello.", "Good night"]
    assert read_gold(tmp_path / "answered.gold.txt").ids() == names["answered"].ids()
