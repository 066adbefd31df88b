"""Network definitions (``chainspec/networks/*.yml``): loading and validation.

A definition is public data only. Validation is a JSON schema for shape, then the checks a
schema cannot express; every error names the file, the field path, the value and the rule.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ops_tools.chainspec.keys import (
    InvalidKey,
    account_id,
    ed25519_public,
    public_from_peer_id,
    sr25519_public,
)
from ops_tools.errors import InputError


@dataclass(frozen=True)
class Network:
    path: Path
    sha256: str
    data: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.data["id"])


def _schema() -> dict[str, Any]:
    text = resources.files("ops_tools.chainspec").joinpath("network_schema.json").read_text()
    return json.loads(text)


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 70 else text[:67] + "..."


def load_network(path: str | Path) -> Network:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"network definition {p}: no such file") from None
    except OSError as exc:
        raise InputError(f"network definition {p}: cannot read it: {exc.strerror}") from None
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise InputError(
            f"network definition {p}: not valid YAML: {exc}".replace("\n", " ")
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"network definition {p}: expected a mapping at the top level")
    validate_network(data, str(p))
    return Network(p, hashlib.sha256(raw).hexdigest(), data)


def validate_network(data: dict[str, Any], where: str) -> None:
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), str(e.path)))
    if errors:
        err = errors[0]
        field = _path(err.absolute_path)
        if err.validator == "required":
            raise InputError(f"network definition {where}: {err.message} (in {field})")
        if err.validator == "additionalProperties":
            raise InputError(
                f"network definition {where}: {field}: {err.message}; remove or rename it"
            )
        raise InputError(
            f"network definition {where}: field {field}: value {_short(err.instance)} breaks"
            f" the rule '{err.validator}: {_short(err.validator_value)}'"
        )
    _check_semantics(data, where)


def _check_semantics(data: dict[str, Any], where: str) -> None:
    prefix = int(data["ss58_prefix"])

    def check(field: str, value: str, fn: Any) -> bytes:
        try:
            return fn(value, prefix) if fn is not public_from_peer_id else fn(value)
        except InvalidKey as exc:
            raise InputError(
                f"network definition {where}: field {field}: {value!r} {exc}"
            ) from None

    seen: dict[tuple[str, bytes], str] = {}

    def unique(kind: str, key: bytes, field: str) -> None:
        other = seen.setdefault((kind, key), field)
        if other != field:
            raise InputError(
                f"network definition {where}: field {field}: duplicate {kind} key, already used"
                f" by {other}; every authority needs keys of its own"
            )

    names: set[str] = set()
    for i, auth in enumerate(data["authorities"]):
        base = f"authorities[{i}]"
        if auth["name"] in names:
            raise InputError(
                f"network definition {where}: field {base}.name: {auth['name']!r} is used twice"
            )
        names.add(auth["name"])
        unique("aura", check(f"{base}.aura", auth["aura"], sr25519_public), f"{base}.aura")
        unique(
            "grandpa", check(f"{base}.grandpa", auth["grandpa"], ed25519_public), f"{base}.grandpa"
        )
        unique(
            "peer id",
            check(f"{base}.peer_id", auth["peer_id"], public_from_peer_id),
            f"{base}.peer_id",
        )
    check("sudo", data["sudo"], account_id)
    ed = int(data["existential_deposit"])
    accounts: set[bytes] = set()
    for i, acc in enumerate(data["accounts"]):
        field = f"accounts[{i}]"
        who = check(f"{field}.address", acc["address"], account_id)
        if who in accounts:
            raise InputError(
                f"network definition {where}: field {field}.address: account endowed twice"
            )
        accounts.add(who)
        if acc["balance"] < ed:
            raise InputError(
                f"network definition {where}: field {field}.balance: {acc['balance']} plancks is"
                f" below the existential deposit of {ed}; the account would not exist at genesis"
            )
