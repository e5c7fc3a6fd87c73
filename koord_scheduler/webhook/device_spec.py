"""The DeviceResourceSpec rule of the pod webhook (Koordinator ``pkg/webhook/pod/mutating/
device_resource_spec.go``), pure: JSON in, the same JSON changed in place.

For each container (not init containers) that asks for any of ``koordinator.sh/gpu``, ``gpu-core``,
``gpu-memory``, ``gpu-memory-ratio`` or ``gpu.shared`` (in requests or limits):

1. ``koordinator.sh/gpu: n`` in requests becomes ``gpu-core: n`` and ``gpu-memory-ratio: n`` in requests
   and limits; ``koordinator.sh/gpu`` is removed from both;
2. without ``koordinator.sh/gpu.shared`` in requests, ``gpu.shared`` is added to requests and limits: the
   number of GPUs, ``gpu-memory-ratio / 100`` when that is a multiple of 100 above 100 (else from
   ``gpu-core`` the same way when there is no ratio), else 1.

Quantities are read as Kubernetes quantities; a value that does not parse is left alone (the scheduler
reports it).
"""

from __future__ import annotations

from typing import Any

from apis.core.errors import QuantityError
from apis.core.quantity import value as quantity_value
from apis.extension.device import (
    RESOURCE_GPU,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_GPU_SHARED,
)

Json = dict[str, Any]

_WATCHED = (RESOURCE_GPU, RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO, RESOURCE_GPU_SHARED)


def _amount(resources: Json, name: str) -> int | None:
    raw = resources.get(name)
    if raw is None:
        return None
    try:
        return quantity_value(raw)
    except (QuantityError, ValueError, TypeError):
        return None


def _shared_count(requests: Json) -> int:
    ratio, core = _amount(requests, RESOURCE_GPU_MEMORY_RATIO), _amount(requests, RESOURCE_GPU_CORE)
    if RESOURCE_GPU_MEMORY_RATIO in requests:
        return ratio // 100 if ratio is not None and ratio > 100 and ratio % 100 == 0 else 1
    if core is not None and core > 100 and core % 100 == 0:
        return core // 100
    return 1


def mutate_device_resources(pod: Json) -> bool:
    """Apply the rule to ``pod``'s containers; whether anything changed."""
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list):
        return False
    mutated = False
    for container in containers:
        resources = container.get("resources") if isinstance(container, dict) else None
        if not isinstance(resources, dict):
            continue
        requests = resources.get("requests")
        limits = resources.get("limits")
        requests = requests if isinstance(requests, dict) else {}
        limits = limits if isinstance(limits, dict) else {}
        if not any(name in requests or name in limits for name in _WATCHED):
            continue
        had_shared = RESOURCE_GPU_SHARED in requests
        if RESOURCE_GPU in requests:
            gpu = _amount(requests, RESOURCE_GPU)
            if gpu is not None:
                for target in (requests, limits):
                    target[RESOURCE_GPU_CORE] = str(gpu)
                    target[RESOURCE_GPU_MEMORY_RATIO] = str(gpu)
                    target.pop(RESOURCE_GPU, None)
                mutated = True
        if not had_shared:
            count = str(_shared_count(requests))
            requests[RESOURCE_GPU_SHARED] = count
            limits[RESOURCE_GPU_SHARED] = count
            mutated = True
        resources["requests"] = requests
        resources["limits"] = limits
    return mutated
