"""Group identity values (Koordinator ``runtimehooks/hooks/groupidentity``), as pure functions.

:func:`bvt_rule` is ``parseRule``: with the NodeSLO CPU policy ``groupIdentity`` (also when unset), a class
whose ``cpuQOS.enable`` is true uses its ``groupIdentity`` (defaults LSR 2, LS 2, BE -1), and a disabled
class uses 0. Pods of class LSE/LSR/LS/BE get their class's value; a pod without the
``koordinator.sh/qosClass`` label gets the value of its Kubernetes QoS (Guaranteed: LSR's if LSR is on, else
LS's; Burstable: LS; BestEffort: BE). The kube-QoS directories get Burstable = LS, BestEffort = BE, and
the kubepods root 0. An LS pod may override its value with the ``koordinator.sh/cpuQOS`` annotation
(``{"enable": true, "groupIdentity": -1}``; ``enable`` false or absent gives 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from apis.core import boundedjson
from apis.extension import LABEL_POD_QOS, KubeQOSClass, QoSClass, qos_class_by_name
from apis.slo.nodeslo import CPUQOSCfg, NodeSLOSpec, ResourceQOS
from koordlet.qosmanager.executor import ResourceUpdate

NAME = "GroupIdentity"
BVT = "cpu.bvt_warp_ns"
NONE_BVT = 0
CPU_POLICY_GROUP_IDENTITY = "groupIdentity"
ANNOTATION_CPU_QOS = "koordinator.sh/cpuQOS"


class CPUQOSAnnotationError(ValueError):
    """The pod's ``koordinator.sh/cpuQOS`` annotation is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class BvtRule:
    enable: bool = False
    pod_qos: Mapping[QoSClass, int] = field(default_factory=dict)
    kube_dir: Mapping[KubeQOSClass, int] = field(default_factory=dict)
    kube_pod: Mapping[KubeQOSClass, int] = field(default_factory=dict)


def _class_value(qos: ResourceQOS | None, policy_on: bool) -> tuple[bool, int]:
    cfg = qos.cpu_qos if qos else None
    on = policy_on and bool(cfg and cfg.enable)
    value = cfg.group_identity if cfg is not None and cfg.group_identity is not None else NONE_BVT
    return on, (value if on else NONE_BVT)


def bvt_rule(slo: NodeSLOSpec) -> BvtRule:
    """Koordinator's ``parseRule`` on the merged NodeSLO."""
    strategy = slo.resource_qos_strategy
    if strategy is None:
        return BvtRule()
    policy = strategy.policies.cpu_policy if strategy.policies else None
    policy_on = not policy or policy == CPU_POLICY_GROUP_IDENTITY
    lsr_on, lsr = _class_value(strategy.lsr_class, policy_on)
    ls_on, ls = _class_value(strategy.ls_class, policy_on)
    be_on, be = _class_value(strategy.be_class, policy_on)
    guaranteed_pod = lsr if lsr_on else (ls if ls_on else NONE_BVT)
    return BvtRule(
        enable=lsr_on or ls_on or be_on,
        pod_qos={QoSClass.LSE: lsr, QoSClass.LSR: lsr, QoSClass.LS: ls, QoSClass.BE: be},
        kube_dir={KubeQOSClass.GUARANTEED: NONE_BVT, KubeQOSClass.BURSTABLE: ls, KubeQOSClass.BEST_EFFORT: be},
        kube_pod={KubeQOSClass.GUARANTEED: guaranteed_pod, KubeQOSClass.BURSTABLE: ls, KubeQOSClass.BEST_EFFORT: be},
    )


def parse_cpu_qos_annotation(raw: str) -> CPUQOSCfg:
    """``GetPodCPUQoSConfigByAttr``: JSON with ``groupIdentity`` in [-1, 2]."""
    try:
        data = boundedjson.loads(raw)
    except ValueError as err:
        raise CPUQOSAnnotationError(f"annotation {ANNOTATION_CPU_QOS}: not JSON: {err}") from None
    if not isinstance(data, dict):
        raise CPUQOSAnnotationError(f"annotation {ANNOTATION_CPU_QOS}: want a JSON object")
    try:
        cfg = CPUQOSCfg.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CPUQOSAnnotationError(f"annotation {ANNOTATION_CPU_QOS}: {where}: {first['msg']}") from None
    if cfg.group_identity is not None and not -1 <= cfg.group_identity <= 2:
        raise CPUQOSAnnotationError(
            f"annotation {ANNOTATION_CPU_QOS}: groupIdentity {cfg.group_identity} outside [-1, 2]"
        )
    return cfg


def pod_bvt(rule: BvtRule, labels: Mapping[str, str], annotations: Mapping[str, str], kube_qos: KubeQOSClass) -> int:
    """``SetPodBvtValue``: the pod's value (raises :class:`CPUQOSAnnotationError` for a bad annotation)."""
    qos = qos_class_by_name(labels.get(LABEL_POD_QOS, ""))
    value = rule.pod_qos.get(qos, rule.kube_pod.get(kube_qos, NONE_BVT))
    raw = annotations.get(ANNOTATION_CPU_QOS)
    if raw is not None and qos is QoSClass.LS:
        cfg = parse_cpu_qos_annotation(raw)
        if cfg.group_identity is not None:
            value = cfg.group_identity
        if not cfg.enable:
            value = NONE_BVT
    return value


def bvt_updates(rel_dir: str, value: int, children: Sequence[str]) -> list[ResourceUpdate]:
    """A pod cgroup and each child (containers and sandbox) get the same value."""
    return [ResourceUpdate(BVT, d, str(value), NAME) for d in (rel_dir, *(f"{rel_dir}/{c}" for c in children))]
