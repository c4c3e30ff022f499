"""Batch recommendation: the contexts of a file ranked into a JSON lines file that is never half written, and
resumed only by the run that stopped. Import from the submodules."""
