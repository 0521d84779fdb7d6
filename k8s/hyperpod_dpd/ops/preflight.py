"""``preflight``: what a deploy would otherwise find out tens of minutes in, checked in seconds.

Each function returns one :class:`Check` and never raises for an AWS error: an access denied on
one call is that row's ``ERROR``, the other rows still run. :func:`run_preflight` is the whole command, from
a :class:`PreflightRequest` and the live systems in one :class:`~hyperpod_dpd.clients.seams.Seams`.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.clients.aws import (
    AWS_ERRORS,
    AwsClients,
    AwsUnavailable,
    describe_error,
    error_code,
    read_model_config,
)
from hyperpod_dpd.clients.checks import Check, errored, failed, passed, skipped
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.contracts.stack_defaults import (
    DEFAULT_AVAILABILITY_ZONE_ID,
    DEFAULT_HYPERPOD_CLUSTER,
    KUBERNETES_VERSION,
)
from hyperpod_dpd.contracts.tokenizer import vocabulary_choices, vocabulary_files
from hyperpod_dpd.contracts.zones import ZONE_ID_LABEL, ZoneSetting, zone_settings
from hyperpod_dpd.errors import SpecError, UsageError, warning_count
from hyperpod_dpd.ops.addons import check_addon_versions, check_existing_addons
from hyperpod_dpd.spec import DpdSpec, S3Source
from hyperpod_dpd.spec.architecture import unsizable_reason_for_model_name
from hyperpod_dpd.spec.units import format_bytes

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient

    from hyperpod_dpd.spec.architecture import ModelArchitecture

SPEC = "spec"
PLANNER = "planner"
QUOTA = "service quota"
AVAILABILITY_ZONE = "availability zone"
MODEL = "model weights"

SAGEMAKER_SERVICE_CODE = "sagemaker"


# --- instance counts ---------------------------------------------------------------------------


def bucket_region(spec: DpdSpec) -> str | None:
    """The spec's S3 bucket region, the last fallback for the AWS region."""
    source = spec.model.source
    return source.region if isinstance(source, S3Source) else None


def instances_needed(spec: DpdSpec) -> int:
    """Instances of ``spec.instance_type`` the endpoint needs at its largest (prefill + decode)."""
    return sum(spec.role_nodes(role) for _, role in spec.roles())


def quota_name(instance_type: str) -> str:
    return f"{instance_type} for cluster usage"


# --- the spec and the planner ------------------------------------------------------------------

Planner = Callable[..., Any]


def _load_planner() -> Planner | None:
    """``hyperpod_dpd.planner.plan``, or None when the planner is not installed."""
    try:
        module = importlib.import_module("hyperpod_dpd.planner")
    except ModuleNotFoundError as err:
        if err.name and err.name.startswith("hyperpod_dpd.planner"):
            return None
        raise
    found: Planner | None = getattr(module, "plan", None)
    return found


# An unknown architecture fails the row: tensor parallelism, memory and KV sizing went unchecked.
_UNKNOWN = ("the model architecture is unknown, so tensor parallelism, memory and KV sizing were not checked")
_UNKNOWN_FIX = ("To check them, set model.architecture to a preset, to explicit fields or to {config_json: PATH}, "
                "or put the model's config.json beside the weights in S3")

# A model refused by name skips the row: the checks cannot run for its architecture, whatever the spec says.
_UNSIZABLE = ("the checks cannot run for this architecture, so tensor parallelism, memory and KV sizing stay "
              "unchecked: it cannot be sized with the dense-attention formula")


def check_spec(spec: DpdSpec, *, source: str | None = None, planner: Planner | None = None,
               architecture_loader: Callable[[], ModelArchitecture] | None = None) -> tuple[Check, Check]:
    """Validation, then the planner (``hyperpod_dpd.planner.plan``, imported lazily, unless given).

    When the spec names no known architecture, ``architecture_loader`` (reading the weights'
    ``config.json``) is tried before the planner is skipped.
    """
    from hyperpod_dpd.validation import check  # noqa: PLC0415 - heavy

    try:
        checked = check(spec, source=source)
    except SpecError as err:
        return (failed(SPEC, _problems(err)),
                skipped(PLANNER, "the spec is invalid; fix the problems above first"))
    spec_row = passed(SPEC, "\n".join([f"valid ({warning_count(len(checked.warnings))})",
                                       *(w.render() for w in checked.warnings)]))
    plan = planner or _load_planner()
    if plan is None:
        return spec_row, skipped(PLANNER, "the planner (hyperpod_dpd.planner) is not installed")
    architecture, origin = checked.architecture, ""
    reason = unsizable_reason_for_model_name(checked.spec.model.name)
    if architecture is None and reason is not None:
        # Refused by name: no config.json or explicit shape can size it, so a failed row could never pass.
        return spec_row, skipped(PLANNER, f"{_UNSIZABLE}: {reason}")
    if architecture is None and architecture_loader is not None:
        try:
            architecture, origin = architecture_loader(), " (architecture read from the weights' config.json)"
        except SpecError as err:
            return spec_row, failed(PLANNER, f"{_UNKNOWN}: {_problems(err)}. {_UNKNOWN_FIX}")
    return spec_row, _run_planner(plan, checked.spec, architecture, origin)


