"""cdk8s charts rendered from a DPD spec."""

from hyperpod_dpd.charts.inference_endpoint_config import (
    API_VERSION,
    KIND,
    InferenceEndpointConfigChart,
    render_inference_endpoint_config,
)

__all__ = ["API_VERSION", "KIND", "InferenceEndpointConfigChart", "render_inference_endpoint_config"]
