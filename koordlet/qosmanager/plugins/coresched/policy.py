"""Core scheduling decisions (Koordinator ``runtimehooks/hooks/coresched/rule.go`` and ``helper.go``), as
pure functions.

With NodeSLO ``resourceQOSStrategy.policies.cpuPolicy: coreSched``, each class (LSR, LS, BE) whose
``cpuQOS.enable`` is true has its pods' containers in core-scheduling groups: a pod is *enabled* when its
class is (a pod without the ``koordinator.sh/qosClass`` label goes by its Kubernetes QoS: Guaranteed takes
LSR's setting if LSR is on, else LS's; Burstable LS; BestEffort BE). ``coreExpeller`` adds ``-expeller`` to
the group id, and ``schedIdle: 1`` makes the class's kube-QoS cgroup ``cpu.idle`` 1. A disabled class is
"None" (no expeller, no idle). The group id is the pod label ``koordinator.sh/core-sched-group-id`` (default
"", one group for all); ``koordinator.sh/core-sched-policy: exclusive`` puts the pod in a group of its own
(its uid) and ``none`` turns it off. SYSTEM pods are never touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.extension import LABEL_POD_QOS, KubeQOSClass, QoSClass, qos_class_by_name
from apis.slo.nodeslo import NodeSLOSpec, ResourceQOS
from koordlet.qosmanager.executor import ResourceUpdate

NAME = "CoreSched"
CPU_POLICY_CORE_SCHED = "coreSched"
LABEL_GROUP_ID = "koordinator.sh/core-sched-group-id"
LABEL_POLICY = "koordinator.sh/core-sched-policy"
POLICY_EXCLUSIVE = "exclusive"
POLICY_NONE = "none"
EXPELLER_SUFFIX = "-expeller"


@dataclass(frozen=True, slots=True)
class Param:
    pod_enabled: bool = False
    expeller: bool = False
    cpu_idle: bool = False


@dataclass(frozen=True, slots=True)
class CoreSchedRule:
    enable: bool = False
    pod_qos: Mapping[QoSClass, Param] = field(default_factory=dict)
    kube_pod: Mapping[KubeQOSClass, Param] = field(default_factory=dict)


def _param(qos: ResourceQOS | None, policy_on: bool) -> Param:
    cfg = qos.cpu_qos if qos else None
    if not policy_on or cfg is None or not cfg.enable:
        return Param()  # a disabled class carries the "None" CPU QoS: no expeller, no idle
    return Param(True, bool(cfg.core_expeller), cfg.sched_idle == 1)


def core_sched_rule(slo: NodeSLOSpec) -> CoreSchedRule:
    """Koordinator's ``parseRuleForNodeSLO`` on the merged NodeSLO."""
    strategy = slo.resource_qos_strategy
    if strategy is None:
        return CoreSchedRule()
    policy = strategy.policies.cpu_policy if strategy.policies else None
    on = policy == CPU_POLICY_CORE_SCHED
    lsr, ls, be = (_param(c, on) for c in (strategy.lsr_class, strategy.ls_class, strategy.be_class))
    return CoreSchedRule(
        enable=lsr.pod_enabled or ls.pod_enabled or be.pod_enabled,
        pod_qos={QoSClass.LSE: lsr, QoSClass.LSR: lsr, QoSClass.LS: ls, QoSClass.BE: be},
        kube_pod={
            KubeQOSClass.GUARANTEED: lsr if lsr.pod_enabled else ls,
            KubeQOSClass.BURSTABLE: ls,
            KubeQOSClass.BEST_EFFORT: be,
        },
    )


def pod_core_sched(
    rule: CoreSchedRule, labels: Mapping[str, str], kube_qos: KubeQOSClass, pod_uid: str
) -> tuple[bool, str]:
    """``getPodEnabledAndGroup``: (enabled, group id) of a pod."""
    group = labels.get(LABEL_GROUP_ID, "")
    policy = labels.get(LABEL_POLICY, "")
    param = Param()
    if rule.enable:
        qos = qos_class_by_name(labels.get(LABEL_POD_QOS, ""))
        param = rule.pod_qos.get(qos) or rule.kube_pod.get(kube_qos) or Param()
    enabled = param.pod_enabled
    if policy == POLICY_EXCLUSIVE:
        group = pod_uid
    elif policy == POLICY_NONE:
        enabled = False
    if param.expeller:
        group += EXPELLER_SUFFIX
    return enabled, group


def cpu_idle_updates(rule: CoreSchedRule, qos_dirs: Mapping[KubeQOSClass, str]) -> list[ResourceUpdate]:
    """``SetKubeQOSCPUIdle``: ``cpu.idle`` of each kube-QoS cgroup, 1 when its class has ``schedIdle: 1``."""
    return [
        ResourceUpdate("cpu.idle", rel, "1" if rule.kube_pod.get(qos, Param()).cpu_idle else "0", NAME)
        for qos, rel in qos_dirs.items()
    ]
