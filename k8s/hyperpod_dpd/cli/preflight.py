"""``hyperpod-dpd preflight [SPEC]``: the checks a deploy would otherwise fail on tens of minutes in.

For the account and region of the current credentials: the spec and the planner, the SageMaker
"<instance type> for cluster usage" quota, the Availability Zone ID, and the model files in S3.
Prints a table (or JSON with --json).

Exit status: 0 when every check passed or was skipped, 1 when any failed or could not run (ERROR),
2 for usage errors, including no usable AWS credentials or region.

IAM: sts:GetCallerIdentity, servicequotas:ListServiceQuotas and ListAWSDefaultServiceQuotas,
sagemaker:ListClusters and DescribeCluster (instances in use), ec2:DescribeAvailabilityZones and
DescribeInstanceTypeOfferings, s3:ListBucket and s3:GetObject on the model prefix, and for the add-on
rows eks:DescribeAddonVersions (and eks:ListAddons with --eks-cluster); without those the rows are
SKIP and name the permission. --no-addon-check leaves them out.
"""

from __future__ import annotations

import argparse

from hyperpod_dpd.cli._argtypes import instances
from hyperpod_dpd.cli._common import add_aws_arguments, add_spec_argument, load_spec_argument
from hyperpod_dpd.clients.checks import exit_status
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.contracts.stack_defaults import DEFAULT_AVAILABILITY_ZONE_ID, KUBERNETES_VERSION
from hyperpod_dpd.ops.preflight import CDK_DEFAULT_CLUSTER, PreflightOptions, PreflightRequest, run_preflight
from hyperpod_dpd.ops.table import render_json, render_table


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "preflight", help="check quota, Availability Zone, model files and the spec before deploying",
        description=(__doc__ or "").partition("\n\n")[2], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  hyperpod-dpd preflight my-spec.yaml --availability-zone-id usw2-az2\n"
               "  hyperpod-dpd preflight my-spec.yaml --profile ml-admin --region us-west-2 --json")
    add_spec_argument(parser)
    add_aws_arguments(parser)
    parser.add_argument("--availability-zone-id", metavar="AZ_ID",
                        help="the AZ ID the HyperPod subnet will use (default: the spec's "
                             f"topology.availability_zone, else {DEFAULT_AVAILABILITY_ZONE_ID}, the CDK app's default)")
    parser.add_argument("--cluster-instances", type=instances, metavar="N",
                        help="instances of the spec's type the quota must cover (default: prefill + decode "
                             "nodes at their autoscaling maximum)")
    parser.add_argument("--existing-cluster", metavar="NAME", default=CDK_DEFAULT_CLUSTER,
                        help="the HyperPod cluster this deploy creates or updates: its instances are not "
                             f"counted as in use (default: {CDK_DEFAULT_CLUSTER}, the CDK app's default)")
    parser.add_argument("--no-addon-check", dest="check_addons", action="store_false",
                        help="leave out the add-on rows, which ask EKS whether every add-on the stack installs is "
                             "offered for the Kubernetes version here, and (with --eks-cluster) which of them the "
                             "cluster runs already")
    parser.add_argument("--check-addons", dest="check_addons", action="store_true",
                        help="the default (accepted for older scripts)")
    parser.add_argument("--kubernetes-version", default=KUBERNETES_VERSION,
                        help=f"for the add-on rows (default: {KUBERNETES_VERSION}, the CDK app's default)")
    parser.add_argument("--eks-cluster", metavar="NAME",
                        help="for the add-on rows: the existing EKS cluster (default: a new one)")
    parser.add_argument("--preinstalled-addons", metavar="A,B", default="",
                        help="for the add-on rows: the add-ons declared with -c preinstalled_addons=")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(handler=run, check_addons=True)


def run(args: argparse.Namespace, *, seams: Seams) -> int:
    spec = load_spec_argument(args.spec).spec
    options = PreflightOptions(availability_zone_id=args.availability_zone_id,
                               cluster_instances=args.cluster_instances,
                               existing_cluster=args.existing_cluster, source=args.spec,
                               check_addons=args.check_addons, kubernetes_version=args.kubernetes_version,
                               eks_cluster=args.eks_cluster,
                               preinstalled_addons=tuple(a.strip() for a in args.preinstalled_addons.split(",")
                                                         if a.strip()))
    report = run_preflight(PreflightRequest(spec=spec, options=options, region=args.region, profile=args.profile),
                           seams)
    if args.json:
        print(render_json(report.checks, account=report.account, region=report.region,
                          instance_type=spec.instance_type.api_name, instances=report.instances))
    else:
        print(f"preflight for {spec.namespace}/{spec.name}: account {report.account}, region {report.region}, "
              f"{report.instances} x {spec.instance_type.api_name}")
        print(render_table(report.checks))
    return exit_status(report.checks)
