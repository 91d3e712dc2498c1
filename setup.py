import re
from pathlib import Path

from setuptools import find_packages, setup

TORCH = "torch>=2.0"  # install torch first (the Makefile pins the CPU wheel); see README
FAIRSEQ = [
    TORCH,
    # upstream 0.12.2 does not run on Python >= 3.11; this fork does (build it with
    # --no-build-isolation after torch, cython and numpy: see the Makefile)
    "fairseq-fixed==0.12.3.1; python_version >= '3.11'",
    "fairseq==0.12.2; python_version < '3.11'",
    "sacremoses",  # --nbest-detok moses
]
# transformers: 4.46 gave the Trainer processing_class= (the docs, examples and tests use it);
# `make test` runs the HF tests on the newest 5.x (.venv) and 4.57.6 (.venv-hf4). 6.x is untested.
# the version is written once, in nbest_eval/version.py (read here without importing the package)
VERSION = re.search(r'__version__ = "([^"]+)"', Path(__file__).with_name("nbest_eval").joinpath("version.py")
                    .read_text(encoding="utf-8")).group(1)
HF = [TORCH, "transformers>=4.46,<6", "accelerate>=0.26", "tokenizers>=0.20"]
TEST = ["pytest>=7", "hypothesis>=6", "pytrec-eval-terrier>=0.5.6", "ruff==0.17.6", "tensorboard>=2.10",
        "sentencepiece", "subword-nmt"]  # the subword pipelines of tests/adapters/test_subword_fairseq.py

setup(
    name="nbest-eval",
    version=VERSION,
    description="Evaluate machine-translation n-best lists against many weighted valid translations, "
                "offline and inside fairseq / Hugging Face training loops",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["nbest_eval", "nbest_eval.*"]),
    install_requires=["sacrebleu>=2.3,<3", "numpy>=1.21", "scipy>=1.7", "tqdm>=4.60", "matplotlib>=3.5"],
    extras_require={
        "fairseq": FAIRSEQ,
        "hf": HF,
        "test": TEST,
        "all": sorted(set(FAIRSEQ + HF + TEST)),
    },
    entry_points={"console_scripts": ["nbest-eval=nbest_eval.cli:main"]},
    classifiers=["Programming Language :: Python :: 3", "Topic :: Scientific/Engineering :: Artificial Intelligence"],
)
