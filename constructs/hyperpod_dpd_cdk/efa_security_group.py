"""The security group shared by the EKS control plane and the HyperPod nodes, with EFA's self rules."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


class EfaSecurityGroup(Construct):
    """All traffic from and to the group itself, in and out (EFA needs both), IPv4 egress, no ingress from outside.

    ``allow_all_outbound`` must be False: CDK drops every added egress rule otherwise, and with it
    the self-referencing egress rule that EFA traffic needs.

    :param vpc: the VPC.
    :param fsx_lustre: also open the FSx for Lustre ports (988, 1018-1023) to the group. :default: False
    """

    def __init__(self, scope: Construct, id: str, *, vpc: ec2.IVpc, fsx_lustre: bool = False) -> None:
        super().__init__(scope, id)
        sg = ec2.SecurityGroup(self, "Resource", vpc=vpc, allow_all_outbound=False,
                               description="HyperPod nodes and EKS control plane: EFA between members, no ingress "
                                           "from outside")
        sg.add_ingress_rule(sg, ec2.Port.all_traffic(), "EFA and node traffic between members")
        sg.add_egress_rule(sg, ec2.Port.all_traffic(), "EFA traffic between members (EFA needs the egress rule too)")
        # CDK refuses an all-traffic egress rule on a group with allow_all_outbound=False, so the
        # internet egress is the L1 resource the reference templates use.
        ec2.CfnSecurityGroupEgress(self, "InternetEgress", group_id=sg.security_group_id, ip_protocol="-1",
                                   cidr_ip="0.0.0.0/0",
                                   description="Image pulls, S3 and AWS APIs through NAT and the S3 endpoint")
        if fsx_lustre:
            sg.add_ingress_rule(sg, ec2.Port.tcp(988), "FSx for Lustre")
            sg.add_ingress_rule(sg, ec2.Port.tcp_range(1018, 1023), "FSx for Lustre")
        self.security_group = sg
