"""The ``netcast`` command line: parses arguments and renders results; the work is done by
functions in ``netcast.optimize`` and ``netcast.session`` that the Python API calls too."""

from netcast.cli.app import app, main

__all__ = ["app", "main"]