def _run_planner(plan: Planner, spec: DpdSpec, architecture: ModelArchitecture | None, origin: str = "") -> Check:
    try:
        result = plan(spec, architecture=architecture)
    except SpecError as err:
        if architecture is None:
            return failed(PLANNER, f"{_UNKNOWN}: {_problems(err)}. {_UNKNOWN_FIX}")
        return failed(PLANNER, _problems(err))
    problems = [_render(p) for p in getattr(result, "problems", ())]
    warnings = [_render(w) for w in getattr(result, "warnings", ())]
    if problems:
        return failed(PLANNER, "\n".join([*problems, *warnings]))
    return passed(PLANNER, "\n".join([f"plan computed{origin} ({warning_count(len(warnings))}){_plan_summary(result)}",
                                       *warnings]))


def _plan_summary(result: object) -> str:
    """The headline sizing figures, when the plan offers them in its JSON form."""
    to_json = getattr(result, "to_json", None)
    try:
        figures: Any = to_json() if callable(to_json) else None
        at = figures["at_prompt"]
        return (f": a {at['tokens']}-token prompt moves {format_bytes(int(at['kv_bytes_per_request']))} of KV "
                f"({at['transfer_seconds_at_line_rate'] * 1000:.1f} ms at line rate); the PD buffer holds "
                f"{at['pd_buffer_transfers']} such transfers")
    except (KeyError, TypeError, ValueError):
        return ""


def _render(finding: object) -> str:
    render = getattr(finding, "render", None)
    return str(render()) if callable(render) else str(finding)


def _problems(err: SpecError) -> str:
    if not err.problems:
        return str(err)
    return "\n".join(p.render() for p in err.problems)


# --- service quota -----------------------------------------------------------------------------


@dataclass(frozen=True)
class InUse:
    count: int | None
    note: str


# The HyperPod cluster the CDK app creates with its default stack name.
CDK_DEFAULT_CLUSTER = DEFAULT_HYPERPOD_CLUSTER


def clusters_in_use(sagemaker: SageMakerClient, instance_type: str, *, exclude: str | None = None) -> InUse:
    """Instances of ``instance_type`` held by the region's HyperPod clusters (``exclude`` left out)."""
    total = 0
    skipped_name = ""
    try:
        for page in sagemaker.get_paginator("list_clusters").paginate():
            for summary in page["ClusterSummaries"]:
                name = summary["ClusterName"]
                if name == exclude:
                    skipped_name = f"; {name}, which this deploy updates, not counted"
                    continue
                cluster = sagemaker.describe_cluster(ClusterName=name)
                total += sum(group.get("TargetCount", group.get("CurrentCount", 0))
                             for group in cluster.get("InstanceGroups", [])
                             if group.get("InstanceType") == instance_type)
    except AWS_ERRORS as err:
        return InUse(None, f"instances already in use unknown ({describe_error(err)})")
    return InUse(total, f"{total} already in use by HyperPod clusters in the region{skipped_name}")


def find_quota(quotas: ServiceQuotasClient, name: str) -> dict[str, Any] | None:
    """The applied quota called ``name`` (case-insensitive), else its AWS default; None if neither."""
    wanted = name.lower()
    for operation in ("list_service_quotas", "list_aws_default_service_quotas"):
        paginator = quotas.get_paginator(operation)
        for page in paginator.paginate(ServiceCode=SAGEMAKER_SERVICE_CODE):
            for quota in page["Quotas"]:
                if str(quota.get("QuotaName", "")).lower() == wanted:
                    found: dict[str, Any] = dict(quota)
                    return found
    return None


