"""The API does what its OpenAPI document says, checked by Schemathesis in-process against the ASGI app of
three tiny bundles (so that the language rules of several hosted languages are in play) with an API key:
requests it generates from the document, valid and invalid, get no 5xx, no error outside the one error
model, no status or body the document does not list, and valid ones are accepted, invalid ones refused."""

import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings

from quoter.languages import Language
from quoter.serving.http.app import AppConfig, create_app
from quoter.serving.http.server_limits import ServerLimits
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import tiny_bundle

KEY = "conformance-key"
# Examples per operation and generation mode: enough to meet every branch of the request schemas, within a
# minute for the whole file on a loaded 2-core machine.
EXAMPLES = 30
CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {"mode": "all", "max-examples": EXAMPLES, "deterministic": True},
        "checks": {"enabled": True},
        "auth": {"openapi": {"APIKeyHeader": {"api_key": KEY}}},
    }
)


def conformance_app():
    """The app under test; the bundles' files are read as they are made, so their folder can go."""
    with tempfile.TemporaryDirectory() as folder:
        recommenders = [Recommender(tiny_bundle(Path(folder, language.value), language)) for language in Language]
    # "testserver" is the Host header of Schemathesis's ASGI client.
    config = AppConfig(api_key=KEY, limits=ServerLimits(allowed_hosts=("testserver",)))
    return create_app(recommenders, config)


# Loaded as the module is collected: Schemathesis makes one test per operation from it.
schema = schemathesis.openapi.from_asgi("/openapi.json", conformance_app(), config=CONFIG)


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_conforms_to_its_openapi_document(case):
    response = case.call_and_validate()
    assert response.status_code < 500
    if response.status_code >= 400:
        assert response.headers["content-type"] == ["application/json"], response.text
