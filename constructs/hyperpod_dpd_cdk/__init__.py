"""CDK constructs that provision a SageMaker HyperPod EKS cluster and deploy DPD endpoints on it.

Each construct can be used on its own inside your stacks; :class:`HyperPodDpdStack` composes them.
Import :mod:`hyperpod_dpd` before this package (it points jsii at a supported Node.js).
"""

from hyperpod_dpd import _node

_node.ensure_node()

from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL  # noqa: E402
from hyperpod_dpd_cdk.benchmark_access import AggregatedTwin, BenchmarkAccess  # noqa: E402
from hyperpod_dpd_cdk.dpd_endpoint import DpdEndpoint, placed_spec  # noqa: E402
from hyperpod_dpd_cdk.efa_security_group import EfaSecurityGroup  # noqa: E402
from hyperpod_dpd_cdk.eks_cluster import ExistingEksCluster, HyperPodEksCluster  # noqa: E402
from hyperpod_dpd_cdk.exposure import ClusterEndpointAccess  # noqa: E402
from hyperpod_dpd_cdk.grafana_dashboards import GrafanaDashboards  # noqa: E402
from hyperpod_dpd_cdk.hyperpod_cluster import (  # noqa: E402
    HyperPodCluster,
    InstanceGroup,
    instance_groups_for,
)
from hyperpod_dpd_cdk.hyperpod_dependencies import HyperPodDependencies  # noqa: E402
from hyperpod_dpd_cdk.inference_operator import InferenceOperator  # noqa: E402
from hyperpod_dpd_cdk.lifecycle import HyperPodExecutionRole, LifecycleScripts  # noqa: E402
from hyperpod_dpd_cdk.model_bucket import AccessLogBucket, ModelBucket  # noqa: E402
from hyperpod_dpd_cdk.network import ExistingVpc, HyperPodNetwork  # noqa: E402
from hyperpod_dpd_cdk.observability import DpdObservability, ObservabilityOptions  # noqa: E402
from hyperpod_dpd_cdk.stack import HyperPodDpdStack  # noqa: E402
from hyperpod_dpd_cdk.teardown import (  # noqa: E402
    CausedLogGroups,
    GuardDutyCleanup,
    TeardownBarrier,
    TeardownHandler,
    TeardownTiming,
)
from hyperpod_dpd_cdk.versions import AddonVersions, SupportType  # noqa: E402
from hyperpod_dpd_cdk.weights_staging import HuggingFaceTokenSecret, WeightsStaging  # noqa: E402

__all__ = [
    "INSTANCE_GROUP_LABEL",
    "AccessLogBucket",
    "AddonVersions",
    "AggregatedTwin",
    "BenchmarkAccess",
    "CausedLogGroups",
    "ClusterEndpointAccess",
    "DpdEndpoint",
    "DpdObservability",
    "EfaSecurityGroup",
    "ExistingEksCluster",
    "ExistingVpc",
    "GrafanaDashboards",
    "GuardDutyCleanup",
    "HuggingFaceTokenSecret",
    "HyperPodCluster",
    "HyperPodDependencies",
    "HyperPodDpdStack",
    "HyperPodEksCluster",
    "HyperPodExecutionRole",
    "HyperPodNetwork",
    "InferenceOperator",
    "InstanceGroup",
    "LifecycleScripts",
    "ModelBucket",
    "ObservabilityOptions",
    "SupportType",
    "TeardownBarrier",
    "TeardownHandler",
    "TeardownTiming",
    "WeightsStaging",
    "instance_groups_for",
    "placed_spec",
]
