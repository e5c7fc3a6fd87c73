"""Koordinator's ``config.koordinator.sh/v1alpha1`` API: ClusterColocationProfile, wire-compatible."""

from apis.colocation.profile import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    ANNOTATION_SKIP_UPDATE_RESOURCES,
    API_VERSION,
    GROUP,
    KIND,
    VERSION,
    ClusterColocationProfile,
    ClusterColocationProfileSpec,
    ProfileLabelSelector,
    ProfileSelectorRequirement,
    ResolvedProfile,
    probability_percent,
    resolve_profile,
)
from apis.colocation.quantity_format import canonical_quantity, format_decimal

__all__ = [
    "ANNOTATION_EXTENDED_RESOURCE_SPEC",
    "ANNOTATION_SKIP_UPDATE_RESOURCES",
    "API_VERSION",
    "GROUP",
    "KIND",
    "VERSION",
    "ClusterColocationProfile",
    "ClusterColocationProfileSpec",
    "ProfileLabelSelector",
    "ProfileSelectorRequirement",
    "ResolvedProfile",
    "canonical_quantity",
    "format_decimal",
    "probability_percent",
    "resolve_profile",
]
