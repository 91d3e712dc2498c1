"""The repository root's conftest: pytest (prepend import mode) puts this folder on ``sys.path``, so
that the tests import the experiments' code (``experiments``), which is not installed. The shared
fixtures are in tests/conftest.py."""
