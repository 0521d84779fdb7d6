"""Whether the aggregated twin serves what the DPD endpoint serves: an A/B of two checkpoints is no A/B.

Both ``InferenceEndpointConfig`` objects are on the cluster beside the twin's ``status.selector`` that bench reads
anyway. A twin rendered by :func:`~hyperpod_dpd.charts.aggregated.render_aggregated_endpoint_config` differs from
its endpoint only in ``pdSpec``, ``replicas`` and its names; anything else that differs is stated beside the A/B.
A difference in what the engine loads (the model's location or name, the image, ``--revision``,
``--quantization`` and the other flags in :data:`MODEL_FLAGS`) makes the A/B meaningless: the twin's latency
then belongs to another model, and the A/B gives no verdict. Another engine flag (``--max-model-len``,
``--gpu-memory-utilization``) is a difference the buyer should see but not a reason to refuse.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# vLLM flags that change the weights, their numbers or the tokens: a twin that differs in one serves another model
MODEL_FLAGS = frozenset({"--model", "--revision", "--code-revision", "--quantization", "-q", "--dtype",
                         "--kv-cache-dtype", "--tokenizer", "--tokenizer-revision", "--load-format",
                         "--served-model-name", "--hf-overrides", "--speculative-config"})


@dataclass(frozen=True, kw_only=True)
class IdentityDifference:
    """One thing the twin serves otherwise than the DPD endpoint: what, each side's value, and whether it changes
    the model (then the A/B has no verdict)."""

    what: str
    dpd: str
    twin: str
    changes_model: bool

    def render(self) -> str:
        return f"{self.what}: DPD {self.dpd}, twin {self.twin}"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _flags(args: Sequence[Any]) -> dict[str, str]:
    """An engine's ``args`` as flag -> value (``--flag value``, ``--flag=value``, or a bare switch: ``""``)."""
    found: dict[str, str] = {}
    items = [str(a) for a in args]
    index = 0
    while index < len(items):
        item = items[index]
        if item.startswith("-"):
            name, eq, value = item.partition("=")
            if not eq and index + 1 < len(items) and not items[index + 1].startswith("--"):
                value, index = items[index + 1], index + 1
            found[name] = value
        index += 1
    return found


def _source(spec: Mapping[str, Any]) -> str | None:
    """Where the weights come from, as one comparable string (the storage, its bucket or volume, the location)."""
    source = spec.get("modelSourceConfig")
    if not isinstance(source, Mapping):
        return None
    kind = str(source.get("modelSourceType", ""))
    storage = source.get(f"{kind}Storage") if kind else None
    where = ",".join(f"{k}={v}" for k, v in sorted(storage.items())) if isinstance(storage, Mapping) else ""
    return f"{kind}:{where}:{source.get('modelLocation', '')}"


def _shown(value: str | None) -> str:
    return "(not set)" if value is None else (value or "(set)")


def identity_differences(dpd: Mapping[str, Any] | None, twin: Mapping[str, Any] | None) -> list[IdentityDifference]:
    """What the twin's ``InferenceEndpointConfig`` serves otherwise than the DPD endpoint's; empty when either
    object (or its ``spec``) is not there, since nothing can be compared then."""
    mine, theirs = (dpd or {}).get("spec"), (twin or {}).get("spec")
    if not isinstance(mine, Mapping) or not isinstance(theirs, Mapping):
        return []
    found = []
    my_worker, their_worker = mine.get("worker") or {}, theirs.get("worker") or {}
    for what, a, b in (("model source", _source(mine), _source(theirs)),
                       ("model name", mine.get("modelName"), theirs.get("modelName")),
                       ("engine image", my_worker.get("image"), their_worker.get("image"))):
        if a != b:
            found.append(IdentityDifference(what=what, dpd=_shown(a), twin=_shown(b), changes_model=True))
    my_flags, their_flags = _flags(my_worker.get("args") or ()), _flags(their_worker.get("args") or ())
    for flag in sorted(set(my_flags) | set(their_flags)):
        a, b = my_flags.get(flag), their_flags.get(flag)
        if a != b:
            found.append(IdentityDifference(what=f"engine flag {flag}", dpd=_shown(a), twin=_shown(b),
                                            changes_model=flag in MODEL_FLAGS))
    return found


def refusal(differences: Sequence[IdentityDifference]) -> str | None:
    """Why the A/B gives no verdict (the differences that change the model), or None when it may."""
    model = [d.render() for d in differences if d.changes_model]
    if not model:
        return None
    return f"the twin serves another model than DPD ({'; '.join(model)})"
