"""ImageLocality's formula (kube-scheduler ``imagelocality/image_locality.go``).

Each of the pod's init and regular containers whose image (normalised: ``:latest`` appended when the
name has no tag) is on the node adds ``int(size * nodes_with_image / all_nodes)``: an image on few nodes
counts little, so the pods of one image do not pile onto the first node that pulled it. The sum is
clamped to ``[23 MiB, 1000 MiB * containers]`` and mapped linearly onto 0..100 (integer division).
"""

from __future__ import annotations

import numpy as np

from koord_scheduler.framework.snapshot import IntArray

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
MAX_NODE_SCORE = 100


def normalized_image_name(name: str) -> str:
    """``normalizedImageName``: ``name:latest`` unless the last ``:`` comes after the last ``/``."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def scaled_image_score(size_bytes: int, nodes_with_image: int, total_nodes: int) -> int:
    """``scaledImageScore``: the size scaled by the image's spread, truncated (float64 as upstream)."""
    return int(float(size_bytes) * (float(nodes_with_image) / float(total_nodes)))


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """``calculatePriority``."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = MIN_THRESHOLD if sum_scores < MIN_THRESHOLD else min(sum_scores, max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def calculate_priorities(sums: IntArray, num_containers: int) -> IntArray:
    """:func:`calculate_priority` over an array of sums."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.where(sums < MIN_THRESHOLD, MIN_THRESHOLD, np.minimum(sums, max_threshold))
    result: IntArray = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
    return result
