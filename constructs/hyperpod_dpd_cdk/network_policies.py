"""Applies an endpoint's opt-in NetworkPolicies (``hyperpod_dpd.charts.network_policies``) to the cluster."""

from __future__ import annotations

import cdk8s
from aws_cdk import Annotations
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from hyperpod_dpd.charts.network_policies import NetworkPolicyChart
from hyperpod_dpd.spec import DpdSpec


class EndpointNetworkPolicies(Construct):
    """The model pods of ``spec`` admit only their peers, the operator's namespace and the metrics collectors.

    :param cluster: the EKS cluster. :param spec: the endpoint.
    :param enforced: the stack turned on the VPC CNI's enforcement; otherwise (an existing cluster) a
        warning says the policies are inert until you do. :default: True
    :param after: apply after these (the endpoint's namespace). :default: - none
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, spec: DpdSpec, enforced: bool = True,
                 after: tuple[IConstruct, ...] = ()) -> None:
        super().__init__(scope, id)
        self.chart = NetworkPolicyChart(cdk8s.App(), f"{spec.name}-network-policies", spec=spec)
        self.manifest = cluster.add_cdk8s_chart(f"{id}Manifest", self.chart)
        for dependency in after:
            self.manifest.node.add_dependency(dependency)
        if not enforced:
            Annotations.of(self).add_warning_v2(
                "hyperpod-dpd:NetworkPolicyNotEnforced",
                f"endpoint {spec.name!r}: the NetworkPolicies do nothing until the cluster's VPC CNI enforces them: "
                "set enableNetworkPolicy=true in the vpc-cni add-on's configuration")