def check_quota(clients: AwsClients, spec: DpdSpec, *, instances: int | None = None,
                existing_cluster: str | None = None, count_in_use: bool = True) -> Check:
    """The account's "<type> for cluster usage" quota covers what the spec needs plus what is in use."""
    instance_type = spec.instance_type.api_name
    needed = instances if instances is not None else instances_needed(spec)
    name = quota_name(instance_type)
    try:
        quota = find_quota(clients.service_quotas(), name)
    except AWS_ERRORS as err:
        return errored(QUOTA, describe_error(err, permission="servicequotas:ListServiceQuotas"))
    if quota is None:
        return failed(QUOTA, f"no SageMaker quota named {name!r} in {clients.region}: HyperPod may not "
                             f"offer {instance_type} in this region; pick another region or instance type")
    value = int(quota.get("Value", 0))
    code = quota.get("QuotaCode", "?")
    in_use = (clusters_in_use(clients.sagemaker(), instance_type, exclude=existing_cluster)
              if count_in_use else InUse(None, "instances in use not counted"))
    required = needed + (in_use.count or 0)
    summary = (f"{name!r} ({code}) = {value}; the spec needs {needed}"
               f"{f' + {in_use.count} in use = {required}' if in_use.count else ''} ({in_use.note})")
    if value >= required:
        return passed(QUOTA, summary)
    return failed(QUOTA, f"{summary}: request an increase to at least {required} in the Service Quotas "
                         f"console (service SageMaker, quota {code})")


# --- availability zone -------------------------------------------------------------------------


# The CDK app's default ``availability_zone_id`` context, used when nothing else is given.
CDK_DEFAULT_AZ_ID = DEFAULT_AVAILABILITY_ZONE_ID


def check_availability_zone(ec2: EC2Client, region: str, zone_id: str | None, *,
                            instance_type: str | None = None, origin: str = "",
                            pinned: Sequence[ZoneSetting] = ()) -> Check:
    """The AZ ID the HyperPod subnet will use exists in the region and is available.

    ``pinned``: the zones the spec pins its pods to (:func:`zone_settings`); each must be this zone,
    by name or ID, since the account's name-to-ID mapping is only known here.

    With ``instance_type`` (``ml.p5.48xlarge``), also notes whether EC2 offers the matching type in
    that zone; HyperPod capacity is not the same thing, so that note never fails the check.
    """
    if not zone_id:
        return skipped(AVAILABILITY_ZONE, "no AZ given: pass --availability-zone-id (the AZ ID of the "
                                          "HyperPod subnet, e.g. usw2-az2)")
    try:
        zones = ec2.describe_availability_zones(AllAvailabilityZones=True)["AvailabilityZones"]
    except AWS_ERRORS as err:
        return errored(AVAILABILITY_ZONE, describe_error(err, permission="ec2:DescribeAvailabilityZones"))
    by_id = {zone.get("ZoneId", ""): zone for zone in zones}
    zone = by_id.get(zone_id) or next((z for z in zones if z.get("ZoneName") == zone_id), None)
    if zone is None:
        known = ", ".join(sorted(z for z in by_id if z and by_id[z].get("ZoneType", "availability-zone")
                                 == "availability-zone"))
        return failed(AVAILABILITY_ZONE, f"{zone_id}{origin} is not an Availability Zone ID in {region} "
                                         f"(IDs there: {known or 'none'})")
    label = f"{zone.get('ZoneId')}{origin} is {zone.get('ZoneName')} in {region}"
    state = zone.get("State", "available")
    if state != "available":
        return failed(AVAILABILITY_ZONE, f"{label} but its state is {state!r}")
    elsewhere = [f"{p.field} is {p.value!r}" for p in pinned
                 if p.value != (zone.get("ZoneId") if p.is_id else zone.get("ZoneName"))]
    if elsewhere:
        return failed(AVAILABILITY_ZONE, f"{label}, but {'; '.join(elsewhere)}: those pods would never schedule "
                                         f"on the HyperPod nodes. Fix: use {zone.get('ZoneName')} (or "
                                         f"{zone.get('ZoneId')} for {ZONE_ID_LABEL}), or leave it out")
    opt_in = zone.get("OptInStatus", "opt-in-not-required")
    if opt_in == "not-opted-in":
        return failed(AVAILABILITY_ZONE, f"{label} but the account has not opted in to it")
    note = _offering_note(ec2, str(zone.get("ZoneId")), instance_type) if instance_type else ""
    return passed(AVAILABILITY_ZONE, f"{label} ({state}){note}")


