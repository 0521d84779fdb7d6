"""CDK constructs that provision a SageMaker HyperPod EKS cluster and deploy DPD endpoints on it.

:class:`HyperPodDpd` is the whole platform as one construct, for a stack of your own (``add_endpoint``
hosts more endpoints); :class:`HyperPodDpdStack` is the same parts as a stack of their own. Each part
can also be used on its own. Exported here is what a user builds or passes: the constructs, their option
objects and value types; the parts of the composition never built alone (the teardown handler and its
cleanups, ``placed_spec``) stay in their modules. The first import below loads :mod:`hyperpod_dpd`, which
points jsii at a supported Node.js before any construct module loads the jsii runtime.
"""

import hyperpod_dpd as _library  # noqa: F401 - first: jsii must start on the packaged Node.js
from hyperpod_dpd_cdk.benchmark_access import AggregatedTwin, BenchmarkAccess
from hyperpod_dpd_cdk.dpd_endpoint import DpdEndpoint
from hyperpod_dpd_cdk.efa_security_group import EfaSecurityGroup
from hyperpod_dpd_cdk.eks_cluster import ExistingEksCluster, HyperPodEksCluster
from hyperpod_dpd_cdk.exposure import ClusterEndpointAccess
from hyperpod_dpd_cdk.grafana_dashboards import GrafanaDashboards
from hyperpod_dpd_cdk.hyperpod_cluster import (
    HyperPodCluster,
    InstanceGroup,
    instance_groups_for,
)
from hyperpod_dpd_cdk.hyperpod_dependencies import HyperPodDependencies
from hyperpod_dpd_cdk.hyperpod_dpd import ClusterOptions, HyperPodDpd, HyperPodOptions
from hyperpod_dpd_cdk.inference_operator import InferenceOperator
from hyperpod_dpd_cdk.lifecycle import HyperPodExecutionRole, LifecycleScripts
from hyperpod_dpd_cdk.model_bucket import AccessLogBucket, ModelBucket
from hyperpod_dpd_cdk.network import ExistingVpc, HyperPodNetwork
from hyperpod_dpd_cdk.observability import DpdObservability, ObservabilityOptions
from hyperpod_dpd_cdk.stack import HyperPodDpdStack
from hyperpod_dpd_cdk.teardown import TeardownBarrier, TeardownTiming
from hyperpod_dpd_cdk.versions import AddonVersions, SupportType
from hyperpod_dpd_cdk.weights_staging import HuggingFaceTokenSecret, WeightsStaging

__all__ = [
    "AccessLogBucket",
    "AddonVersions",
    "AggregatedTwin",
    "BenchmarkAccess",
    "ClusterEndpointAccess",
    "ClusterOptions",
    "DpdEndpoint",
    "DpdObservability",
    "EfaSecurityGroup",
    "ExistingEksCluster",
    "ExistingVpc",
    "GrafanaDashboards",
    "HuggingFaceTokenSecret",
    "HyperPodCluster",
    "HyperPodDependencies",
    "HyperPodDpd",
    "HyperPodDpdStack",
    "HyperPodEksCluster",
    "HyperPodExecutionRole",
    "HyperPodNetwork",
    "HyperPodOptions",
    "InferenceOperator",
    "InstanceGroup",
    "LifecycleScripts",
    "ModelBucket",
    "ObservabilityOptions",
    "SupportType",
    "TeardownBarrier",
    "TeardownTiming",
    "WeightsStaging",
    "instance_groups_for",
]
