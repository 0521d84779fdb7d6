"""Where an architecture comes from: a preset name, a local ``config.json``, or an S3 model prefix.

Every failure is a :class:`SpecError` whose one problem (field ``model.architecture``) says what
was read, what went wrong and what to do. The planner does no I/O with AWS itself: an ``s3://`` source
is read by the reader passed in, :func:`hyperpod_dpd.clients.aws.read_model_config` in real use.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hyperpod_dpd.contracts.linux import path_error
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec.architecture import PRESETS, ModelArchitecture, UnsizableArchitecture, architecture_from_config

CONFIG_NAME = "config.json"
FIELD = "model.architecture"
# ``read_s3(bucket, key)``: the object's bytes, or a SpecError on ``model.architecture`` saying why not.
S3Reader = Callable[[str, str], bytes]


def _fail(source: str, message: str, fix: str) -> SpecError:
    return SpecError([Problem(field=FIELD, value=source, message=message, fix=fix)])


def load_architecture(source: str, *, read_s3: S3Reader | None = None) -> ModelArchitecture:
    """A preset name, a local ``config.json`` (or the folder holding it), or ``s3://bucket/prefix``.

    For S3, ``prefix/config.json`` is read (or the object itself when the URI ends in ``.json``) with
    ``read_s3``, e.g. ``functools.partial(hyperpod_dpd.clients.aws.read_model_config, s3_client=...)``.
    Missing objects, denied access, missing credentials, malformed JSON and unsizable architectures (MLA,
    hybrid, sliding-window) raise :class:`SpecError`.
    """
    text = source.strip()
    if text in PRESETS:
        return PRESETS[text]
    if text.startswith("s3://"):
        return _from_mapping(text, _read_s3(text, read_s3))
    unusable = path_error(text)
    if unusable:
        raise _fail(source, f"is neither a preset nor a path: it {unusable}",
                    f"give a preset ({', '.join(PRESETS)}), the model's config.json, or s3://bucket/prefix")
    path = Path(text).expanduser()
    if path.is_dir():
        path = path / CONFIG_NAME
    if not path.exists():
        raise _fail(source, f"is neither a preset nor an existing file ({path} does not exist)",
                    f"give a preset ({', '.join(PRESETS)}), the model's config.json, or s3://bucket/prefix")
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise _fail(source, f"cannot be read: {getattr(err, 'strerror', None) or err}",
                    "check the path and its permissions") from None
    return _from_mapping(str(path), _parse(str(path), raw))


def _parse(where: str, raw: str | bytes) -> Mapping[str, Any]:
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise _fail(where, f"is not valid JSON: {err}", "give the model's Hugging Face config.json") from None
    if not isinstance(data, Mapping):
        raise _fail(where, "is JSON but not an object", "give the model's Hugging Face config.json")
    return data


def _from_mapping(where: str, config: Mapping[str, Any]) -> ModelArchitecture:
    try:
        arch = architecture_from_config(config, name=str(config.get("_name_or_path") or where))
    except UnsizableArchitecture as err:
        raise _fail(where, f"cannot be sized: {err}",
                    "plan this model by other means; the planner does not guess a KV cache it cannot "
                    "compute") from None
    return arch


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, key of the config): ``prefix/config.json``, or the .json named."""
    rest = uri.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not bucket:
        raise _fail(uri, "has no bucket", "write s3://bucket/prefix")
    key = prefix if prefix.endswith(".json") else (f"{prefix}/{CONFIG_NAME}" if prefix else CONFIG_NAME)
    return bucket, key


def _read_s3(uri: str, read_s3: S3Reader | None) -> Mapping[str, Any]:
    bucket, key = split_s3_uri(uri)
    if read_s3 is None:
        raise _fail(uri, "is in S3, and no S3 reader was given",
                    "pass read_s3=hyperpod_dpd.clients.aws.read_model_config, or copy config.json locally and "
                    "pass its path")
    return _parse(f"s3://{bucket}/{key}", read_s3(bucket, key))
