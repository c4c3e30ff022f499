"""What the libraries under the command line may print on its stderr: their warnings and errors, and their
progress bars only where Quoter draws its own (quoter.progress), on a terminal. Their informational lines
(Lightning's hardware report and advertisement, bm25s's debug lines) are not for the user of a command."""

from __future__ import annotations

import logging
import os

from quoter.progress import bars_drawn


def quiet_libraries() -> None:
    """Set up stderr for the libraries; before they are imported, since some read this when they are."""
    if not bars_drawn():
        # transformers' "Loading weights" bars and the hub's downloads; a user's own setting wins.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # A handler of the root logger that lets through warnings and errors only. While the root logger has a
    # handler, no library installs its own (Lightning, or onnxruntime through logging.warning, which
    # would then pass on every line of a library that logs at DEBUG level, as bm25s does). Logging set up
    # already (by an embedding program, or by an earlier run in this process) is left as it is.
    if logging.root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))  # as when a library set up logging itself
    logging.root.addHandler(handler)
