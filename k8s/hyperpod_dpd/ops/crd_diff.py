"""``verify``'s ``operator CRD`` row: the live ``InferenceEndpointConfig`` CRD against the structure this
package ships, in every run (``--no-crd-diff`` leaves it out).

An operator newer (or older) than the one whose CRD ships in ``hyperpod_dpd.contracts.crd`` may add or remove
fields. The manifests and the spec rules know only the shipped structure, so the difference is what
the checks cannot know. Given the manifest the chart renders for the spec, a field it sets that the
live CRD lacks fails (the API server would prune or refuse it); other removed fields and added ones
are listed. Without a manifest every removed field fails. The CRD is read with the cluster-scoped
custom-object GET (``apiextensions.k8s.io/v1``), which needs RBAC ``get`` on
``customresourcedefinitions``; a user without it gets a SKIP row saying so.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hyperpod_dpd.clients.checks import Check, errored, failed, passed, skipped
from hyperpod_dpd.clients.kube import KubeApi, KubeError
from hyperpod_dpd.contracts.crd import v1_schema
from hyperpod_dpd.contracts.operator import IEC_GROUP, IEC_PLURAL, IEC_VERSION

CRD_DIFF = "operator CRD"
CRD_NAME = f"{IEC_PLURAL}.{IEC_GROUP}"
SHOWN = 8
OPT_OUT = "--no-crd-diff"
RBAC = "RBAC get on customresourcedefinitions.apiextensions.k8s.io (cluster-scoped)"


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


def set_paths(document: Mapping[str, Any], schema: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """The field paths (as :func:`field_paths` names them) that ``document`` sets, following ``schema``.

    Keys the schema does not describe (``metadata.name``, free-form objects) are left out: only fields
    a CRD can add or remove are compared.
    """
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for key, value in document.items():
        if key in properties:
            path, child = (f"{prefix}.{key}" if prefix else key), properties[key]
        elif isinstance(extra, Mapping):
            path, child = f"{prefix}{{}}", extra
        else:
            continue
        if key in properties:
            yield path
        yield from _set_below(value, child, path)


def _set_below(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[str]:
    if isinstance(value, Mapping):
        yield from set_paths(value, schema, path)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            yield from _set_below(item, schema["items"], f"{path}[]")


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


def check_live_crd(kube: KubeApi, *, manifest: Mapping[str, Any] | None = None) -> Check:
    """Compare the live CRD with the shipped one; with ``manifest``, fail only on fields it sets."""
    try:
        crd = kube.crd(CRD_NAME)
    except KubeError as error:
        if error.status == 403:
            return skipped(CRD_DIFF, f"not compared: {error}; it needs {RBAC} (or pass {OPT_OUT})")
        return errored(CRD_DIFF, str(error))
    if crd is None:
        return failed(CRD_DIFF, f"{CRD_NAME} is not installed: the inference operator add-on is missing")
    if live_schema(crd) is None:
        return failed(CRD_DIFF, f"{CRD_NAME} serves no {IEC_VERSION} version: the manifests are {IEC_VERSION}")
    added, removed = diff(crd)
    if manifest is not None:
        used = set(set_paths(manifest, v1_schema()))
        needed = [path for path in removed if path in used]
        unset = [path for path in removed if path not in used]
        notes = ([f"it lacks {len(unset)} field(s) this spec does not set: {_some(unset)}"] if unset else []) \
            + ([f"it adds {len(added)} field(s) the checks do not know: {_some(added)}"] if added else [])
        tail = "".join(f"; {note}" for note in notes)
        if needed:
            return failed(CRD_DIFF, f"the live CRD lacks {len(needed)} field(s) the manifest sets: {_some(needed)}; "
                          "install the operator version whose CRD ships here (-c inference_addon_version=) or "
                          f"leave those settings out{tail}")
        if notes:
            return passed(CRD_DIFF, f"the live CRD has every field the manifest sets{tail}")
        return passed(CRD_DIFF, "the live CRD has exactly the fields of the shipped one")
    if removed:
        return failed(CRD_DIFF, f"the live CRD lacks {len(removed)} field(s) the shipped one has: {_some(removed)}"
                      + (f"; it adds {_some(added)}" if added else ""))
    if added:
        return passed(CRD_DIFF, f"the live CRD adds {len(added)} field(s) the checks do not know: {_some(added)}")
    return passed(CRD_DIFF, "the live CRD has exactly the fields of the shipped one")
