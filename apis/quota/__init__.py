"""Koordinator's ``quota.koordinator.sh/v1alpha1`` API: the ElasticQuotaProfile, wire-compatible."""

from apis.quota.profile import (
    ANNOTATION_RESOURCE_KEYS,
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    ElasticQuotaProfile,
    ElasticQuotaProfileSpec,
    QuotaProfileRecord,
    parse_quota_profile,
)

__all__ = [
    "ANNOTATION_RESOURCE_KEYS",
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "ElasticQuotaProfile",
    "ElasticQuotaProfileSpec",
    "QuotaProfileRecord",
    "parse_quota_profile",
]
