"""The OpenAPI description (collector/openapi.json, served at /openapi.json) and the app agree:
every route and method is described, every described one exists, every problem type is listed,
and the document is well-formed OpenAPI 3.1 with resolvable references."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from client_sdk.protocol import PROBLEM_TYPES
from collector.ingest import REJECTION_CODES

DOCUMENT_PATH = Path(__file__).resolve().parents[2] / "collector" / "openapi.json"
METHODS = {"get", "post", "put", "patch", "delete"}


def document() -> dict[str, Any]:
    return dict(json.loads(DOCUMENT_PATH.read_text()))


def app_routes(app: Flask) -> set[tuple[str, str]]:
    routes = set()
    for rule in app.url_map.iter_rules():
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
        for method in rule.methods or ():
            if method.lower() in METHODS:
                routes.add((path, method.lower()))
    return routes


def described_routes(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (path, method)
        for path, item in doc["paths"].items()
        for method in item
        if method in METHODS
    }


def test_every_route_is_described_and_every_described_route_exists(app: Flask) -> None:
    doc = document()
    assert app_routes(app) == described_routes(doc)


def test_the_served_description_is_the_repository_file(client: FlaskClient) -> None:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.content_type == "application/json"
    assert response.get_json() == document()


def test_the_description_is_openapi_3_1_with_resolvable_references() -> None:
    doc = document()
    assert doc["openapi"].startswith("3.1.")
    references: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                references.append(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    assert references
    for reference in references:
        assert reference.startswith("#/"), reference
        node: Any = doc
        for part in reference[2:].split("/"):
            assert part in node, f"{reference} does not resolve"
            node = node[part]
    operation_ids = [
        operation["operationId"]
        for item in doc["paths"].values()
        for method, operation in item.items()
        if method in METHODS
    ]
    assert len(operation_ids) == len(set(operation_ids))
    for path, item in doc["paths"].items():
        for name in re.findall(r"{([^}]+)}", path):
            for method, operation in item.items():
                parameters = {(p["in"], p["name"]) for p in operation.get("parameters", [])}
                assert ("path", name) in parameters, (path, method, name)


def test_every_problem_type_and_rejection_code_is_described() -> None:
    doc = document()
    described = {entry["type"] for entry in doc["x-problem-types"]}
    assert described == set(PROBLEM_TYPES.values())
    problem_enum = doc["components"]["schemas"]["Problem"]["properties"]["type"]["enum"]
    assert set(problem_enum) == set(PROBLEM_TYPES.values()) | {"about:blank"}
    rejected = doc["components"]["schemas"]["UploadResult"]["properties"]["rejected"]
    assert rejected["items"]["properties"]["code"]["enum"] == list(REJECTION_CODES)
    for item in doc["paths"].values():
        for method, operation in item.items():
            if method in METHODS:
                assert "500" in operation["responses"], (method, operation["operationId"])
