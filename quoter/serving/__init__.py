"""Serving a bundle: a faiss quote index that changes at run time, a recommender that batches concurrent
requests through the context encoder, the HTTP app, and batch recommendation over a file. Import from the
submodules."""
