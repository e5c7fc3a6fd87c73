"""The ``slo-controller-config`` ConfigMap (Koordinator ``apis/configuration``): parsing, validation, merging.

- :mod:`.colocation`: ``colocation-config`` and the per-node :class:`ColocationStrategy` the batch
  resource calculation uses.
- :mod:`.sloconfig`: the whole ConfigMap (every key kept separately, with its last good value) and the
  NodeSLO spec rendered for one node.
- :mod:`.ranges`: the value ranges Koordinator's validator tags declare, checked on every key.
"""

from apis.configuration.colocation import (
    ANNOTATION_COLOCATION_STRATEGY,
    LABEL_CPU_RECLAIM_RATIO,
    LABEL_MEMORY_RECLAIM_RATIO,
    ColocationStrategy,
    default_colocation_strategy,
)
from apis.configuration.sloconfig import (
    COLOCATION_KEY,
    CONFIG_MAP_NAME,
    CPU_BURST_KEY,
    DEFAULT_NAMESPACE,
    KEYS,
    RESOURCE_QOS_KEY,
    RESOURCE_THRESHOLD_KEY,
    SYSTEM_KEY,
    KeyProblem,
    NodeProfile,
    SloConfig,
    StrategyKey,
    default_slo_config,
    parse_slo_config,
    render_node_slo_spec,
    resolve_colocation,
)

__all__ = [
    "ANNOTATION_COLOCATION_STRATEGY",
    "COLOCATION_KEY",
    "CONFIG_MAP_NAME",
    "CPU_BURST_KEY",
    "DEFAULT_NAMESPACE",
    "KEYS",
    "LABEL_CPU_RECLAIM_RATIO",
    "LABEL_MEMORY_RECLAIM_RATIO",
    "RESOURCE_QOS_KEY",
    "RESOURCE_THRESHOLD_KEY",
    "SYSTEM_KEY",
    "ColocationStrategy",
    "KeyProblem",
    "NodeProfile",
    "SloConfig",
    "StrategyKey",
    "default_colocation_strategy",
    "default_slo_config",
    "parse_slo_config",
    "render_node_slo_spec",
    "resolve_colocation",
]