def _offering_note(ec2: EC2Client, zone_id: str, instance_type: str) -> str:
    ec2_type = instance_type.removeprefix("ml.")
    try:
        offers = ec2.describe_instance_type_offerings(
            LocationType="availability-zone-id",
            Filters=[{"Name": "instance-type", "Values": [ec2_type]}, {"Name": "location", "Values": [zone_id]}],
        )["InstanceTypeOfferings"]
    except AWS_ERRORS:
        return ""
    if offers:
        return f"; EC2 offers {ec2_type} there"
    return (f"\nnote: EC2 lists no {ec2_type} offering in {zone_id}; HyperPod capacity may still exist "
            "(training plans), but check before deploying")


# --- model weights in S3 -----------------------------------------------------------------------

INDEX_FILE = "model.safetensors.index.json"


def _is_unknown_bucket(bucket: str) -> bool:
    return not bucket or "${Token[" in bucket or bucket.startswith("<")


def _list_objects(s3: S3Client, bucket: str, prefix: str) -> Iterator[tuple[str, int]]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            yield item["Key"], int(item.get("Size", 0))


def check_model_source(clients: AwsClients, spec: DpdSpec) -> Check:
    """The S3 prefix holds config.json, a tokenizer and complete safetensors weights."""
    source = spec.model.source
    if not isinstance(source, S3Source):
        return skipped(MODEL, f"the model comes from {source.KIND}, not S3; only S3 prefixes are checked")
    if _is_unknown_bucket(source.bucket):
        return skipped(MODEL, f"the bucket is not known before deploy ({source.bucket!r})")
    prefix = source.prefix.strip("/")
    prefix = f"{prefix}/" if prefix else ""
    where = f"s3://{source.bucket}/{prefix}"
    s3 = clients.s3(source.region)
    try:
        objects = dict(_list_objects(s3, source.bucket, prefix))
        return _judge_model_files(s3, source.bucket, prefix, where, objects)
    except AWS_ERRORS as err:
        code = error_code(err)
        if code == "NoSuchBucket":
            return failed(MODEL, f"bucket {source.bucket!r} does not exist (or not in this partition)")
        if code == "PermanentRedirect":
            return failed(MODEL, f"bucket {source.bucket!r} is in another region: set model.source.s3.region")
        return errored(MODEL, f"{where}: {describe_error(err, permission='s3:ListBucket and s3:GetObject')}")


def _judge_model_files(s3: S3Client, bucket: str, prefix: str, where: str, objects: dict[str, int]) -> Check:
    if not objects:
        return failed(MODEL, f"nothing under {where}: check model.source.s3.bucket and prefix")
    top = {key[len(prefix):]: size for key, size in objects.items() if "/" not in key[len(prefix):]}
    missing: list[str] = []
    if "config.json" not in top:
        missing.append("config.json")
    tokenizer = vocabulary_files(top)
    if not tokenizer:
        missing.append(f"a tokenizer ({vocabulary_choices()})")
    shards = sorted(name for name in top if name.endswith(".safetensors"))
    if not shards:
        others = sorted(name for name in top if name.endswith((".bin", ".pt", ".pth")))
        hint = f" (found {', '.join(others[:3])}: vLLM here needs safetensors)" if others else ""
        missing.append(f"*.safetensors weights{hint}")
    problems: list[str] = []
    listed: set[str] = set()
    if INDEX_FILE in top:
        body = s3.get_object(Bucket=bucket, Key=prefix + INDEX_FILE)["Body"].read()
        try:
            weight_map = json.loads(body)["weight_map"]
            listed = set(weight_map.values())
        except (ValueError, KeyError, TypeError, AttributeError):
            problems.append(f"{INDEX_FILE} is not a safetensors index (no weight_map)")
        absent = sorted(listed - set(shards))
        if absent:
            problems.append(f"{len(absent)} shard(s) listed in {INDEX_FILE} are missing: "
                            f"{_some(absent)}")
    elif len(shards) > 1:
        missing.append(f"{INDEX_FILE} (the weights are sharded into {len(shards)} files)")
    weight_bytes = sum(top[name] for name in shards)
    total = sum(objects.values())
    weights = [f"{len(shards)} safetensors file(s) ({format_bytes(weight_bytes)})"] if shards else []
    found = ", ".join(["config.json"] * ("config.json" in top) + tokenizer + weights
                      + ([INDEX_FILE] if INDEX_FILE in top else []))
    size = f"{format_bytes(total)} in {len(objects)} objects under {where}"
    if missing or problems:
        lines = ([f"missing {', '.join(missing)}"] if missing else []) + problems
        return failed(MODEL, "\n".join([*lines, f"found: {found or 'no model files'}; {size}"]))
    note = "" if "tokenizer_config.json" in top else "; no tokenizer_config.json (no chat template)"
    return passed(MODEL, f"{found}{note}\n{size}")


