"""The test suite, one folder per package of the code (see tests/conftest.py for the
markers and the make test-fast guard)."""
