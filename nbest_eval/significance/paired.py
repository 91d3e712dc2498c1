"""The table of paired tests (key -> test object), the lookup by key, and what depends on a test's
resamples: how many Holm's correction needs, and the warning where too few are given."""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Union

from ..data import InputError
from ..scorer import Scorer
from .base import PairedTest, Results
from .bootstrap import PairedBootstrap
from .holm import DEFAULT_ALPHA
from .intervals import DEFAULT_SEED
from .per_prompt import PerPrompt
from .randomization import ApproximateRandomization
from .t_test import PairedTTest

#: every paired test by its key (``--paired``'s choices, in this order)
TESTS: Dict[str, PairedTest] = {test.key: test for test in (PairedBootstrap(), ApproximateRandomization(),
                                                             PairedTTest())}
#: each test's resamples (bootstrap) or trials (approximate randomization) when none are given, as sacrebleu
DEFAULT_SAMPLES = {key: test.default_resamples for key, test in TESTS.items()}


def get_test(key: Union[str, PairedTest]) -> PairedTest:
    """The test of ``key`` (a test object is returned as it is)."""
    if isinstance(key, PairedTest):
        return key
    if not isinstance(key, str) or key not in TESTS:
        raise InputError(f"unknown paired test {key!r:.60}; use one of: {', '.join(TESTS)}")
    return TESTS[key]


def paired_help() -> str:
    """Every test by title and key, for the help of every option that picks one:
    ``paired bootstrap (bs), approximate randomization (ar) or paired t-test (t)``."""
    named = [f"{test.title} ({key})" for key, test in TESTS.items()]
    return f"{', '.join(named[:-1])} or {named[-1]}"


def paired_test(baseline: PerPrompt, systems: Sequence[PerPrompt], test: Union[str, PairedTest] = "bs",
                n_samples: Optional[int] = None, seed: Optional[int] = DEFAULT_SEED,
                keys: Optional[Sequence[str]] = None) -> Results:
    """Each system against ``baseline`` with the test ``test`` (a key of :data:`TESTS`): see
    :meth:`PairedTest.run`."""
    return get_test(test).run(baseline, systems, n_samples, seed, keys)


def check_mean(test: Union[str, PairedTest], scorer: Scorer, key: str) -> None:
    """Refuse a test that compares per-prompt values on a measure that is no mean over prompts."""
    found = get_test(test)
    if found.needs_mean and scorer.metrics[scorer.keys.index(key)].mean_of is None:
        others = " or ".join(f"the {t.title} ({t.key})" for t in TESTS.values() if not t.needs_mean)
        raise InputError(f"a {found.title} ({found.key}) compares per-prompt values, and {key} is no mean over "
                         f"prompts: use {others}")


def resamples_for(comparisons: int, test: Union[str, PairedTest] = "bs", alpha: float = DEFAULT_ALPHA) -> int:
    """Resamples (or trials) enough for Holm's correction over ``comparisons`` tests at ``alpha``:
    the test's default, or more, so that the smallest p-value resampling can give, 1 / (N + 1), is a
    tenth of Holm's smallest threshold, alpha / comparisons (in thousands). With 1,000 resamples and
    50 or more comparisons nothing could ever be told apart. 0 for a test that does not resample."""
    found = get_test(test)
    if not found.resamples:
        return 0
    needed = 10 * comparisons / alpha
    if not math.isfinite(needed):  # a subnormal alpha
        raise InputError(f"alpha {alpha} over {comparisons} comparisons would need infinitely many resamples")
    return max(found.default_resamples, 1000 * math.ceil(math.ceil(needed) / 1000))


def resolution_note(comparisons: int, n_samples: int, alpha: float = DEFAULT_ALPHA) -> Optional[str]:
    """A warning where ``n_samples`` resamples cannot give a Holm-corrected p-value below ``alpha``."""
    smallest = min(1.0, comparisons / (n_samples + 1))
    if smallest < alpha:
        return None
    return (f"with {n_samples} resamples the smallest Holm-corrected p-value over {comparisons} comparisons is "
            f"{smallest:.3f}, not below {alpha}: no difference can be significant; use --n-samples "
            f"{resamples_for(comparisons, 'bs', alpha)} or more")
