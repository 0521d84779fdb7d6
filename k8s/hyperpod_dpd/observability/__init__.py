"""Metrics, alert rules, log patterns and the Grafana dashboard for DPD endpoints.

The dashboard module needs the ``observability`` extra and is imported only where used.
"""

from hyperpod_dpd.observability.alerts import alert_rules, rules_document, rules_yaml
from hyperpod_dpd.observability.log_patterns import LOG_PATTERNS, LogPattern
from hyperpod_dpd.observability.rule import AlertRule, Severity
from hyperpod_dpd.observability.writing import write_observability

__all__ = ["LOG_PATTERNS", "AlertRule", "LogPattern", "Severity", "alert_rules", "rules_document", "rules_yaml",
           "write_observability"]
