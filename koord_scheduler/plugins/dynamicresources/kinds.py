"""The ``resource.k8s.io/v1`` kinds DynamicResources watches and writes. The kind names are the ones the
scheduling queue knows as event resources, so their events requeue the pods this plugin rejected."""

from __future__ import annotations

from apis.resource import (
    GROUP,
    VERSION,
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from koord_scheduler.framework.types import ObjectKind

DEVICE_CLASS = ObjectKind("DeviceClass", GROUP, VERSION, "deviceclasses", False, parse_device_class)
RESOURCE_SLICE = ObjectKind("ResourceSlice", GROUP, VERSION, "resourceslices", False, parse_resource_slice)
RESOURCE_CLAIM = ObjectKind("ResourceClaim", GROUP, VERSION, "resourceclaims", True, parse_resource_claim)
RESOURCE_CLAIM_TEMPLATE = ObjectKind(
    "ResourceClaimTemplate",
    GROUP,
    VERSION,
    "resourceclaimtemplates",
    True,
    parse_resource_claim_template,
    optional=True,
)
"""Watched only so that ``simulate`` reads templates (its in-memory cluster creates claims from them, as
kube-controller-manager's resourceclaim controller does); the scheduler itself never reads them."""
