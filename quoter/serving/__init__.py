"""Serving bundles: a recommender that micro-batches concurrent requests through the context encoder over a
live quote set, the recommenders a server hosts, and its settings.

    recommender.py, micro_batching.py   one language's ranking, concurrent requests encoded together
    hosting.py, chinese_merge.py        which recommenders a server hosts; Chinese without a language
    settings.py                         the settings of `quoter serve`
    live/                               the live quote set: index, store on disk, live fusion
    http/                               the FastAPI app, its schemas, limits and errors, the demo page

Import from the submodules."""
