"""Collectors on intervals that feed the metric cache, and the usage queries the reporter makes."""

from koordlet.metricsadvisor.advisor import AdvisorOptions, CacheUsageSource, MetricsAdvisor
from koordlet.metricsadvisor.collectors import BE_REAL_LIMIT, BE_REQUEST, BE_USAGE, TickResult

__all__ = [
    "BE_REAL_LIMIT",
    "BE_REQUEST",
    "BE_USAGE",
    "AdvisorOptions",
    "CacheUsageSource",
    "MetricsAdvisor",
    "TickResult",
]
