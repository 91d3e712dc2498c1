"""Hugging Face async mode with several training processes: what rank 0 fails to do (start, hand off,
drain) is raised on every rank, so that no rank waits in a broadcast for news that will not come; and
async_timeout is checked when the callback is made."""

import pytest

pytest.importorskip("transformers")
async_train = pytest.importorskip("nbest_eval.hf.async_train")
from nbest_eval.data import InputError  # noqa: E402


def handoff(shared):
    """An AsyncHandOff as under two processes: ``shared`` records what rank 0 broadcasts and gives what
    the other ranks receive."""
    side = async_train.AsyncHandOff(callback=None, device="cpu", queue=2, skip=False, timeout=10.0)
    side.group = object()  # several processes
    side._share = shared
    return side


def test_a_failure_on_rank_0_is_broadcast_then_raised_there():
    sent = []

    def broken():
        raise OSError("No space left on device")

    side = handoff(lambda news: sent.append(news) or news)
    with pytest.raises(OSError, match="No space left on device"):
        side._from_rank0(broken, "hand off step 40")
    assert sent == [{async_train.FAILED: "OSError: No space left on device"}]


def test_the_other_ranks_raise_what_rank_0_could_not_do():
    side = handoff(lambda news: {async_train.FAILED: "OSError: No space left on device"})
    with pytest.raises(RuntimeError, match="rank 0 could not hand off step 40: OSError: No space left on device"):
        side._from_rank0(lambda: None, "hand off step 40")


def test_news_passes_on_to_every_rank():
    news = {"verdict": None, "logged": [], "pending": 1}
    assert handoff(lambda mine: news)._from_rank0(lambda: None, "hand off step 40") is news


@pytest.mark.parametrize("timeout", [0, -1.0, float("inf"), float("nan"), "3600", True])
def test_async_timeout_is_a_number_of_seconds(timeout):
    with pytest.raises(InputError, match="async_timeout must be a number of seconds > 0"):
        async_train.AsyncHandOff(callback=None, device="cpu", queue=2, skip=False, timeout=timeout)
