"""A fuzz run of the live HTTP API from its OpenAPI description (collector/openapi.json), with
hypothesis: for every described operation, requests built from the described parameters and
bodies, mixed with arbitrary JSON, wrong media types and bad tokens, sent to a real gunicorn
collector. Every answer must be below 500, a status the description lists for that operation,
and a problem document when it is an error. Bounded: a fixed number of examples per operation,
derandomized (the same requests every run), no network beyond loopback.
"""

from __future__ import annotations

import json
import string
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.process import CollectorProcess

DOCUMENT = json.loads(
    (Path(__file__).resolve().parents[2] / "collector" / "openapi.json").read_text()
)
EXAMPLES_PER_OPERATION = 25
OPERATIONS = [
    (path, method, operation)
    for path, item in DOCUMENT["paths"].items()
    for method, operation in item.items()
    if method in {"get", "post", "put", "patch", "delete"}
]
CAMPAIGNS = [
    {
        "name": "fuzz-grr",
        "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
        "domain": ["a", "b", "c"],
        "min_batch_size": 1,
    },
    {
        "name": "fuzz-laplace",
        "mechanism": {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 1.0},
        "min_batch_size": 1,
    },
]

JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
ANY_JSON = st.recursive(
    JSON_LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = DOCUMENT
        for part in schema["$ref"][2:].split("/"):
            node = node[part]
        schema = node
    return schema


def from_schema(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that mostly fit ``schema`` (a subset of JSON Schema: what the description uses)."""
    schema = resolve(schema)
    if depth > 4:
        return JSON_LEAVES
    if "oneOf" in schema:
        return st.one_of([from_schema(s, depth + 1) for s in schema["oneOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return st.one_of([from_schema({**schema, "type": k}, depth) for k in kinds])
    if kinds == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        optional = sorted(set(properties) - required)
        extra = (
            st.dictionaries(st.text(max_size=8), ANY_JSON, max_size=2)
            if schema.get("additionalProperties", True) is not False
            else st.just({})
        )
        return st.builds(
            lambda fixed, chosen, more: {**more, **fixed, **chosen},
            st.fixed_dictionaries({k: from_schema(properties[k], depth + 1) for k in required}),
            st.fixed_dictionaries(
                {}, optional={k: from_schema(properties[k], depth + 1) for k in optional}
            ),
            extra,
        )
    if kinds == "array":
        return st.lists(from_schema(schema.get("items", {}), depth + 1), max_size=4)
    if kinds == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(max_size=schema.get("maxLength", 40))
    if kinds == "integer":
        return st.integers(
            min_value=schema.get("minimum", -(2**64)), max_value=schema.get("maximum", 2**64)
        )
    if kinds == "number":
        return st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
    if kinds == "boolean":
        return st.booleans()
    if kinds == "null":
        return st.none()
    return ANY_JSON


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CollectorProcess, dict]]:
    root = tmp_path_factory.mktemp("fuzz")
    with CollectorProcess(root / "collector.db", workers=2, log_dir=root) as collector:
        config_ids = {c["name"]: collector.create_campaign(c)["config_id"] for c in CAMPAIGNS}
        yield collector, config_ids


def fuzz_request(
    data: st.DataObject, path: str, method: str, operation: dict, config_ids: dict[str, str]
) -> dict[str, Any]:
    url_path = path
    query: dict[str, str] = {}
    headers: dict[str, str] = {}
    for parameter in operation.get("parameters", []):
        schema = parameter["schema"]
        if parameter["in"] == "path":
            value = data.draw(
                st.one_of(
                    st.sampled_from(sorted(config_ids)),
                    from_schema(schema),
                    st.text(alphabet=string.printable, min_size=1, max_size=30),
                ),
                label=parameter["name"],
            )
            url_path = url_path.replace(
                "{" + parameter["name"] + "}", urllib.parse.quote(str(value), safe="")
            )
        elif data.draw(st.booleans(), label=f"send {parameter['name']}"):
            value = data.draw(
                st.one_of(from_schema(schema), st.text(max_size=25)), label=parameter["name"]
            )
            if parameter["in"] == "query":
                query[parameter["name"]] = str(value)
            else:
                headers[parameter["name"]] = "".join(
                    c for c in str(value) if c.isascii() and c.isprintable()
                )
    if operation.get("security"):
        headers["Authorization"] = data.draw(
            st.sampled_from(["valid", "Bearer wrong-token", "Basic eA==", ""]), label="auth"
        )
    body: bytes | None = None
    content = operation.get("requestBody", {}).get("content", {})
    if content and "application/json" not in content:  # DAP's binary messages
        media_type = data.draw(st.sampled_from(sorted(content)), label="media type")
        body = data.draw(st.binary(max_size=300), label="body")
        headers["Content-Type"] = data.draw(
            st.sampled_from([media_type, "application/octet-stream"]), label="content type"
        )
    elif content:
        schema = content["application/json"]["schema"]
        document = data.draw(st.one_of(from_schema(schema), ANY_JSON), label="body")
        if isinstance(document, dict) and "config_id" in document and data.draw(st.booleans()):
            name = url_path.rsplit("/", 2)[-2]
            document["config_id"] = config_ids.get(urllib.parse.unquote(name), "x")
        body = json.dumps(document).encode()
        headers["Content-Type"] = data.draw(
            st.sampled_from(
                ["application/json", "application/json; charset=latin-1", "text/plain"]
            ),
            label="content type",
        )
    return {
        "method": method.upper(),
        "path": url_path,
        "params": query,
        "headers": headers,
        "data": body,
    }


@pytest.mark.parametrize(
    ("path", "method", "operation"),
    OPERATIONS,
    ids=[operation["operationId"] for _, _, operation in OPERATIONS],
)
def test_the_live_api_never_answers_5xx(
    live: tuple[CollectorProcess, dict[str, str]], path: str, method: str, operation: dict
) -> None:
    collector, config_ids = live
    documented = set(operation["responses"])

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        request = fuzz_request(data, path, method, operation, config_ids)
        if request["headers"].get("Authorization") == "valid":
            request["headers"]["Authorization"] = collector.admin()["Authorization"]
        response = requests.request(
            request.pop("method"),
            collector.url + request.pop("path"),
            timeout=30,
            **request,
        )
        assert response.status_code < 500, (response.status_code, response.text[:500])
        assert str(response.status_code) in documented, (response.status_code, response.text)
        if response.status_code >= 400:
            assert response.headers["Content-Type"] == "application/problem+json"
            assert response.json()["status"] == response.status_code

    run()
