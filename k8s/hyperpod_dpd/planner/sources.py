"""Where an architecture comes from: a preset name, a local ``config.json``, or an S3 model prefix.

Every failure is a :class:`SpecError` whose one problem (field ``model.architecture``) says what
was read, what went wrong and what to do; boto3 is imported only for ``s3://`` sources.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hyperpod_dpd.contracts.linux import path_error
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec.architecture import PRESETS, ModelArchitecture, UnsizableArchitecture, architecture_from_config

CONFIG_NAME = "config.json"
FIELD = "model.architecture"
# S3 error codes that mean "it is not there"; "you may not read this" is classified by hyperpod_dpd.clients.aws.
_MISSING = {"NoSuchKey", "404", "NotFound", "NoSuchBucket"}


def _fail(source: str, message: str, fix: str) -> SpecError:
    return SpecError([Problem(field=FIELD, value=source, message=message, fix=fix)])


def load_architecture(source: str, *, s3_client: Any = None) -> ModelArchitecture:
    """A preset name, a local ``config.json`` (or the folder holding it), or ``s3://bucket/prefix``.

    For S3, ``prefix/config.json`` is read (or the object itself when the URI ends in ``.json``) with
    ``s3_client`` or a default boto3 client. Missing objects, denied access, missing credentials,
    malformed JSON and unsizable architectures (MLA, hybrid, sliding-window) raise :class:`SpecError`.
    """
    text = source.strip()
    if text in PRESETS:
        return PRESETS[text]
    if text.startswith("s3://"):
        return _from_mapping(text, _read_s3(text, s3_client))
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


def _read_s3(uri: str, s3_client: Any) -> Mapping[str, Any]:
    import botocore.exceptions  # noqa: PLC0415 - only S3 sources need boto3

    from hyperpod_dpd.clients.aws import is_access_denied, is_credentials_problem  # noqa: PLC0415

    bucket, key = split_s3_uri(uri)
    where = f"s3://{bucket}/{key}"
    try:
        if s3_client is None:
            import boto3  # noqa: PLC0415

            s3_client = boto3.client("s3")
        response = s3_client.get_object(Bucket=bucket, Key=key)
        body = response["Body"].read()
    except botocore.exceptions.ClientError as err:
        error = err.response.get("Error", {})
        code = str(error.get("Code", ""))
        detail = error.get("Message") or code
        if is_access_denied(err) or is_credentials_problem(err):
            raise _fail(where, f"cannot be read: access denied ({detail})",
                        f"grant s3:GetObject on arn:aws:s3:::{bucket}/{key} to the credentials in use, "
                        "or copy config.json locally and pass its path") from None
        if code in _MISSING:
            what = "the bucket does not exist" if code == "NoSuchBucket" else "the object does not exist"
            raise _fail(where, f"cannot be read: {what} ({detail})",
                        "point at the prefix that holds the weights and their config.json") from None
        raise _fail(where, f"cannot be read: {code or 'S3 error'} ({detail})",
                    "check the URI, the region and your credentials") from None
    except botocore.exceptions.NoCredentialsError:
        raise _fail(where, "cannot be read: no AWS credentials were found",
                    "configure credentials (AWS_PROFILE, environment or instance role), or copy config.json "
                    "locally and pass its path") from None
    except botocore.exceptions.BotoCoreError as err:
        raise _fail(where, f"cannot be read: {err}", "check the network, the region and your credentials") from None
    return _parse(where, body)
