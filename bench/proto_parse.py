#!/usr/bin/env python3
"""Microseconds per object from the bytes of a list to the scheduler's Pod / Node, three ways.

- ``json``: orjson decodes the list page (``kubeapi.jsoncodec.loads_list``), :mod:`apis.core.parse`
  parses each item (``contentType: application/json``);
- ``protobuf-dict``: upb decodes the page, :func:`kubeapi.protodict.to_json` turns each item into the
  JSON-shaped dict and the same parser reads it (the protobuf path before the direct parser);
- ``protobuf-direct``: upb decodes the page, :mod:`kubeapi.protoparse` builds the objects from the
  messages (koord-scheduler's protobuf path).

The objects are what a Deployment's pod looks like on a real API server (managedFields, the
service-account token volume, the default tolerations, probes, env, a container status; bound and
pending) and a kubelet-reported Node (addresses, nodeInfo, images, conditions); ``--pods`` of each.
In process, no API server: the protobuf bytes are the messages built from the same JSON
(``tests/unit/kubeapi/protobuild.py``). Rounds of each way alternate; the median round is reported.

    .venv/bin/python bench/proto_parse.py [--objects 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit" / "kubeapi")]

import orjson  # noqa: E402
from protobuild import from_json  # noqa: E402

from apis.core.parse import parse_node, parse_pod  # noqa: E402
from kubeapi import jsoncodec, protoparse, protowire  # noqa: E402
from kubeapi.protogen import core_v1_pb2, runtime_pb2  # noqa: E402

Json = dict[str, Any]

MANAGED = [
    {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-01-02T03:04:05Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}}},
    }
]


def deployment_pod(i: int, *, bound: bool) -> Json:
    name = f"web-7d9f8b6c5-{i:05d}"
    pod: Json = {
        "metadata": {
            "name": name,
            "generateName": "web-7d9f8b6c5-",
            "namespace": "default",
            "uid": f"0b6c7a1e-0000-4000-8000-{i:012d}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-02T03:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d9f8b6c5",
                    "uid": "5a0e8b52-0000-4000-8000-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": MANAGED,
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-abcde",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example/web:1.2.3",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": "MODE", "value": "production"}, {"name": "LOG", "value": "info"}],
                    "resources": {
                        "limits": {"cpu": "500m", "memory": "512Mi"},
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                    },
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-abcde",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "koord-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }
    if bound:
        pod["spec"]["nodeName"] = f"node-{i % 1000}"
        pod["status"] = {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-01-02T03:04:07Z"}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "10.0.0.1",
            "podIP": f"10.244.{i % 250}.{i % 200}",
            "startTime": "2026-01-02T03:04:06Z",
            "containerStatuses": [
                {
                    "name": "web",
                    "state": {"running": {"startedAt": "2026-01-02T03:04:07Z"}},
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example/web:1.2.3",
                    "imageID": "registry.example/web@sha256:0123456789abcdef",
                    "containerID": f"containerd://{i:064d}",
                    "started": True,
                }
            ],
            "qosClass": "Burstable",
        }
    return pod


def kubelet_node(i: int) -> Json:
    return {
        "metadata": {
            "name": f"node-{i}",
            "uid": f"7e0c0000-0000-4000-8000-{i:012d}",
            "resourceVersion": str(5000 + i),
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "labels": {
                "kubernetes.io/hostname": f"node-{i}",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "node.kubernetes.io/instance-type": "m5.2xlarge",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": MANAGED,
        },
        "spec": {"podCIDR": f"10.244.{i % 250}.0/24", "providerID": f"aws:///zone/i-{i:08x}"},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "7910m", "memory": "31Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [
                {
                    "type": t,
                    "status": "True" if t == "Ready" else "False",
                    "lastHeartbeatTime": "2026-01-02T03:04:05Z",
                    "lastTransitionTime": "2026-01-02T03:04:05Z",
                    "reason": f"Kubelet{t}",
                    "message": "kubelet is posting ready status",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{i % 250}.1"},
                {"type": "Hostname", "address": f"node-{i}"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "m",
                "systemUUID": "s",
                "bootID": "b",
                "kernelVersion": "6.1.0",
                "osImage": "Ubuntu",
                "containerRuntimeVersion": "containerd://1.7",
                "kubeletVersion": "v1.35.0",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {
                    "names": [f"registry.example/img{j}@sha256:{j:064d}", f"registry.example/img{j}:1"],
                    "sizeBytes": 10**8 + j,
                }
                for j in range(5)
            ],
        },
    }


def pages(docs: list[Json], kind: str, list_message: Any) -> tuple[bytes, bytes]:
    """The JSON and protobuf bodies of one list of ``docs``."""
    as_json = orjson.dumps({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": docs})
    message = list_message()
    message.metadata.resourceVersion = "1"
    for doc in docs:
        from_json(message.items.add(), copy.deepcopy(doc))
    unknown = runtime_pb2.Unknown(raw=message.SerializeToString())
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind = "v1", kind
    return as_json, protowire.MAGIC + unknown.SerializeToString()


def ways(parse: Callable[[Json], Any], direct: Callable[[Any], Any]) -> dict[str, Callable[[bytes, bytes], list[Any]]]:
    return {
        "json": lambda j, p: [parse(item) for item in jsoncodec.loads_list(j)["items"]],
        "protobuf-dict": lambda j, p: [parse(item.as_json()) for item in protowire.decode_list(p)["items"]],
        "protobuf-direct": lambda j, p: [direct(item.message) for item in protowire.decode_list(p)["items"]],
    }


def measure(label: str, docs: list[Json], *, kind: str, parse: Any, direct: Any, rounds: int) -> None:
    list_cls = core_v1_pb2.PodList if kind == "PodList" else core_v1_pb2.NodeList
    as_json, as_proto = pages(docs, kind, list_cls)
    contenders = ways(parse, direct)
    results = {name: fn(as_json, as_proto) for name, fn in contenders.items()}
    assert results["json"] == results["protobuf-dict"] == results["protobuf-direct"], "the ways disagree"
    del results
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            gc.collect()  # each way starts from the same heap (no collection owed by the one before)
            started = time.process_time()
            fn(as_json, as_proto)
            times[name].append((time.process_time() - started) / len(docs) * 1e6)
    base = statistics.median(times["json"])
    print(f"{label} ({len(docs)} objects, {len(as_json)} B JSON / {len(as_proto)} B protobuf):")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:16s} {median:7.1f} µs CPU per object  ({median / base:.2f} of json)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    n = args.objects
    measure(
        "bound pods",
        [deployment_pod(i, bound=True) for i in range(n)],
        kind="PodList",
        parse=parse_pod,
        direct=protoparse.pod_from_message,
        rounds=args.rounds,
    )
    measure(
        "pending pods",
        [deployment_pod(i, bound=False) for i in range(n)],
        kind="PodList",
        parse=parse_pod,
        direct=protoparse.pod_from_message,
        rounds=args.rounds,
    )
    measure(
        "nodes",
        [kubelet_node(i) for i in range(n)],
        kind="NodeList",
        parse=parse_node,
        direct=protoparse.node_from_message,
        rounds=args.rounds,
    )


if __name__ == "__main__":
    main()
