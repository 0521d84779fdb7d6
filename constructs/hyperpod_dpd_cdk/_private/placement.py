"""Where HyperPod nodes can go: AZ IDs, the regions they belong to, and instance-type offerings.

AZ *IDs* (``usw2-az2``) name the same physical zone in every account, unlike AZ names
(``us-west-2a``), which are shuffled per account; capacity reservations and training plans are
expressed in AZ IDs, so the constructs take an AZ ID and never an AZ name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from aws_cdk import Token

from hyperpod_dpd import DpdSpec, InstanceType, Problem
from hyperpod_dpd.contracts.zones import zone_settings

AZ_ID_PATTERN = re.compile(r"^(?P<code>[a-z]{3,4}[0-9])-az[0-9]+$")

# AZ ID prefix -> region, for the regions where a DPD instance type is offered by HyperPod
# (hyperpod_dpd.spec.instances) plus their neighbours. Source: the EC2 "AZ IDs" documentation, which
# derives the prefix from the region name (usw2 = us-west-2, apne1 = ap-northeast-1, ...).
AZ_ID_REGIONS: dict[str, str] = {
    "use1": "us-east-1", "use2": "us-east-2", "usw1": "us-west-1", "usw2": "us-west-2",
    "cac1": "ca-central-1", "sae1": "sa-east-1",
    "euc1": "eu-central-1", "euw1": "eu-west-1", "euw2": "eu-west-2", "euw3": "eu-west-3",
    "eun1": "eu-north-1", "eus1": "eu-south-1", "eus2": "eu-south-2",
    "apne1": "ap-northeast-1", "apne2": "ap-northeast-2", "apne3": "ap-northeast-3",
    "aps1": "ap-south-1", "aps2": "ap-south-2",
    "apse1": "ap-southeast-1", "apse2": "ap-southeast-2", "apse3": "ap-southeast-3", "apse4": "ap-southeast-4",
}


def region_of_az_id(az_id: str) -> str | None:
    """``us-west-2`` for ``usw2-az2``; ``None`` if the ID is malformed or from an unknown region."""
    match = AZ_ID_PATTERN.match(az_id)
    return AZ_ID_REGIONS.get(match.group("code")) if match else None


def az_id_problems(az_id: str, region: str, *, field: str = "availability_zone_id") -> Iterator[Problem]:
    """Problems with ``az_id`` for a stack in ``region`` (nothing is checked against a token region)."""
    if not AZ_ID_PATTERN.match(az_id):
        yield Problem(field=field, value=az_id, message="is not an Availability Zone ID",
                      fix="use an AZ ID such as 'usw2-az2' (aws ec2 describe-availability-zones "
                          "--query 'AvailabilityZones[].ZoneId'), not an AZ name such as 'us-west-2a'")
        return
    if Token.is_unresolved(region):
        return
    az_region = region_of_az_id(az_id)
    if az_region is None:
        yield Problem(field=field, value=az_id, message="has a region code this library does not know",
                      fix=f"use an AZ ID of {region} (known codes: {', '.join(sorted(AZ_ID_REGIONS))})")
    elif az_region != region:
        yield Problem(field=field, value=az_id, message=f"is in {az_region}, but the stack deploys to {region}",
                      fix=f"pick an AZ ID of {region}, or deploy the stack to {az_region} "
                          f"(env=cdk.Environment(region={az_region!r}); app.py: -c region={az_region})")


def instance_type_problems(instance_type: InstanceType, region: str, *, field: str,
                           training_plan_arn: str | None) -> Iterator[Problem]:
    """The network cannot place ``instance_type`` if HyperPod does not offer it in ``region``.

    p5e (``regions is None``) is offered only through training plans, so it needs one.
    """
    regions = instance_type.facts.regions
    if regions is None:
        if training_plan_arn is None:
            yield Problem(field=field, value=instance_type.api_name,
                          message="is offered by HyperPod only through a training plan (reserved capacity)",
                          fix="pass training_plan_arn (-c training_plan_arn=arn:aws:sagemaker:...:training-plan/...) "
                              "for a plan in the chosen AZ, or use ml.p5.48xlarge / ml.p5en.48xlarge")
        return
    if Token.is_unresolved(region) or region in regions:
        return
    yield Problem(field=field, value=instance_type.api_name,
                  message=f"is not offered by HyperPod in {region}",
                  fix=f"deploy to one of {', '.join(sorted(regions))}, or choose an instance type offered in {region}")


def zone_problems(spec: DpdSpec, *, region: str, availability_zone_id: str, field: str) -> Iterator[Problem]:
    """A zone the spec pins pods to must be the HyperPod subnet's: ``availability_zone_id`` in ``region``.

    A zone ID is compared exactly; a zone name only by its region (names map to IDs per account:
    ``preflight --availability-zone-id`` compares the mapping).
    """
    for setting in zone_settings(spec):
        where = f"{field}.{setting.field}"
        if setting.is_id and setting.value != availability_zone_id:
            yield Problem(field=where, value=setting.value, message=f"is not the HyperPod subnet's AZ ID "
                          f"{availability_zone_id!r}; pods pinned there never schedule",
                          fix=f"use {availability_zone_id}, or leave it out (the stack places every node there)")
        elif (not setting.is_id and setting.region is not None and not Token.is_unresolved(region)
              and setting.region != region):
            yield Problem(field=where, value=setting.value, message=f"is in {setting.region}, but the stack and its "
                          f"HyperPod nodes are in {region} ({availability_zone_id}); pods pinned there never schedule",
                          fix=f"leave it out (the stack places every node in {availability_zone_id}), or name the "
                              f"zone of {availability_zone_id} in {region}")
