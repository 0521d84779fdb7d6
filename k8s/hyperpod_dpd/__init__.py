"""hyperpod-dpd: typed Disaggregated Prefill and Decode specs for SageMaker HyperPod.

``from hyperpod_dpd import DpdSpec, ModelSpec, S3Source, check`` is enough to build and check a spec
(``default_spec()`` is the embedded example; ``load_spec``, ``parse_spec`` and ``dump_spec`` read and
write its file form);
charts live in :mod:`hyperpod_dpd.charts` and load the jsii runtime only when imported.
Importing this package points jsii at the packaged Node.js (:mod:`hyperpod_dpd._node`), the one place that
does: any module of it, or of ``hyperpod_dpd_cdk``, loads this file before it can import cdk8s or aws_cdk.
"""

from hyperpod_dpd import _moved
from hyperpod_dpd._node import ensure_node
from hyperpod_dpd.errors import DpdError, Problem, SpecError, SpecWarning, UsageError, Warning
from hyperpod_dpd.spec import (
    AlertThresholds,
    AutoscalingSpec,
    CloudWatchTrigger,
    DataCaptureSpec,
    DpdSpec,
    FsxSource,
    HuggingFaceSource,
    KvCacheSpec,
    MetricsSpec,
    ModelSpec,
    PrometheusTrigger,
    Resources,
    RoleSpec,
    RoutingSpec,
    RoutingStrategy,
    S3Source,
    SloScaling,
    SloSpec,
    TlsSpec,
    TopologySpec,
    VolumeSource,
)
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.instances import InstanceType
from hyperpod_dpd.spec.loading import (
    dump_spec,
    dump_spec_yaml,
    parse_spec,
    spec_from_mapping,
    spec_to_mapping,
    spec_to_yaml,
)
from hyperpod_dpd.spec.units import ByteSize
from hyperpod_dpd.validation import CheckedSpec, check
from hyperpod_dpd.validation.run import load_spec

ensure_node()  # the imports above load no jsii, so this runs before it starts (tests/setup/test_node.py)
_moved.install()

__all__ = [
    "AlertThresholds",
    "AutoscalingSpec",
    "ByteSize",
    "CheckedSpec",
    "CloudWatchTrigger",
    "DataCaptureSpec",
    "DpdError",
    "DpdSpec",
    "FsxSource",
    "HuggingFaceSource",
    "InstanceType",
    "KvCacheSpec",
    "MetricsSpec",
    "ModelSpec",
    "Problem",
    "PrometheusTrigger",
    "Resources",
    "RoleSpec",
    "RoutingSpec",
    "RoutingStrategy",
    "S3Source",
    "SloScaling",
    "SloSpec",
    "SpecError",
    "SpecWarning",
    "TlsSpec",
    "TopologySpec",
    "UsageError",
    "VolumeSource",
    "Warning",
    "check",
    "default_spec",
    "dump_spec",
    "dump_spec_yaml",
    "load_spec",
    "parse_spec",
    "spec_from_mapping",
    "spec_to_mapping",
    "spec_to_yaml",
]
