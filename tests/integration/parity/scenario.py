"""The cluster and the pod sequence the differential test schedules.

Fourteen nodes in three zones (plus one without a zone and one alone in a fourth), with varied
allocatable, taints of each effect, one cordoned node and one with a five-pod limit; existing pods with
labels, host ports, required and preferred (anti-)affinity in three namespaces. Then about sixty pods, each
aimed at one rule of the plugins both schedulers run (the ``id`` says which). Label keys carry the
``parity.test/`` prefix so that the terms whose namespaces are "all" never match another test's pods.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

K = "parity.test/"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
WIDGET = K + "widget"
"""An extended resource two nodes have."""


@dataclass
class Names:
    """Where one run lives: its namespaces and the prefix of its node names."""

    scope: str

    @property
    def main(self) -> str:
        return self.scope

    @property
    def blue(self) -> str:
        return f"{self.scope}-blue"

    @property
    def green(self) -> str:
        return f"{self.scope}-green"

    def node(self, short: str) -> str:
        return f"{self.scope}-{short}"


# ----- nodes -----


def nodes(names: Names) -> list[dict[str, Any]]:
    def node(
        short: str,
        zone: str | None,
        cpu: str,
        memory: str,
        *,
        pods: str = "110",
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        unschedulable: bool = False,
        extra: dict[str, str] | None = None,
        ready: bool = True,
        images: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        name = names.node(short)
        all_labels = {HOST: name, K + "scope": names.scope, **(labels or {})}
        if zone:
            all_labels[ZONE] = zone
        resources = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": all_labels},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                    }
                ],
                **({"images": images} if images else {}),
            },
        }

    def taint(key: str, effect: str, value: str = "") -> dict[str, str]:
        return {"key": key, "value": value, "effect": effect}

    # ImageLocality: the pods' image on three nodes (one size everywhere: upstream takes the size the
    # first node reporting an image gave), and an image no pod uses.
    pause = [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 700 * 1024 * 1024}]
    other = [{"names": ["parity.test/other:1", "parity.test/other@sha256:0"], "sizeBytes": 300 * 1024 * 1024}]
    return [
        node("a1", "zone-a", "4", "8Gi", images=pause),
        node("a2", "zone-a", "8", "16Gi", labels={K + "disk": "ssd", K + "cores": "8"}, extra={WIDGET: "4"}),
        node(
            "a3", "zone-a", "2", "4Gi", labels={K + "gpu": "true"}, taints=[taint(K + "dedicated", "NoSchedule", "gpu")]
        ),
        node("a4", "zone-a", "4", "8Gi", unschedulable=True),
        node("b1", "zone-b", "4", "8Gi"),
        node("b2", "zone-b", "4", "16Gi", taints=[taint(K + "prefer", "PreferNoSchedule", "yes")]),
        node(
            "b3",
            "zone-b",
            "16",
            "32Gi",
            labels={K + "disk": "ssd", K + "cores": "16"},
            extra={WIDGET: "2", "ephemeral-storage": "100Gi"},
            images=pause + other,
        ),
        node("b4", "zone-b", "2", "2Gi", pods="5"),
        node("c1", "zone-c", "4", "8Gi", labels={K + "disk": "ssd"}),
        node("c2", "zone-c", "8", "8Gi", images=pause),
        node(
            "c3",
            "zone-c",
            "4",
            "8Gi",
            taints=[taint(K + "prefer", "PreferNoSchedule", "yes"), taint(K + "noisy", "PreferNoSchedule")],
        ),
        node("c4", "zone-c", "4", "8Gi", taints=[taint(K + "maintenance", "NoExecute", "true")]),
        node("d1", "zone-d", "6", "12Gi", labels={K + "disk": "hdd"}),
        node("x1", None, "4", "8Gi", labels={K + "disk": "ssd"}),
        # NotReady without the not-ready taint (no node lifecycle controller runs): schedulers do not
        # read conditions, only taints.
        node("e1", "zone-a", "4", "8Gi", ready=False),
    ]


# ----- pods -----


@dataclass
class PodSpec:
    """A pod manifest built step by step: ``PodSpec("p").labels(app="x").req("500m", "1Gi").body(ns)``."""

    name: str
    namespace: str = ""
    _labels: dict[str, str] = field(default_factory=dict)
    _spec: dict[str, Any] = field(default_factory=dict)
    _requests: dict[str, str] = field(default_factory=dict)
    _ports: list[dict[str, Any]] = field(default_factory=list)
    _owner: dict[str, Any] | None = None
    _limits: dict[str, str] = field(default_factory=dict)
    profile: str = ""
    _finalizers: list[str] = field(default_factory=list)
    """"" for the default profile, "alt" or "ratio" for the others (see the test's ``shared_config``)."""

    def on(self, profile: str) -> PodSpec:
        self.profile = profile
        return self

    def labels(self, **labels: str) -> PodSpec:
        self._labels.update({K + k: v for k, v in labels.items()})
        return self

    def raw_label(self, key: str, value: str) -> PodSpec:
        self._labels[key] = value
        return self

    def req(self, cpu: str | None = None, memory: str | None = None) -> PodSpec:
        if cpu:
            self._requests["cpu"] = cpu
        if memory:
            self._requests["memory"] = memory
        return self

    def res(self, **requests: str) -> PodSpec:
        """Requests by resource name (``ephemeral_storage`` for ``ephemeral-storage``; WIDGET as ``widget``)."""
        for key, value in requests.items():
            self._requests[WIDGET if key == "widget" else key.replace("_", "-")] = value
            if key == "widget":
                self._limits[WIDGET] = value  # extended resources cannot be overcommitted
        return self

    def init(self, cpu: str, *, sidecar: bool = False) -> PodSpec:
        """An init container (a restartable sidecar when ``sidecar``) requesting ``cpu``."""
        container: dict[str, Any] = {
            "name": f"init{len(self._spec.get('initContainers', []))}",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu}},
        }
        if sidecar:
            container["restartPolicy"] = "Always"
        self._spec.setdefault("initContainers", []).append(container)
        return self

    def limits_only(self, cpu: str, memory: str) -> PodSpec:
        self._limits.update({"cpu": cpu, "memory": memory})
        return self

    def port(self, host_port: int, protocol: str = "TCP", host_ip: str = "") -> PodSpec:
        entry: dict[str, Any] = {"containerPort": host_port, "hostPort": host_port, "protocol": protocol}
        if host_ip:
            entry["hostIP"] = host_ip
        self._ports.append(entry)
        return self

    def spec(self, **fields: Any) -> PodSpec:
        self._spec.update(fields)
        return self

    def affinity(self, kind: str, **fields: Any) -> PodSpec:
        self._spec.setdefault("affinity", {}).setdefault(kind, {}).update(fields)
        return self

    def spread(self, *constraints: dict[str, Any]) -> PodSpec:
        self._spec.setdefault("topologySpreadConstraints", []).extend(constraints)
        return self

    def finalizer(self) -> PodSpec:
        """Keeps the pod, once deleted, terminating (deletionTimestamp set) for the whole run."""
        self._finalizers = [K + "keep"]
        return self

    def owned_by(self, owner: dict[str, Any]) -> PodSpec:
        self._owner = owner
        return self

    def body(self, default_namespace: str, scheduler_name: str, node: str | None = None) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "pause", "image": "registry.k8s.io/pause:3.10"}
        if self._requests:
            container["resources"] = {"requests": dict(self._requests)}
        if self._limits:
            container.setdefault("resources", {})["limits"] = dict(self._limits)
        if self._ports:
            container["ports"] = list(self._ports)
        meta: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace or default_namespace,
            "labels": dict(self._labels),
        }
        if self._owner is not None:
            meta["ownerReferences"] = [self._owner]
        if self._finalizers:
            meta["finalizers"] = list(self._finalizers)
        spec: dict[str, Any] = {
            "schedulerName": scheduler_name,
            "containers": [container],
            "terminationGracePeriodSeconds": 0,
            **self._spec,
        }
        if node:
            spec["nodeName"] = node
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def sel(**labels: str) -> dict[str, Any]:
    return {"matchLabels": {K + k: v for k, v in labels.items()}}


