"""Lets ``import transformers`` survive a torchaudio that cannot load; imported first by
:mod:`nbest_eval.hf`, before anything imports transformers.

transformers imports torchaudio whenever it is installed (``audio_utils``); a torchaudio built for
another torch (e.g. pulled in by fairseq) then breaks ``import transformers.Trainer`` with an
``OSError``. Only in that case is torchaudio hidden from transformers (nothing here needs audio).
"""

import logging
import sys


def hide_broken_torchaudio() -> None:
    if "torchaudio" in sys.modules or "transformers.trainer" in sys.modules:
        return
    try:
        import torchaudio  # noqa: F401
    except ImportError:
        pass
    except Exception as err:  # OSError: undefined symbol / missing libc10_cuda.so, ...
        sys.modules["torchaudio"] = None  # type: ignore[assignment]  # find_spec() -> None
        import_utils = sys.modules.get("transformers.utils.import_utils")
        cached = getattr(import_utils, "is_torchaudio_available", None)
        if hasattr(cached, "cache_clear"):  # `import transformers` may have asked already
            cached.cache_clear()
        logging.getLogger(__name__).warning(
            "torchaudio is installed but cannot be loaded (%s); hiding it from transformers. "
            "Install the torchaudio build that matches torch to silence this.", str(err).splitlines()[0])


hide_broken_torchaudio()
