"""The typed, immutable DPD spec."""

from hyperpod_dpd.spec.autoscaling import (
    AutoscalingSpec,
    CloudWatchTrigger,
    MetricType,
    PrometheusTrigger,
    SloScaling,
    Trigger,
)
from hyperpod_dpd.spec.endpoint import (
    DLC_IMAGE,
    KNOWN_IMAGES,
    LMCACHE_IMAGE,
    DataCaptureSpec,
    DpdSpec,
    MetricsSpec,
    NodeUsage,
    RoleUsage,
    TlsSpec,
    TopologySpec,
)
from hyperpod_dpd.spec.kv_cache import KvCacheSpec
from hyperpod_dpd.spec.model import (
    FsxSource,
    HuggingFaceSource,
    ModelSource,
    ModelSpec,
    S3Source,
    VolumeSource,
)
from hyperpod_dpd.spec.observability import AlertThresholds, SloSpec
from hyperpod_dpd.spec.roles import Resources, RoleSpec
from hyperpod_dpd.spec.routing import RoutingSpec, RoutingStrategy

__all__ = [
    "DLC_IMAGE",
    "KNOWN_IMAGES",
    "LMCACHE_IMAGE",
    "AlertThresholds",
    "AutoscalingSpec",
    "CloudWatchTrigger",
    "DataCaptureSpec",
    "DpdSpec",
    "FsxSource",
    "HuggingFaceSource",
    "KvCacheSpec",
    "MetricType",
    "MetricsSpec",
    "ModelSource",
    "ModelSpec",
    "NodeUsage",
    "PrometheusTrigger",
    "Resources",
    "RoleSpec",
    "RoleUsage",
    "RoutingSpec",
    "RoutingStrategy",
    "S3Source",
    "SloScaling",
    "SloSpec",
    "TlsSpec",
    "TopologySpec",
    "Trigger",
    "VolumeSource",
]
