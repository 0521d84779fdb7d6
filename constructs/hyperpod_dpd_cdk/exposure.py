"""Who can reach the cluster from the network: load balancer scheme and the EKS API endpoint.

The operator's ALB is internal only because the bundled AWS Load Balancer Controller defaults an
Ingress to ``internal`` (LBC v2.13.2 ``--default-load-balancer-scheme``); the controller's role, as
upstream writes it, may create internet-facing load balancers too, and so may a new cluster's role
(``AmazonEKSClusterPolicy``), as which the control plane's legacy cloud provider serves a Service the
controller does not claim. :func:`deny_internet_facing`, on both roles, turns that default into a
guarantee for every load balancer the stack's roles can create, with the ``elasticloadbalancing:Scheme``
condition key (ELB IAM condition keys, AWS What's New 2023-11-13; the Service Authorization Reference,
"Actions, resources, and condition keys for Elastic Load Balancing V2", lists it for CreateLoadBalancer).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam

from hyperpod_dpd import Problem

INTERNET_FACING = "internet-facing"
SCHEME_CONDITION_KEY = "elasticloadbalancing:Scheme"
DENY_SID = "DenyInternetFacingLoadBalancers"
# The context key (and stack prop) that lifts the deny, for a deliberately public endpoint.
ALLOW_INTERNET_FACING_KEY = "allow_internet_facing_load_balancers"
INTERNET_FACING_WARNING = (
    "the AWS Load Balancer Controller may create internet-facing load balancers "
    f"({ALLOW_INTERNET_FACING_KEY}=true). The operator's ALB authenticates no caller and presents a "
    "self-signed certificate unless the spec sets tls: anything public in front of it is open to the "
    "internet. Prefer the SageMaker endpoint (endpoint_name, IAM SigV4) for callers outside the VPC")
# With the cluster's own controller (bundled_load_balancer_controller=false) neither promise of the stack holds.
OWN_CONTROLLER_WARNING = (
    "the cluster's own AWS Load Balancer Controller serves the operator's Ingresses "
    "(bundled_load_balancer_controller=false). Its role is not the stack's, so the stack's deny on internet-facing "
    "load balancers does not apply to it: add the same deny to that role. The teardown barrier finds the "
    "controller's load balancers by its elbv2.k8s.aws/cluster tag, which is the controller's --cluster-name: "
    "it must equal the EKS cluster name, or the barrier finds none of them and cdk destroy leaves them behind")
ANYWHERE = "0.0.0.0/0"


def deny_internet_facing() -> iam.PolicyStatement:
    """An explicit deny on creating internet-facing load balancers; internal ones are untouched.

    A deny wins over upstream's allow statements, so the controller's policy stays upstream's.
    ``CreateLoadBalancer`` serves both ALBs (Ingress) and NLBs (Service type LoadBalancer).
    """
    return iam.PolicyStatement(
        sid=DENY_SID, effect=iam.Effect.DENY, actions=["elasticloadbalancing:CreateLoadBalancer"], resources=["*"],
        conditions={"StringEquals": {SCHEME_CONDITION_KEY: INTERNET_FACING}})


@dataclass(frozen=True, kw_only=True)
class ClusterEndpointAccess:
    """Who can reach the EKS API server endpoint (every call still needs IAM plus an access entry).

    :param public: keep the public endpoint (the private one is always on). ``False`` means private
        only: kubectl, ``verify``, ``bench`` and ``preflight`` then work only from inside the VPC (or a
        network routed into it); the kubectl provider Lambda already runs in the VPC. :default: True
    :param public_cidrs: the sources the public endpoint accepts. :default: - anywhere (0.0.0.0/0)

    The default keeps the public endpoint reachable from anywhere because the ops commands run from a
    workstation and each call is authenticated; narrow it to your egress ranges with ``public_cidrs``.
    """

    public: bool = True
    public_cidrs: tuple[str, ...] = (ANYWHERE,)

    @classmethod
    def private_only(cls) -> ClusterEndpointAccess:
        return cls(public=False, public_cidrs=())

    @classmethod
    def public_from(cls, *cidrs: str) -> ClusterEndpointAccess:
        return cls(public=True, public_cidrs=tuple(cidrs))

    @classmethod
    def parse(cls, value: str) -> ClusterEndpointAccess:
        """``private``, ``public`` or a comma-separated CIDR list (public from those, private too)."""
        text = value.strip().lower()
        if text == "private":
            return cls.private_only()
        if text in ("public", ""):
            return cls()
        return cls.public_from(*(part.strip() for part in value.split(",") if part.strip()))

    @property
    def is_default(self) -> bool:
        return self == ClusterEndpointAccess()

    def problems(self, field: str) -> Iterator[Problem]:
        if self.public and not self.public_cidrs:
            yield Problem(field=field, value=[], message="lists no CIDR for the public endpoint",
                          fix="list your egress ranges (e.g. 203.0.113.0/24), or use private only")
        if not self.public and self.public_cidrs:
            yield Problem(field=field, value=list(self.public_cidrs), message="lists CIDRs for a private-only "
                          "endpoint", fix="drop the CIDRs, or keep the public endpoint")
        for cidr in self.public_cidrs:
            try:
                network = ipaddress.ip_network(cidr, strict=True)
            except ValueError:
                yield Problem(field=field, value=cidr, message="is not an IPv4 CIDR block",
                              fix="write e.g. 203.0.113.0/24 (host bits zero), or private, or public")
                continue
            if network.version != 4:
                yield Problem(field=field, value=cidr, message="is IPv6; the EKS public endpoint allow-list takes "
                              "IPv4 CIDR blocks", fix="list IPv4 ranges")

    def to_eks(self) -> eks.EndpointAccess:
        if not self.public:
            return eks.EndpointAccess.PRIVATE
        if self.public_cidrs == (ANYWHERE,):
            return eks.EndpointAccess.PUBLIC_AND_PRIVATE
        return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*self.public_cidrs)

    def describe(self) -> str:
        if not self.public:
            return "private only"
        return f"public from {', '.join(self.public_cidrs)} and private"
