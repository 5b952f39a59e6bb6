"""``python -m netcast``: the command line."""

from netcast.cli import main

main()
