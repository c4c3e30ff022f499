"""The live quote set: quotes added and removed at run time, searched by a faiss index (exact or IVF), saved as
a snapshot plus an append-only log, and fused with the lexical signals of hybrid bundles. Import from the
submodules."""
