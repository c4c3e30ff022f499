"""Train a Quoter model: `python train.py [OPTIONS]` is `quoter train [OPTIONS]` (see --help), e.g.
`python train.py --config configs/en-offline.yaml --data FILE --output DIR --set joint.epochs=2`."""

import sys

from quoter.cli import main

if __name__ == "__main__":
    sys.argv.insert(1, "train")
    main()
