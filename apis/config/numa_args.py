"""``NodeNUMAResourceArgs`` (Koordinator ``pkg/scheduler/apis/config/v1``): fields and code defaults.

Koordinator's defaults: ``defaultCPUBindPolicy: FullPCPUs``; ``scoringStrategy`` and
``numaScoringStrategy`` both ``LeastAllocated`` over cpu:1, memory:1 (the user manual says MostAllocated,
the code says LeastAllocated; the code wins). A ``MostAllocated`` NUMA scoring strategy also makes
MostAllocated the NUMA allocate strategy of nodes without the ``numa-allocate-strategy`` label.

``numaScoringStrategy`` scores the NUMA node sets a pod could use (its topology hints) under a NUMA
topology policy; ``scoringStrategy`` scores the node, over the NUMA nodes the pod gets when it gets any.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from apis.config.args_base import ArgsModel
from apis.config.errors import FieldError, invalid, join_path, not_supported
from apis.config.types import ConfigModel

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
NUMA_SCORING_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED)
CPU_BIND_POLICIES = ("FullPCPUs", "SpreadByPCPUs")


class NUMAResourceWeight(ConfigModel):
    name: str
    weight: int = 0


_DEFAULT_WEIGHTS = (NUMAResourceWeight(name="cpu", weight=1), NUMAResourceWeight(name="memory", weight=1))


class NUMAScoringStrategy(ConfigModel):
    type: str = LEAST_ALLOCATED
    resources: tuple[NUMAResourceWeight, ...] = _DEFAULT_WEIGHTS

    @field_validator("resources")
    @classmethod
    def _default_weights(cls, resources: tuple[NUMAResourceWeight, ...]) -> tuple[NUMAResourceWeight, ...]:
        if not resources:
            return _DEFAULT_WEIGHTS
        return tuple(r if r.weight else r.model_copy(update={"weight": 1}) for r in resources)


class NodeNUMAResourceArgs(ArgsModel):
    default_cpu_bind_policy: str = Field(default="FullPCPUs", alias="defaultCPUBindPolicy")
    """The bind policy of an LSE/LSR pod that names none (``Default`` or absent in its resource-spec)."""
    scoring_strategy: NUMAScoringStrategy = NUMAScoringStrategy()
    """Node-level score: LeastAllocated or MostAllocated over the weighted resources."""
    numa_scoring_strategy: NUMAScoringStrategy = Field(default=NUMAScoringStrategy(), alias="numaScoringStrategy")

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.default_cpu_bind_policy not in CPU_BIND_POLICIES:
            errors.append(
                not_supported(join_path(path, "defaultCPUBindPolicy"), self.default_cpu_bind_policy, CPU_BIND_POLICIES)
            )
        for field_name, strategy in (
            ("scoringStrategy", self.scoring_strategy),
            ("numaScoringStrategy", self.numa_scoring_strategy),
        ):
            strategy_path = join_path(path, field_name)
            if strategy.type not in NUMA_SCORING_TYPES:
                errors.append(not_supported(join_path(strategy_path, "type"), strategy.type, NUMA_SCORING_TYPES))
            for i, resource in enumerate(strategy.resources):
                if not 0 < resource.weight <= 100:
                    errors.append(
                        invalid(
                            join_path(join_path(join_path(strategy_path, "resources"), i), "weight"),
                            resource.weight,
                            f"resource weight of {resource.name} not in valid range (0, 100]",
                        )
                    )
        return errors