def term(key: str, selector: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"labelSelector": selector, "topologyKey": key, **extra}


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def spread(key: str, skew: int, selector: dict[str, Any], *, hard: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "labelSelector": selector,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        **extra,
    }


def node_term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        out["matchFields"] = fields
    return out


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def existing_pods(names: Names) -> Iterator[tuple[PodSpec, str]]:
    """(pod, node short name): pods already running when the sequence starts."""
    yield PodSpec("e-web-a1").labels(app="web", tier="front").req("1", "1Gi"), "a1"
    yield PodSpec("e-web-b1").labels(app="web").req("500m", "2Gi"), "b1"
    yield PodSpec("e-web-b3").labels(app="web").req("2", "1Gi"), "b3"
    yield (
        (
            PodSpec("e-db-c1")
            .labels(app="db")
            .req("1", "4Gi")
            .affinity("podAntiAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(HOST, sel(app="cache"))])
        ),
        "c1",
    )
    yield (
        (
            PodSpec("e-db-a2")
            .labels(app="db")
            .req("2", "2Gi")
            .affinity(
                "podAntiAffinity",
                preferredDuringSchedulingIgnoredDuringExecution=[weighted(50, term(ZONE, sel(app="cache")))],
            )
            .affinity(
                "podAffinity",
                preferredDuringSchedulingIgnoredDuringExecution=[weighted(20, term(HOST, sel(role="batch")))],
            )
        ),
        "a2",
    )
    yield (
        (
            PodSpec("e-guard-b2")
            .labels(app="guard")
            .req("100m", "128Mi")
            .affinity("podAntiAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(ZONE, sel(team="red"))])
        ),
        "b2",
    )
    yield (
        (
            PodSpec("e-sidecar-d1")
            .labels(app="sidecar")
            .req("200m", "256Mi")
            .affinity("podAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(ZONE, sel(app="svc"))])
        ),
        "d1",
    )
    yield PodSpec("e-port-c2").labels(app="proxy").req("500m", "512Mi").port(8080), "c2"
    yield PodSpec("e-dns-b1").labels(app="dns").req("100m", "64Mi").port(53, "UDP"), "b1"
    yield PodSpec("e-big-c2").labels(app="batch").req("6", "2Gi"), "c2"
    yield PodSpec("e-web-blue", namespace=names.blue).labels(app="web").req("500m", "1Gi"), "c3"
    yield PodSpec("e-api-green", namespace=names.green).labels(app="api").req("1", "1Gi"), "d1"
    yield PodSpec("e-web-terminating").labels(app="web").req("500m", "512Mi").finalizer(), "c1"
    yield PodSpec("e-fill-b4-0").labels(app="fill").req("100m", "64Mi"), "b4"
    yield PodSpec("e-fill-b4-1").labels(app="fill").req("100m", "64Mi"), "b4"
    yield PodSpec("e-fill-b4-2").labels(app="fill").req("100m", "64Mi"), "b4"
    yield PodSpec("e-fill-b4-3").labels(app="fill").req("100m", "64Mi"), "b4"


def incoming_pods(names: Names, rs_owner: dict[str, Any]) -> Iterator[PodSpec]:
    """The pods to schedule, in order; the name says what each exercises."""
    n = names.node
    # NodeResourcesFit / BalancedAllocation / TaintToleration scoring
    yield PodSpec("fit-small").req("500m", "512Mi")
    yield PodSpec("fit-besteffort")
    yield PodSpec("fit-cpu-only").req("1500m")
    yield PodSpec("fit-memory-heavy").req("200m", "6Gi")
    yield PodSpec("fit-only-b3").req("1", "20Gi")
    yield PodSpec("fit-none-cpu").req("64", "1Gi")
    yield PodSpec("fit-none-memory-and-cpu").req("17", "40Gi")
    yield PodSpec("fit-pods-limit-b4").req("100m").spec(nodeSelector={HOST: n("b4")})
    yield PodSpec("fit-pods-limit-b4-full").req("100m").spec(nodeSelector={HOST: n("b4")})
    yield PodSpec("fit-widget").req("500m").res(widget="1")
    yield PodSpec("fit-widget-too-many").req("500m").res(widget="5")
    yield PodSpec("fit-ephemeral-storage").req("500m").res(ephemeral_storage="10Gi")
    yield PodSpec("fit-init-container-max").req("500m", "256Mi").init("3")
    yield PodSpec("fit-sidecar-adds-up").req("1", "256Mi").init("2500m", sidecar=True).init("1")
    yield PodSpec("fit-limits-default-requests").limits_only("3", "3Gi")
    yield PodSpec("fit-many-reasons").req("5", "30Gi").res(widget="3").spec(nodeSelector={ZONE: "zone-b"})
    # NodeUnschedulable / TaintToleration filter
    yield (
        PodSpec("taint-tolerates-unschedulable")
        .req("100m")
        .spec(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}])
    )
    yield (
        PodSpec("taint-gpu-tolerated")
        .req("300m")
        .spec(
            nodeSelector={K + "gpu": "true"},
            tolerations=[{"key": K + "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
        )
    )
    yield PodSpec("taint-gpu-untolerated").req("300m").spec(nodeSelector={K + "gpu": "true"})
    yield PodSpec("taint-exists-everything").req("200m").spec(tolerations=[{"operator": "Exists"}])
    yield (
        PodSpec("taint-prefer-one-tolerated")
        .req("200m")
        .spec(tolerations=[{"key": K + "prefer", "operator": "Exists", "effect": "PreferNoSchedule"}])
    )
    yield (
        PodSpec("taint-noexecute-tolerated")
        .req("200m")
        .spec(tolerations=[{"key": K + "maintenance", "operator": "Equal", "value": "true", "effect": "NoExecute"}])
    )
    # NodeAffinity
    yield PodSpec("na-selector-ssd").req("300m").spec(nodeSelector={K + "disk": "ssd"})
    yield (
        PodSpec("na-required-zones")
        .req("300m")
        .affinity(
            "nodeAffinity",
            requiredDuringSchedulingIgnoredDuringExecution={
                "nodeSelectorTerms": [node_term(expr(ZONE, "In", "zone-a", "zone-b"), expr(K + "disk", "DoesNotExist"))]
            },
        )
    )
    yield (
        PodSpec("na-required-or-terms")
        .req("300m")
        .affinity(
            "nodeAffinity",
            requiredDuringSchedulingIgnoredDuringExecution={
                "nodeSelectorTerms": [
                    node_term(expr(ZONE, "In", "zone-c")),
                    node_term(fields=[expr("metadata.name", "In", n("a2"))]),
                ]
            },
        )
    )
    yield (
        PodSpec("na-preferred-weights")
        .req("300m")
        .affinity(
            "nodeAffinity",
            preferredDuringSchedulingIgnoredDuringExecution=[
                {"weight": 10, "preference": node_term(expr(K + "disk", "In", "ssd"))},
                {"weight": 40, "preference": node_term(expr(ZONE, "In", "zone-c"))},
                {"weight": 5, "preference": node_term(expr(ZONE, "NotIn", "zone-a"))},
            ],
        )
    )
    yield (
        PodSpec("na-gt-cpu-label")
        .req("300m")
        .affinity(
            "nodeAffinity",
            requiredDuringSchedulingIgnoredDuringExecution={
                "nodeSelectorTerms": [node_term(expr(K + "gpu", "Exists"))]
            },
        )
    )
    yield (
        PodSpec("na-gt-lt")
        .req("300m")
        .affinity(
            "nodeAffinity",
            requiredDuringSchedulingIgnoredDuringExecution={
                "nodeSelectorTerms": [node_term(expr(K + "cores", "Gt", "4"), expr(K + "cores", "Lt", "12"))]
            },
        )
    )
    yield (
        PodSpec("na-required-and-preferred")
        .req("300m")
        .spec(nodeSelector={K + "disk": "ssd"})
        .affinity(
            "nodeAffinity",
            requiredDuringSchedulingIgnoredDuringExecution={"nodeSelectorTerms": [node_term(expr(ZONE, "Exists"))]},
            preferredDuringSchedulingIgnoredDuringExecution=[
                {"weight": 100, "preference": node_term(expr(ZONE, "In", "zone-c"))}
            ],
        )
    )
    # NodePorts
    yield PodSpec("ports-8080-conflict").req("100m").port(8080)
    yield PodSpec("ports-53-tcp-vs-udp").req("100m").port(53).spec(nodeSelector={ZONE: "zone-b"})
    yield PodSpec("ports-8080-hostip").req("100m").port(8080, host_ip="127.0.0.1").spec(nodeSelector={ZONE: "zone-c"})
    yield PodSpec("ports-53-udp-conflict").req("100m").port(53, "UDP").spec(nodeSelector={ZONE: "zone-b"})
    # PodTopologySpread
    for i in range(4):
        yield (
            PodSpec(f"pts-zone-hard-{i}").labels(app="web").req("200m", "256Mi").spread(spread(ZONE, 1, sel(app="web")))
        )
    yield PodSpec("pts-host-hard").labels(app="web").req("200m").spread(spread(HOST, 1, sel(app="web")))
    for i in range(2):
        yield (
            PodSpec(f"pts-zone-soft-{i}")
            .labels(app="web")
            .req("200m")
            .spread(spread(ZONE, 1, sel(app="web"), hard=False))
        )
    yield PodSpec("pts-min-domains").labels(app="md").req("200m").spread(spread(ZONE, 1, sel(app="md"), minDomains=5))
    yield (
        PodSpec("pts-min-domains-soft-host")
        .labels(app="md")
        .req("200m")
        .spread(spread(ZONE, 1, sel(app="md"), minDomains=3), spread(HOST, 2, sel(app="md"), hard=False))
    )
    yield (
        PodSpec("pts-affinity-policy-ignore")
        .labels(app="web")
        .req("200m")
        .spec(nodeSelector={K + "disk": "ssd"})
        .spread(spread(ZONE, 1, sel(app="web"), nodeAffinityPolicy="Ignore"))
    )
    yield (
        PodSpec("pts-affinity-policy-honor-required")
        .labels(app="web")
        .req("200m")
        .affinity(
            "nodeAffinity",
            requiredDuringSchedulingIgnoredDuringExecution={
                "nodeSelectorTerms": [node_term(expr(ZONE, "NotIn", "zone-d"))]
            },
        )
        .spread(spread(ZONE, 1, sel(app="web")))
    )
    yield (
        PodSpec("pts-missing-key-soft")
        .labels(app="web")
        .req("200m")
        .spread(spread(K + "disk", 1, sel(app="web"), hard=False))
    )
    yield (
        PodSpec("pts-taints-policy-honor")
        .labels(app="web")
        .req("200m")
        .spread(
            spread(ZONE, 1, sel(app="web"), nodeTaintsPolicy="Honor"),
            spread(HOST, 1, sel(app="web"), hard=False, nodeTaintsPolicy="Honor"),
        )
    )
    for i in range(3):
        yield (
            PodSpec(f"pts-match-label-keys-{i}")
            .labels(app="mlk", rev=f"r{i % 2}")
            .req("200m")
            .spread(spread(ZONE, 1, sel(app="mlk"), matchLabelKeys=[K + "rev"]))
        )
    for i in range(3):
        yield (
            PodSpec(f"pts-system-default-{i}")
            .labels(app="rs-web")
            .raw_label("pod-template-hash", "h1")
            .req("200m")
            .owned_by(rs_owner)
        )
    yield PodSpec("pts-service-default").labels(app="svc-spread").req("200m")
    yield PodSpec("pts-service-default-2").labels(app="svc-spread").req("200m")
    yield (
        PodSpec("pts-unsatisfiable")
        .labels(app="web")
        .req("200m")
        .spec(nodeSelector={ZONE: "zone-a"})
        .spread(spread(ZONE, 1, sel(app="web")), spread(HOST, 1, sel(app="web")))
    )
    # InterPodAffinity
    yield (
        PodSpec("ipa-required-web-zone")
        .req("200m")
        .affinity(
            "podAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(ZONE, sel(app="web", tier="front"))]
        )
    )
    yield (
        PodSpec("ipa-required-nobody")
        .labels(app="x")
        .req("200m")
        .affinity("podAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(ZONE, sel(app="nobody"))])
    )
    yield (
        PodSpec("ipa-required-self-first")
        .labels(app="solo")
        .req("200m")
        .affinity("podAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(ZONE, sel(app="solo"))])
    )
    yield (
        PodSpec("ipa-required-self-second")
        .labels(app="solo")
        .req("200m")
        .affinity("podAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(ZONE, sel(app="solo"))])
    )
    yield (
        PodSpec("ipa-anti-host-web")
        .labels(app="web")
        .req("200m")
        .affinity("podAntiAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(HOST, sel(app="web"))])
    )
    yield (
        PodSpec("ipa-preferred-mix")
        .req("200m")
        .affinity(
            "podAffinity",
            preferredDuringSchedulingIgnoredDuringExecution=[
                weighted(30, term(ZONE, sel(app="web"))),
                weighted(70, term(HOST, sel(app="db"))),
            ],
        )
        .affinity(
            "podAntiAffinity", preferredDuringSchedulingIgnoredDuringExecution=[weighted(60, term(ZONE, sel(app="md")))]
        )
    )
    yield (
        PodSpec("ipa-namespaces-list")
        .req("200m")
        .affinity(
            "podAffinity",
            requiredDuringSchedulingIgnoredDuringExecution=[term(HOST, sel(app="web"), namespaces=[names.blue])],
        )
    )
    yield (
        PodSpec("ipa-namespace-selector-all")
        .req("200m")
        .affinity(
            "podAntiAffinity",
            requiredDuringSchedulingIgnoredDuringExecution=[term(ZONE, sel(app="api"), namespaceSelector={})],
        )
    )
    yield (
        PodSpec("ipa-namespace-selector-blue")
        .req("200m")
        .affinity(
            "podAffinity",
            preferredDuringSchedulingIgnoredDuringExecution=[
                weighted(80, term(HOST, sel(app="web"), namespaceSelector=sel(team="blue")))
            ],
        )
    )
    yield (
        PodSpec("ipa-namespace-selector-required")
        .req("200m")
        .affinity(
            "podAffinity",
            requiredDuringSchedulingIgnoredDuringExecution=[
                term(ZONE, sel(app="api"), namespaceSelector={"matchExpressions": [expr(K + "team", "In", "green")]})
            ],
        )
    )
    yield (
        PodSpec("ipa-anti-missing-key")
        .labels(app="ak")
        .req("200m")
        .affinity("podAntiAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(K + "disk", sel(app="web"))])
    )
    yield (
        PodSpec("ipa-preferred-anti-missing-key")
        .req("200m")
        .affinity(
            "podAntiAffinity",
            preferredDuringSchedulingIgnoredDuringExecution=[
                weighted(100, term(K + "disk", sel(app="web"))),
                weighted(1, term(HOST, sel(app="web"))),
            ],
        )
    )
    yield PodSpec("ipa-existing-anti-symmetry").labels(app="cache").req("200m").spec(nodeSelector={K + "disk": "ssd"})
    yield PodSpec("ipa-existing-anti-zone").labels(team="red").req("200m")
    yield PodSpec("ipa-hard-weight-svc").labels(app="svc").req("200m")
    yield PodSpec("ipa-existing-preferred-batch").labels(role="batch").req("200m")
    yield PodSpec("ipa-existing-preferred-cache").labels(app="cache").req("200m")
    yield (
        PodSpec("ipa-match-label-keys")
        .labels(app="mk", rev="r1")
        .req("200m")
        .affinity(
            "podAntiAffinity",
            requiredDuringSchedulingIgnoredDuringExecution=[term(HOST, sel(app="mlk"), matchLabelKeys=[K + "rev"])],
        )
    )
    yield (
        PodSpec("ipa-anti-everywhere")
        .labels(app="web")
        .req("200m")
        .spec(nodeSelector={ZONE: "zone-b"})
        .affinity("podAntiAffinity", requiredDuringSchedulingIgnoredDuringExecution=[term(ZONE, sel(app="web"))])
    )
    # mixed
    yield (
        PodSpec("mixed-everything")
        .labels(app="web")
        .req("1", "2Gi")
        .port(9090)
        .spec(tolerations=[{"key": K + "prefer", "operator": "Exists"}])
        .affinity(
            "nodeAffinity",
            preferredDuringSchedulingIgnoredDuringExecution=[
                {"weight": 20, "preference": node_term(expr(K + "disk", "In", "ssd"))}
            ],
        )
        .affinity(
            "podAntiAffinity",
            preferredDuringSchedulingIgnoredDuringExecution=[weighted(40, term(HOST, sel(app="web")))],
        )
        .spread(spread(ZONE, 2, sel(app="web"), hard=False))
    )
    yield (
        PodSpec("na-prefilter-no-such-node")
        .req("100m")
        .affinity(
            "nodeAffinity",
            requiredDuringSchedulingIgnoredDuringExecution={
                "nodeSelectorTerms": [node_term(fields=[expr("metadata.name", "In", n("nowhere"))])]
            },
        )
    )
    yield (
        PodSpec("na-prefilter-one-node")
        .req("100m")
        .affinity(
            "nodeAffinity",
            requiredDuringSchedulingIgnoredDuringExecution={
                "nodeSelectorTerms": [
                    node_term(fields=[expr("metadata.name", "In", n(short))]) for short in ("b1", "c2", "a3")
                ]
            },
        )
    )
    yield from alternative_profile_pods(rs_owner)
    yield PodSpec("unschedulable-selector").req("100m").spec(nodeSelector={K + "missing": "yes"})
    del n


def alternative_profile_pods(rs_owner: dict[str, Any]) -> Iterator[PodSpec]:
    """Pods for the ``alt`` profile (MostAllocated with an extended resource, weighted BalancedAllocation,
    List default constraints, hardPodAffinityWeight 0, ignorePreferredTermsOfExistingPods, addedAffinity)
    and the ``ratio`` profile (RequestedToCapacityRatio, ignoredResources)."""
    yield PodSpec("alt-fit-small").on("alt").req("500m", "512Mi")
    yield PodSpec("alt-fit-widget").on("alt").req("1", "1Gi").res(widget="1")
    yield PodSpec("alt-besteffort").on("alt")
    yield PodSpec("alt-zone-d-excluded").on("alt").req("200m").spec(nodeSelector={ZONE: "zone-d"})
    for i in range(3):
        yield (
            PodSpec(f"alt-list-defaults-{i}")
            .on("alt")
            .labels(app="rs-web")
            .raw_label("pod-template-hash", "h1")
            .req("300m")
            .owned_by(rs_owner)
        )
    yield PodSpec("alt-hard-weight-zero-svc").on("alt").labels(app="svc").req("200m")
    yield PodSpec("alt-existing-preferred-ignored").on("alt").labels(role="batch").req("200m")
    yield (
        PodSpec("alt-own-preferred-keeps-existing")
        .on("alt")
        .labels(role="batch")
        .req("200m")
        .affinity(
            "podAffinity", preferredDuringSchedulingIgnoredDuringExecution=[weighted(10, term(ZONE, sel(app="web")))]
        )
    )
    yield PodSpec("alt-taints").on("alt").req("200m").spec(tolerations=[{"operator": "Exists", "effect": "NoSchedule"}])
    yield PodSpec("ratio-small").on("ratio").req("500m", "512Mi")
    yield PodSpec("ratio-big").on("ratio").req("3", "6Gi")
    yield PodSpec("ratio-widget-ignored").on("ratio").req("1").res(widget="9")
    yield PodSpec("ratio-besteffort").on("ratio")


def random_pods(seed: int, count: int) -> Iterator[PodSpec]:
    """``count`` pods mixing the same rules at random (``random.Random(seed)``): the fixed sequence tests
    each rule alone, these test them together."""
    rng = random.Random(seed)
    apps = ["web", "db", "cache", "md", "mlk", "svc", "rnd"]
    keys = [ZONE, HOST, K + "disk"]

    def selector() -> dict[str, Any]:
        if rng.random() < 0.2:
            return {"matchExpressions": [expr(K + "app", rng.choice(["In", "NotIn"]), *rng.sample(apps, 2))]}
        return sel(app=rng.choice(apps))

    def pod_term() -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if rng.random() < 0.2:
            extra["namespaceSelector"] = {}
        return term(rng.choice(keys), selector(), **extra)

    for i in range(count):
        spec = PodSpec(f"random-{seed}-{i}").on(rng.choice(["", "", "alt", "ratio"]))
        spec.labels(app=rng.choice(apps))
        if rng.random() < 0.3:
            spec.labels(team=rng.choice(["red", "blue"]))
        spec.req(rng.choice([None, "100m", "250m", "500m", "1", "2", "3"]), rng.choice([None, "128Mi", "1Gi", "3Gi"]))
        if rng.random() < 0.15:
            spec.spec(nodeSelector=rng.choice([{ZONE: "zone-a"}, {ZONE: "zone-c"}, {K + "disk": "ssd"}]))
        if rng.random() < 0.3:
            spec.spec(
                tolerations=[
                    rng.choice(
                        [
                            {"operator": "Exists"},
                            {"key": K + "prefer", "operator": "Exists"},
                            {"key": K + "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
                            {"key": K + "maintenance", "operator": "Exists", "effect": "NoExecute"},
                        ]
                    )
                ]
            )
        if rng.random() < 0.3:
            spec.affinity(
                "nodeAffinity",
                preferredDuringSchedulingIgnoredDuringExecution=[
                    {
                        "weight": rng.randint(1, 100),
                        "preference": node_term(
                            expr(
                                rng.choice([ZONE, K + "disk"]),
                                rng.choice(["In", "NotIn"]),
                                rng.choice(["zone-a", "zone-b", "zone-c", "ssd", "hdd"]),
                            )
                        ),
                    }
                ],
            )
        if rng.random() < 0.4:
            constraints = []
            for key in rng.sample(keys, rng.randint(1, 2)):
                hard = rng.random() < 0.5
                extra: dict[str, Any] = {}
                if hard and rng.random() < 0.3:
                    extra["minDomains"] = rng.randint(1, 5)
                if rng.random() < 0.3:
                    extra["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
                if rng.random() < 0.3:
                    extra["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
                constraints.append(spread(key, rng.randint(1, 3), selector(), hard=hard, **extra))
            spec.spread(*constraints)
        if rng.random() < 0.4:
            kind = rng.choice(["podAffinity", "podAntiAffinity"])
            if rng.random() < 0.4:
                spec.affinity(kind, requiredDuringSchedulingIgnoredDuringExecution=[pod_term()])
            else:
                spec.affinity(
                    kind,
                    preferredDuringSchedulingIgnoredDuringExecution=[
                        weighted(rng.randint(1, 100), pod_term()) for _ in range(rng.randint(1, 2))
                    ],
                )
        if rng.random() < 0.1:
            spec.port(rng.choice([8080, 9090, 53]))
        yield spec


# ----- volumes -----


def storage_objects(names: Names) -> list[tuple[str, dict[str, Any]]]:
    """(API path, object): StorageClasses, PersistentVolumes and claims for :func:`volume_pods`. The
    ``Immediate`` claims are bound by kube-controller-manager's PersistentVolume controller before the
    pods come (the volumes name their claims); ``v-unbound-data`` finds no volume and stays unbound."""
    scope = names.scope
    sc_path, pv_path = "/apis/storage.k8s.io/v1/storageclasses", "/api/v1/persistentvolumes"
    pvc_path = f"/api/v1/namespaces/{names.main}/persistentvolumeclaims"

    def storage_class(
        name: str, mode: str, provisioner: str = "kubernetes.io/no-provisioner", **extra: Any
    ) -> tuple[str, dict[str, Any]]:
        return sc_path, {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": f"{scope}-{name}"},
            "provisioner": provisioner,
            "volumeBindingMode": mode,
            **extra,
        }

    def volume(
        name: str,
        class_name: str,
        *,
        claim: str | None = None,
        hosts: tuple[str, ...] = (),
        labels: dict[str, str] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        spec: dict[str, Any] = {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": f"{scope}-{class_name}",
            "csi": {"driver": "csi.parity.test", "volumeHandle": f"{scope}-{name}"},
        }
        if claim:
            spec["claimRef"] = {"namespace": names.main, "name": claim}
        if hosts:
            spec["nodeAffinity"] = {
                "required": {"nodeSelectorTerms": [node_term(expr(HOST, "In", *(names.node(h) for h in hosts)))]}
            }
        return pv_path, {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{scope}-{name}", "labels": labels or {}},
            "spec": spec,
        }

    def claim(name: str, class_name: str, size: str = "1Gi") -> tuple[str, dict[str, Any]]:
        return pvc_path, {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": f"{scope}-{class_name}",
                "resources": {"requests": {"storage": size}},
            },
        }

    return [
        storage_class("immediate", "Immediate"),
        storage_class("local", "WaitForFirstConsumer"),
        storage_class(
            "nowhere",
            "WaitForFirstConsumer",
            provisioner="csi.parity.test",
            allowedTopologies=[{"matchLabelExpressions": [{"key": ZONE, "values": ["zone-x"]}]}],
        ),
        volume("zonal", "immediate", claim="v-zonal-data", labels={ZONE: "zone-b"}),
        volume("pinned", "immediate", claim="v-pinned-data", hosts=("b3", "c2")),
        volume("local-a1", "local", hosts=("a1",)),
        claim("v-zonal-data", "immediate"),
        claim("v-pinned-data", "immediate"),
        claim("v-static-data", "local"),
        claim("v-nowhere-data", "nowhere"),
        claim("v-unbound-data", "immediate", size="100Gi"),
    ]


def volume_pods() -> Iterator[PodSpec]:
    def mounting(name: str, claim: str) -> PodSpec:
        return PodSpec(name).req("100m").spec(volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])

    yield mounting("v-zonal", "v-zonal-data")  # VolumeZone: zone-b only
    yield mounting("v-pinned", "v-pinned-data")  # VolumeBinding: the bound volume's node affinity
    yield mounting("v-static", "v-static-data")  # WaitForFirstConsumer, the one local volume on a1
    yield mounting("v-nowhere", "v-nowhere-data")  # no node in the class's allowed topologies
    yield mounting("v-unbound", "v-unbound-data")  # unbound Immediate claim
    yield mounting("v-missing", "v-missing-data")  # no such claim (VolumeRestrictions' PreFilter says so)
