"""The package's version (``pyproject.toml``'s, checked by ``tests/test_cli_reader.py``)."""

__version__ = "0.2.0.dev0"
