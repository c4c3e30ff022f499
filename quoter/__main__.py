"""`python -m quoter` is the `quoter` command."""

from quoter.cli import main

main()
