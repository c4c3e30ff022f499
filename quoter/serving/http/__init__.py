"""The HTTP layer of the server: the FastAPI app and its schemas, request bodies, limits and admission, Host
checks, errors that never echo input, the demo page and its security headers. Import from the submodules."""
