"""Serve Quoter over HTTP: `python serve.py [OPTIONS]` is `quoter serve [OPTIONS]` (see --help)."""

import sys

from quoter.cli import main

if __name__ == "__main__":
    sys.argv.insert(1, "serve")
    main()
