"""Where a spec pins its pods to an Availability Zone: ``topology.availability_zone`` and zone node selectors.

A zone is named two ways: by name (``us-west-2b``, which maps to a different physical zone in each
account) and by ID (``usw2-az2``, the same everywhere). The stack places every HyperPod node in one
AZ ID; a spec that pins its pods elsewhere deploys, and its pods never schedule. These are the
settings the checks (``validation.hardware``, the stack, ``preflight``) compare with that zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hyperpod_dpd.spec import DpdSpec

AZ_NAME = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+[a-z]$")
# Well-known node labels (kubernetes.io well-known labels; EKS adds the zone ID label to its nodes).
ZONE_NAME_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"


@dataclass(frozen=True, kw_only=True)
class ZoneSetting:
    """One place the spec names a zone: the field, the value, and whether it is an AZ ID or a name."""

    field: str
    value: str
    is_id: bool

    @property
    def region(self) -> str | None:
        """The region of a zone name (``us-west-2b`` is in ``us-west-2``); ``None`` for an ID or a malformed name."""
        return self.value[:-1] if not self.is_id and AZ_NAME.match(self.value) else None


def zone_settings(spec: DpdSpec) -> list[ZoneSetting]:
    """Every zone the spec pins pods to, in field order."""
    found = []
    if spec.topology.availability_zone is not None:
        found.append(ZoneSetting(field="topology.availability_zone", value=spec.topology.availability_zone,
                                 is_id=False))
    for role_name, role in spec.roles():
        for key, value in role.node_selector.items():
            if key in ZONE_NAME_LABELS or key == ZONE_ID_LABEL:
                found.append(ZoneSetting(field=f"{role_name}.node_selector[{key!r}]", value=value,
                                         is_id=key == ZONE_ID_LABEL))
    return found
