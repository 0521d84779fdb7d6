"""Helpers of the constructs, not public API: cdk-nag acknowledgments, the ALB policy, the CDK CLI check, placement."""
