"""The ``shardsched`` command line."""

from shardsched.cli.main import main

__all__ = ["main"]
