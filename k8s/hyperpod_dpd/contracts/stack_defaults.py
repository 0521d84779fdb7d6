"""Defaults that the CDK app and the preflight/verify commands must agree on.

They live here, outside the CDK package, so the commands can use them without loading jsii.
"""

from __future__ import annotations

import re

DEFAULT_REGION = "us-west-2"
DEFAULT_AVAILABILITY_ZONE_ID = "usw2-az2"
DEFAULT_STACK_NAME = "HyperPodDpd"


def hyperpod_cluster_name(stack_name: str) -> str:
    """The HyperPod cluster a stack creates unless told otherwise: ``<stack name>-hp``, CFN-safe."""
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", stack_name).strip("-")[:60].strip("-")
    return f"{slug or 'dpd'}-hp"[:63]


DEFAULT_HYPERPOD_CLUSTER = hyperpod_cluster_name(DEFAULT_STACK_NAME)


# What the stack deploys on EKS, for the commands that check it before a deploy (the CDK side keeps
# the reasons in hyperpod_dpd_cdk.versions, which imports these).
KUBERNETES_VERSION = "1.34"
INFERENCE_ADDON = "amazon-sagemaker-hyperpod-inference"
INFERENCE_ADDON_VERSION = "v1.4.0-eksbuild.1"
# Installed by the stack unless declared pre-installed on an existing cluster (-c preinstalled_addons=).
PREREQUISITE_ADDONS = ("cert-manager", "aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver", "metrics-server",
                       "eks-pod-identity-agent", "amazon-sagemaker-hyperpod-observability",
                       "amazon-cloudwatch-observability")