def _some(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def _s3_architecture_loader(clients: AwsClients, spec: DpdSpec) -> Callable[[], ModelArchitecture] | None:
    source = spec.model.source
    if not isinstance(source, S3Source) or _is_unknown_bucket(source.bucket):
        return None

    def load() -> ModelArchitecture:
        module = importlib.import_module("hyperpod_dpd.planner")
        loader: Callable[..., ModelArchitecture] = module.load_architecture
        return loader(f"s3://{source.bucket}/{source.prefix.strip('/')}",
                      read_s3=partial(read_model_config, s3_client=clients.s3(source.region)))

    return load


# --- all of it ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreflightOptions:
    availability_zone_id: str | None = None
    cluster_instances: int | None = None
    existing_cluster: str | None = CDK_DEFAULT_CLUSTER
    source: str | None = None
    # EKS add-on checks (hyperpod_dpd.ops.addons): versions offered, existing add-ons; on unless opted out.
    check_addons: bool = True
    kubernetes_version: str = KUBERNETES_VERSION
    eks_cluster: str | None = None
    preinstalled_addons: tuple[str, ...] = ()


def preflight_checks(spec: DpdSpec, clients: AwsClients, options: PreflightOptions,
                     *, planner: Planner | None = None) -> list[Check]:
    """Every preflight check, in the order the table shows them."""
    spec_row, planner_row = check_spec(spec, source=options.source, planner=planner,
                                       architecture_loader=_s3_architecture_loader(clients, spec))
    zone_id = options.availability_zone_id or spec.topology.availability_zone
    origin = ""
    if zone_id is None:
        zone_id, origin = CDK_DEFAULT_AZ_ID, " (the CDK app's default availability_zone_id)"
    return [
        spec_row,
        planner_row,
        check_quota(clients, spec, instances=options.cluster_instances,
                    existing_cluster=options.existing_cluster),
        check_availability_zone(clients.ec2(), clients.region, zone_id,
                                instance_type=spec.instance_type.api_name, origin=origin,
                                pinned=zone_settings(spec)),
        check_model_source(clients, spec),
        *([check_addon_versions(clients.eks(), kubernetes_version=options.kubernetes_version),
           check_existing_addons(clients.eks(), options.eks_cluster, preinstalled=options.preinstalled_addons)]
          if options.check_addons else []),
    ]


@dataclass(frozen=True, kw_only=True)
class PreflightRequest:
    """What ``preflight`` was asked for: the spec, the checks' options, and the AWS region and profile to use.

    :param region: :default: - the profile's or AWS_REGION, else the model bucket's region from the spec
    :param profile: :default: - the default credential chain
    """

    spec: DpdSpec
    options: PreflightOptions = PreflightOptions()
    region: str | None = None
    profile: str | None = None


@dataclass(frozen=True, kw_only=True)
class PreflightReport:
    """Every row in table order, and the account, region and instances they were checked for."""

    checks: list[Check]
    account: str
    region: str
    instances: int


def run_preflight(request: PreflightRequest, seams: Seams) -> PreflightReport:
    """The whole command: :func:`preflight_checks` in the account and region of the current credentials.

    No usable credentials or region is a :class:`UsageError`: no row could run.
    """
    spec = request.spec
    try:
        clients = seams.aws_clients(request.region, request.profile, fallback_region=bucket_region(spec))
        account = clients.account()
    except AwsUnavailable as err:
        raise UsageError(str(err)) from None
    except AWS_ERRORS as err:
        account = f"unknown ({describe_error(err)})"
    checks = preflight_checks(spec, clients, request.options, planner=seams.planner)
    return PreflightReport(checks=checks, account=account, region=clients.region,
                           instances=request.options.cluster_instances or instances_needed(spec))
