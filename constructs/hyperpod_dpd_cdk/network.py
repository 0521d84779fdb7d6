"""The VPC: HyperPod nodes in one private subnet of one AZ (by AZ ID), EKS in two AZs, S3 and NAT egress."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Annotations, CfnResource, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_dpd import Problem, SpecError
from hyperpod_dpd_cdk._private.placement import az_id_problems

DEFAULT_VPC_CIDR = "10.192.0.0/16"
# A whole /16 for HyperPod nodes, as the reference templates do: a p5.48xlarge attaches up to 64
# ENIs and VPC CNI hands pods IPs from the node's subnet, so small subnets run out first.
DEFAULT_HYPERPOD_CIDR = "10.1.0.0/16"
FLOW_LOG_RETENTION = logs.RetentionDays.ONE_YEAR
# The subnet tag the AWS Load Balancer Controller picks internal load balancers' subnets by.
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"  # internet-facing ones; never set here


@dataclass(frozen=True, kw_only=True)
class ExistingVpc:
    """An existing VPC by id, imported without a context lookup.

    :param availability_zones: the AZ *names* of ``private_subnet_ids``, in the same order.
    :param private_subnet_ids: private subnets with NAT egress, in two AZs or more, for the EKS
        control plane and the system nodes.
    :param private_subnet_route_table_ids: their route tables, if you want them in the imported VPC. :default: - none
    """

    vpc_id: str
    availability_zones: tuple[str, ...]
    private_subnet_ids: tuple[str, ...]
    private_subnet_route_table_ids: tuple[str, ...] | None = None

    def import_into(self, scope: Construct, id: str) -> ec2.IVpc:
        return ec2.Vpc.from_vpc_attributes(
            scope, id, vpc_id=self.vpc_id, availability_zones=list(self.availability_zones),
            private_subnet_ids=list(self.private_subnet_ids),
            private_subnet_route_table_ids=(list(self.private_subnet_route_table_ids)
                                            if self.private_subnet_route_table_ids else None))


def network_problems(availability_zone_id: str, region: str, *, vpc: ec2.IVpc | ExistingVpc | None,
                     hyperpod_subnet_ids: Mapping[str, str] | None) -> list[Problem]:
    """Everything wrong with where the HyperPod subnet should go, before anything is built."""
    problems = list(az_id_problems(availability_zone_id, region))
    if vpc is None and hyperpod_subnet_ids:
        problems.append(Problem(field="hyperpod_subnet_ids", value=dict(hyperpod_subnet_ids),
                                message="only applies to an existing VPC",
                                fix="pass vpc= as well, or leave hyperpod_subnet_ids out for a new VPC"))
    if isinstance(vpc, ExistingVpc) and (len(vpc.private_subnet_ids) != len(vpc.availability_zones)
                                         or len(set(vpc.availability_zones)) < 2):
        problems.append(Problem(
            field="vpc.private_subnet_ids", value=list(vpc.private_subnet_ids),
            message=f"must be one subnet per AZ in availability_zones {list(vpc.availability_zones)}, "
                    "in two AZs or more (the EKS control plane needs two)",
            fix="list one private subnet per AZ name, e.g. -c eks_subnets=us-west-2a=subnet-...,us-west-2b=subnet-..."))
    if vpc is not None and availability_zone_id not in (hyperpod_subnet_ids or {}):
        problems.append(Problem(
            field="availability_zone_id", value=availability_zone_id,
            message="is not among the HyperPod subnets of the VPC "
                    f"(known AZ IDs: {', '.join(sorted(hyperpod_subnet_ids or {})) or 'none'})",
            fix="give a private subnet in that AZ ID: HyperPodOptions(subnet_ids={'<az id>': 'subnet-...'}) "
                "(HyperPodDpdStack: hyperpod_subnet_ids=...; app.py: -c hyperpod_subnets=<az id>=subnet-...), "
                "or pick an AZ ID the VPC has"))
    return problems


class HyperPodNetwork(Construct):
    """A new VPC, or an existing one, with the single-AZ HyperPod subnet.

    New VPC: two AZs of public and private (NAT) subnets: the private ones for the EKS control plane
    and the system node group, the public ones for the NAT gateway only; one NAT gateway; an S3
    gateway endpoint; VPC flow logs; and a secondary CIDR holding the HyperPod subnet, created by
    AZ ID and routed to the NAT gateway. The private subnets and the HyperPod subnet are tagged
    ``kubernetes.io/role/internal-elb``, so the operator's internal ALB is enabled in the AZ of the
    model pods whichever AZ names the account maps to which AZ IDs.

    :param availability_zone_id: the AZ ID (``usw2-az2``) where your accelerated capacity is;
        every HyperPod node goes there, because EFA only connects prefill and decode in one AZ and
        capacity reservations and training plans belong to one AZ.
    :param vpc: an existing VPC (an ``IVpc`` or, for a plain app, ``ExistingVpc`` ids). :default: - a new VPC
    :param hyperpod_subnet_ids: with ``vpc``: private subnets for HyperPod, by AZ ID
        (``{"usw2-az2": "subnet-0123..."}``); the one for ``availability_zone_id`` is used.
        Each must already route to a NAT gateway (image pulls) and to S3 (a gateway endpoint): an
        existing VPC's routes are left alone.
    :param eks_subnets: with ``vpc``: the EKS control-plane and system-node subnets (two AZs or
        more). The operator's internal ALB goes to the VPC's subnets tagged
        ``kubernetes.io/role/internal-elb`` (else, controller v2.12.1+, its private subnets); one of
        them must be in the HyperPod subnet's AZ, or the ALB cannot reach the model pods.
        :default: - the VPC's private subnets with egress
    :param vpc_cidr: new VPC only. :default: 10.192.0.0/16
    :param hyperpod_cidr: new VPC only, the secondary CIDR and HyperPod subnet. :default: 10.1.0.0/16
    """

    def __init__(self, scope: Construct, id: str, *, availability_zone_id: str,
                 vpc: ec2.IVpc | ExistingVpc | None = None,
                 hyperpod_subnet_ids: Mapping[str, str] | None = None,
                 eks_subnets: ec2.SubnetSelection | None = None, vpc_cidr: str = DEFAULT_VPC_CIDR,
                 hyperpod_cidr: str = DEFAULT_HYPERPOD_CIDR) -> None:
        super().__init__(scope, id)
        problems = list(network_problems(availability_zone_id, Stack.of(scope).region, vpc=vpc,
                                         hyperpod_subnet_ids=hyperpod_subnet_ids))
        if problems:
            raise SpecError(problems)
        self.availability_zone_id = availability_zone_id
        # The new HyperPod subnet's route and route-table association; an existing VPC's are its own.
        self.hyperpod_routes: list[CfnResource] = []

        if vpc is None:
            self.vpc: ec2.IVpc = self._new_vpc(vpc_cidr)
            self.hyperpod_subnet: ec2.ISubnet = self._hyperpod_subnet(hyperpod_cidr)
            self.eks_subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
            self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=[
                ec2.SubnetSelection(subnets=[self.hyperpod_subnet]), self.eks_subnets])
        else:
            self.vpc = vpc.import_into(self, "Vpc") if isinstance(vpc, ExistingVpc) else vpc
            subnet_id = (hyperpod_subnet_ids or {})[availability_zone_id]
            self.hyperpod_subnet = ec2.Subnet.from_subnet_attributes(self, "HyperPodSubnet", subnet_id=subnet_id)
            Annotations.of(self.hyperpod_subnet).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                "Only the subnet id is needed: an existing VPC keeps its own routes (NAT and S3 endpoint).")
            self.eks_subnets = eks_subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)

    def _new_vpc(self, cidr: str) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self, "Vpc", ip_addresses=ec2.IpAddresses.cidr(cidr), max_azs=2, nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                                        cidr_mask=20),
            ])
        log_group = logs.LogGroup(self, "FlowLogs", retention=FLOW_LOG_RETENTION)
        vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group))
        # The operator's ALB is internal (the controller's default scheme): the controller places it in
        # the subnets tagged internal-elb. The two private ones give it the two AZs an ALB needs, but they
        # are the region's first two AZ *names*, which need not include the HyperPod subnet's AZ *ID*, and
        # an ALB sends nothing to a target in an AZ it is not enabled in (ELB API reference, TargetHealth
        # reason Target.NotInUse). So the HyperPod subnet is tagged too (_hyperpod_subnet), as AWS's own
        # HyperPod setup tags its HyperPod subnets internal-elb (aws/sagemaker-hyperpod-cluster-setup,
        # main-stack-eks-based-template.yaml passes PrivateSubnetStack's subnets to
        # private-subnet-tagging-template.yaml). The public subnets get no kubernetes.io/role/elb tag
        # (aws_eks_v2.Cluster adds one to every public subnet; the removal outranks it): only an
        # internet-facing load balancer would use it, and the controller's role is denied those (exposure.py).
        for subnet in vpc.private_subnets:
            Tags.of(subnet).add(INTERNAL_ELB_TAG, "1")
        for subnet in vpc.public_subnets:
            Tags.of(subnet).remove(PUBLIC_ELB_TAG)
        return vpc

    def _hyperpod_subnet(self, cidr: str) -> ec2.ISubnet:
        vpc = self.vpc
        assert isinstance(vpc, ec2.Vpc)
        cidr_block = ec2.CfnVPCCidrBlock(self, "HyperPodCidr", vpc_id=vpc.vpc_id, cidr_block=cidr)
        subnet = ec2.CfnSubnet(self, "HyperPodSubnet", vpc_id=vpc.vpc_id, cidr_block=cidr,
                               availability_zone_id=self.availability_zone_id, map_public_ip_on_launch=False,
                               tags=[{"key": "Name", "value": f"{Stack.of(self).stack_name}/hyperpod-private"},
                                     {"key": INTERNAL_ELB_TAG, "value": "1"}])
        subnet.node.add_dependency(cidr_block)
        table = ec2.CfnRouteTable(self, "HyperPodRouteTable", vpc_id=vpc.vpc_id)
        nat = vpc.public_subnets[0].node.find_child("NATGateway")
        assert isinstance(nat, ec2.CfnNatGateway)
        route = ec2.CfnRoute(self, "HyperPodDefaultRoute", route_table_id=table.ref,
                             destination_cidr_block="0.0.0.0/0", nat_gateway_id=nat.ref)
        association = ec2.CfnSubnetRouteTableAssociation(self, "HyperPodRouteTableAssociation",
                                                         route_table_id=table.ref, subnet_id=subnet.ref)
        # Nodes pull images and reach EKS through the NAT from their first boot: the subnet ref alone
        # does not order the cluster after its route.
        self.hyperpod_routes = [route, association]
        self.hyperpod_subnet_resource = subnet
        return ec2.Subnet.from_subnet_attributes(self, "HyperPodSubnetRef", subnet_id=subnet.ref,
                                                 route_table_id=table.ref,
                                                 availability_zone=subnet.attr_availability_zone)
