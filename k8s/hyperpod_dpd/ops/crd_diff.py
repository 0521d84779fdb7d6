"""``verify --crd-diff``: the live ``InferenceEndpointConfig`` CRD against the structure this package ships.

An operator newer (or older) than the one whose CRD ships in ``hyperpod_dpd.crd`` may add or remove
fields. The manifests and the spec rules know only the shipped structure, so the difference is what
the checks cannot know: fields removed from the live CRD fail (a manifest may use them), fields added
are listed. The CRD is read with the cluster-scoped custom-object GET (``apiextensions.k8s.io/v1``),
which the read-only access ``verify`` already uses allows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hyperpod_dpd.crd import v1_schema
from hyperpod_dpd.operator_names import IEC_GROUP, IEC_PLURAL, IEC_VERSION
from hyperpod_dpd.ops.checks import Check, errored, failed, passed
from hyperpod_dpd.ops.kube import KubeApi, KubeError

CRD_DIFF = "operator CRD"
CRD_NAME = f"{IEC_PLURAL}.{IEC_GROUP}"
SHOWN = 8


def field_paths(schema: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Every property path of an OpenAPI schema (``spec.worker.resources``; list items as ``[]``)."""
    for name, child in sorted(schema.get("properties", {}).items()):
        path = f"{prefix}.{name}" if prefix else name
        yield path
        yield from field_paths(child, path)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from field_paths(items, f"{prefix}[]")
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield from field_paths(extra, f"{prefix}{{}}")


def live_schema(crd: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for version in crd.get("spec", {}).get("versions", []):
        if version.get("name") == IEC_VERSION:
            schema: Mapping[str, Any] | None = version.get("schema", {}).get("openAPIV3Schema")
            return schema
    return None


def diff(crd: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(added, removed) field paths of the live CRD's ``v1`` schema against the shipped one."""
    live = live_schema(crd)
    shipped = set(field_paths(v1_schema()))
    found = set(field_paths(live)) if live is not None else set()
    return sorted(found - shipped), sorted(shipped - found)


def _some(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def check_live_crd(kube: KubeApi) -> Check:
    try:
        crd = kube.crd(CRD_NAME)
    except KubeError as error:
        return errored(CRD_DIFF, str(error))
    if crd is None:
        return failed(CRD_DIFF, f"{CRD_NAME} is not installed: the inference operator add-on is missing")
    if live_schema(crd) is None:
        return failed(CRD_DIFF, f"{CRD_NAME} serves no {IEC_VERSION} version: the manifests are {IEC_VERSION}")
    added, removed = diff(crd)
    if removed:
        return failed(CRD_DIFF, f"the live CRD lacks {len(removed)} field(s) the shipped one has: {_some(removed)}"
                      + (f"; it adds {_some(added)}" if added else ""))
    if added:
        return passed(CRD_DIFF, f"the live CRD adds {len(added)} field(s) the checks do not know: {_some(added)}")
    return passed(CRD_DIFF, "the live CRD has exactly the fields of the shipped one")
