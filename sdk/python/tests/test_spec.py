"""The SDK against den's one source of truth: api/openapi.yaml for the
shape of every model and request, `den --help` for the words of every verb.
These need no dend."""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import re
import subprocess
import typing
from typing import Any

import pytest

import den
from den import _wire, models
from conftest import REPO, need

yaml = pytest.importorskip("yaml")


@pytest.fixture(scope="module")
def schemas():
    with open(REPO / "api" / "openapi.yaml") as f:
        return yaml.safe_load(f)["components"]["schemas"]


MODELS = [m for m in vars(models).values() if dataclasses.is_dataclass(m) and getattr(m, "__schema__", None)]
BY_SCHEMA = {m.__schema__: m for m in MODELS}


def spec_type(prop: dict, schemas: dict):
    """The Python type a schema property decodes to."""
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        if name in BY_SCHEMA:
            return BY_SCHEMA[name]
        target = schemas[name]
        return dict if target.get("type", "object") == "object" and "properties" in target else spec_type(target, schemas)
    if "allOf" in prop:
        return spec_type(prop["allOf"][0], schemas)
    t = prop.get("type")
    if t == "array":
        return (list, spec_type(prop.get("items", {}), schemas))
    if t == "object":
        return dict
    if t is None:
        return Any
    if t == "string" and prop.get("format") == "date-time":
        return datetime.datetime
    return {"string": str, "integer": int, "number": float, "boolean": bool}[t]


def py_type(hint):
    hint = _wire.unwrap_optional(hint)
    origin = typing.get_origin(hint)
    if origin is list:
        return (list, py_type(typing.get_args(hint)[0]))
    if origin is dict:
        return dict
    return hint


def test_every_model_names_a_schema(schemas):
    assert len(MODELS) >= 15
    for m in MODELS:
        assert m.__schema__ in schemas, f"{m.__name__} names schema {m.__schema__}, which api/openapi.yaml lacks"


@pytest.mark.parametrize("model", MODELS, ids=[m.__name__ for m in MODELS])
def test_model_fields_match_the_schema(model, schemas):
    props = schemas[model.__schema__]["properties"]
    fields = {_wire.json_name(f): f for f in _wire.wire_fields(model)}
    assert set(fields) - set(props) == set(), f"{model.__name__} has fields the schema lacks"
    assert set(props) - set(fields) == set(), f"{model.__name__} lacks properties of the schema"
    hints = _wire.type_hints(model)
    for name, f in fields.items():
        assert py_type(hints[f.name]) == spec_type(props[name], schemas), f"{model.__name__}.{f.name}"


# SDK methods whose keyword parameters are a request schema's properties:
# (method, schema, parameters that are the SDK's own, properties it leaves out, renames).
REQUESTS = [
    ("create", "CreateSandboxRequest", set(), set(), {}),
    ("exec_stream", "ExecRequest", {"sandbox", "on_start"}, {"detach"}, {}),
    ("exec_detached", "ExecRequest", {"sandbox"}, {"stdin", "tty", "rows", "cols", "detach"}, {}),
    ("set_limits", "LimitsRequest", {"sandbox"}, set(), {}),
    ("set_policy", "Policy", {"sandbox", "policy"}, set(), {}),
    ("set_network", "NetworkPolicy", {"sandbox"}, set(), {}),
    ("checkpoint", "CheckpointRequest", {"sandbox"}, set(), {}),
    ("restore", "RestoreRequest", {"sandbox"}, set(), {}),
    ("fork", "ForkRequest", {"sandbox"}, set(), {}),
    ("recover", "RecoverRequest", {"sandbox"}, set(), {}),
    # parents_by_root is for a call made as a user (?as=), which is the
    # E2B door's; this SDK's file calls are root's.
    ("mkdir", "MkdirRequest", {"sandbox"}, {"parents_by_root"}, {}),
    ("move", "MoveRequest", {"sandbox"}, set(), {}),
    ("expose_port", "ExposePortRequest", {"sandbox", "port"}, set(), {}),
    ("signal", "SignalRequest", {"sandbox", "run"}, set(), {}),
    ("grant_secret", "SecretGrant", {"sandbox"}, set(), {"secret": "name"}),
    ("set_setup", "SetupRequest", {"sandbox"}, set(), {}),
    ("rebase", "RebaseRequest", {"sandbox"}, set(), {}),
    ("set_harness", "Harness", {"sandbox"}, set(), {}),
    ("add_peer", "AddPeerRequest", {"sandbox"}, set(), {"other": "sandbox"}),
    ("refresh_peer", "RefreshPeerRequest", {"sandbox", "peer"}, set(), {}),
    ("add_service", "ServiceSpec", {"sandbox"}, set(), {}),
    ("set_warm", "SetWarmRequest", {"image"}, set(), {}),
    ("add_ssh_key", "AddSSHKeyRequest", set(), set(), {}),
]


@pytest.mark.parametrize("method,schema,own,left_out,renames", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_request_parameters_match_the_schema(schemas, method, schema, own, left_out, renames):
    params = [p for p in inspect.signature(getattr(den.Client, method)).parameters if p != "self"]
    names = {renames.get(p, p[:-1] if p.endswith("_") else p) for p in params if p not in own}
    assert names == set(schemas[schema]["properties"]) - left_out


def readme_rows():
    """The verb table of sdk/python/README.md: (methods, CLI command, words)."""
    text = (REPO / "sdk" / "python" / "README.md").read_text()
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`client."):
            methods = re.findall(r"`client\.(\w+)\(", cells[0])
            cli = re.findall(r"`(den [^`]*)`", cells[1])
            rows.append((methods, cli[0] if cli else "", cells[2]))
    return rows


def test_readme_lists_every_verb():
    listed = {m for methods, _, _ in readme_rows() for m in methods}
    public = {n for n in dir(den.Client) if not n.startswith("_") and callable(getattr(den.Client, n))}
    public -= {"from_env", "close"}  # the client's own, not verbs
    assert public - listed == set(), "README.md's table lacks these verbs"
    assert listed - public == set(), "README.md's table names verbs the client lacks"


def test_readme_uses_the_cli_words():
    den_cli = need("DEN_TEST_CLI")
    shorts = {}
    for group in ("", "port", "secret", "checkpoint", "owner", "peer", "image", "ssh-key", "service", "harness"):
        out = subprocess.run([den_cli] + ([group] if group else []) + ["--help"], capture_output=True, text=True,
                             check=True).stdout
        block = out.split("Available Commands:", 1)[1].split("\n\n", 1)[0]
        for line in block.strip().splitlines():
            name, short = line.strip().split(None, 1)
            shorts[("den " + group + " " + name).replace("  ", " ")] = short.strip()
    checked = 0
    for methods, cli, words in readme_rows():
        if not cli:
            continue
        command = " ".join(w for w in cli.split() if re.fullmatch(r"[a-z][a-z-]*", w))
        assert command in shorts, f"{cli} is not a den command"
        assert words.startswith(shorts[command]), f"{methods}: {words!r} should say {shorts[command]!r} as `{command} --help` does"
        checked += 1
    assert checked >= 20
