#!/usr/bin/env python3
"""Pods with WaitForFirstConsumer claims, end to end: koord-scheduler vs kube-scheduler, same control plane.

A real kube-apiserver + etcd, kube-controller-manager with its PersistentVolume controller (claim
binding) and, in this process, a provisioner that behaves as a CSI external-provisioner for a
topology-aware driver: for each claim the PersistentVolume controller hands to it
(``volume.kubernetes.io/storage-provisioner``) once the scheduler chose a node
(``volume.kubernetes.io/selected-node``), it creates a PersistentVolume of the claim's size, pre-bound to
the claim and pinned to that node by ``kubernetes.io/hostname`` (tests/integration/volumes/provisioner.py
does the same for the tests). The controller manager's client limits are lifted (``--kcm-qps``), as
the schedulers' are, so neither contender waits on its token bucket.

``--nodes`` (default 1,000) Nodes as in ``bench/e2e_throughput.py``, one StorageClass
(``volumeBindingMode: WaitForFirstConsumer``); for each contender, in turn: every pod, claim and volume
of the previous run deleted, then ``--pods`` (default 1,000) claims (1Gi, ReadWriteOnce) and as many
pending pods, each mounting its own claim; the contender starts and drains them. A pod counts when it is
bound, which the scheduler does only after its claim is bound to the provisioned volume (VolumeBinding
PreBind), so the figure includes the whole provisioning loop. ``rate``, ``wall`` and CPU are as in
``bench/e2e_throughput.py``; the summary adds koord-scheduler / kube-scheduler. Repeats alternate the
order.

    .venv/bin/python bench/e2e_volumes.py [--nodes 1000] [--pods 1000] [--repeat 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_throughput as e2e

from kubeapi import ApiError, ApiHttp, HttpOptions, TokenBucket, jsoncodec, load_connection
from kubeapi.http import iter_lines

DRIVER = "csi.bench.pykoord"
STORAGE_CLASS = "bench-wffc"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
VOLUME_LABEL = "pykoord-bench"
MERGE_PATCH = "application/merge-patch+json"


def claim_body(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"data-pod-{i}", "namespace": e2e.NAMESPACE},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": STORAGE_CLASS,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def pod_with_claim(i: int) -> bytes:
    pod = json.loads(e2e.pod_body(i))
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-pod-{i}"}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return json.dumps(pod).encode()


def volume_for(claim: dict[str, Any]) -> dict[str, Any] | None:
    """The volume the provisioner creates for ``claim``, or None when the claim is not (yet) its to
    provision: bound already, no node chosen, or not handed to this driver."""
    meta = claim["metadata"]
    annotations = meta.get("annotations") or {}
    node = annotations.get(SELECTED_NODE)
    if claim["spec"].get("volumeName") or not node or annotations.get(STORAGE_PROVISIONER) != DRIVER:
        return None
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "labels": {VOLUME_LABEL: "1"},
            "annotations": {"pv.kubernetes.io/provisioned-by": DRIVER},
        },
        "spec": {
            "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
            "accessModes": claim["spec"]["accessModes"],
            "storageClassName": claim["spec"]["storageClassName"],
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "csi": {"driver": DRIVER, "volumeHandle": f"vol-{meta['uid']}"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                    ]
                }
            },
        },
    }


class Provisioner:
    """Watches claims cluster-wide and creates each claim's volume once (see :func:`volume_for`)."""

    def __init__(self, http: ApiHttp) -> None:
        self.http = http
        self.created: set[str] = set()
        self.errors: list[str] = []
        self.tasks: set[asyncio.Task[None]] = set()

    async def _create(self, body: dict[str, Any]) -> None:
        try:
            await self.http.request("POST", "/api/v1/persistentvolumes", body=body)
        except ApiError as err:
            if not err.conflict:
                self.errors.append(f"{body['metadata']['name']}: {err}")
                self.created.discard(body["metadata"]["name"])

    def _offer(self, claim: dict[str, Any]) -> None:
        body = volume_for(claim)
        if body is None or body["metadata"]["name"] in self.created:
            return
        self.created.add(body["metadata"]["name"])
        task = asyncio.ensure_future(self._create(body))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self) -> None:
        path = "/api/v1/persistentvolumeclaims"
        while True:  # a watch that ends or reports an ERROR is re-listed
            listing = await self.http.request_json("GET", path)
            for claim in listing["items"]:
                self._offer(claim)
            params = {"watch": "1", "resourceVersion": listing["metadata"]["resourceVersion"], "timeoutSeconds": "3600"}
            async with self.http.stream(path, params) as content:
                async for lines in iter_lines(content):
                    events = [jsoncodec.loads(line) for line in lines]
                    for event in events:
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._offer(event["object"])
                    if any(event["type"] == "ERROR" for event in events):
                        break


async def delete_all(http: ApiHttp, path: str, params: dict[str, str] | None = None) -> None:
    """Delete a collection and wait until it is empty. The API server's StorageObjectInUseProtection
    admission puts protection finalizers on claims and volumes, and the controllers that would clear
    them do not run here, so they are cleared by hand."""
    await e2e.delete_collection(http, path, params)
    listing = await http.request_json("GET", path, params=params)
    held = [item["metadata"]["name"] for item in listing.get("items") or () if item["metadata"].get("finalizers")]
    await e2e.bounded(
        len(held),
        64,
        lambda i: http.request(
            "PATCH", f"{path}/{held[i]}", body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH
        ),
    )
    for _ in range(600):
        doc = await http.request_json("GET", path, params={"limit": "1", **(params or {})})
        if not doc.get("items"):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"{path} was not emptied")


async def prepare(http: ApiHttp, n: int) -> None:
    """Delete the previous run's pods, claims and volumes; create ``n`` claims and their pending pods."""
    await e2e.delete_pods(http)
    await delete_all(http, f"/api/v1/namespaces/{e2e.NAMESPACE}/persistentvolumeclaims")
    await delete_all(http, "/api/v1/persistentvolumes", {"labelSelector": VOLUME_LABEL})
    claims = f"/api/v1/namespaces/{e2e.NAMESPACE}/persistentvolumeclaims"
    await e2e.bounded(n, 64, lambda i: http.request("POST", claims, body=claim_body(i)))
    pods = f"/api/v1/namespaces/{e2e.NAMESPACE}/pods"
    await e2e.bounded(n, 64, lambda i: http.request("POST", pods, body=pod_with_claim(i)))


async def ensure_storage_class(http: ApiHttp) -> None:
    try:
        await http.request(
            "POST",
            "/apis/storage.k8s.io/v1/storageclasses",
            body={
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": STORAGE_CLASS},
                "provisioner": DRIVER,
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        )
    except ApiError as err:
        if not err.conflict:
            raise


async def run_bench(args: argparse.Namespace, kubeconfig: str, kube_scheduler: str, work: Path) -> list[e2e.Result]:
    http = ApiHttp(
        load_connection(kubeconfig), TokenBucket(0, 1), options=HttpOptions(pool_size=96, request_timeout=120)
    )
    provisioner = Provisioner(http)
    provisioning = asyncio.ensure_future(provisioner.run())
    try:
        await e2e.ensure_namespace(http)
        await ensure_storage_class(http)
        started = time.monotonic()
        await e2e.ensure_nodes(http, args.nodes)
        print(f"# {args.nodes} nodes ready ({time.monotonic() - started:.1f}s)", file=sys.stderr)
        results: list[e2e.Result] = []
        for repeat in range(args.repeat):
            for name in args.only if repeat % 2 == 0 else args.only[::-1]:
                result = await e2e.measure(
                    name,
                    http,
                    args.pods,
                    kubeconfig=kubeconfig,
                    work=work,
                    kube_scheduler=kube_scheduler,
                    timeout=args.timeout,
                    prepare=prepare,
                )
                print(
                    f"# {name}: {result.rate:.1f} pods/s (wall {result.wall:.1f}), "
                    f"{result.cpu_seconds_per_1000:.2f} CPU-s/1000 pods (apiserver+etcd "
                    f"{result.server_cpu_seconds_per_1000}); {len(provisioner.created)} volumes provisioned "
                    f"so far, {len(provisioner.errors)} errors",
                    file=sys.stderr,
                )
                results.append(result)
        if provisioner.errors:
            print(f"# provisioner errors (first 5): {provisioner.errors[:5]}", file=sys.stderr)
        await prepare(http, 0)
        return results
    finally:
        provisioning.cancel()
        await asyncio.gather(provisioning, return_exceptions=True)
        await http.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a contender may take (default 900)")
    parser.add_argument(
        "--only",
        default=["koord-scheduler", "kube-scheduler"],
        type=lambda s: s.split(","),
        help="contenders (default koord-scheduler,kube-scheduler)",
    )
    parser.add_argument(
        "--kcm-qps",
        type=int,
        default=e2e.LIFTED_QPS,
        help="kube-controller-manager --kube-api-qps/--kube-api-burst (0: its defaults, 20/30)",
    )
    parser.add_argument("--kube-scheduler", help="kube-scheduler binary (default: from control-plane.sh build)")
    parser.add_argument("--json", help="write raw results and the summary here")
    parser.add_argument("--work-dir", help="keep contender configs and logs here (default: a temp dir)")
    args = parser.parse_args()
    unknown = [c for c in args.only if c not in ("koord-scheduler", "kube-scheduler")]
    if unknown:
        parser.error(f"--only: unknown contenders {unknown}; choose from koord-scheduler, kube-scheduler")
    if args.nodes <= 0 or args.pods <= 0:
        parser.error("--nodes and --pods: want positive counts")
    from controlplane import Binaries, running_control_plane

    kube_scheduler = args.kube_scheduler or str(Binaries.build().kube_scheduler)
    if args.kcm_qps:
        os.environ["PYKOORD_KCM_FLAGS"] = f"--kube-api-qps={args.kcm_qps} --kube-api-burst={args.kcm_qps}"
    with tempfile.TemporaryDirectory(prefix="pykoord-e2e-volumes-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        with running_control_plane(work / "cluster") as plane:
            plane.start_controller_manager()
            results = asyncio.run(run_bench(args, str(plane.kubeconfig), kube_scheduler, work))
    summary = e2e.summarize(results)
    head = {
        "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0]},
        "shape": {"nodes": args.nodes, "pods_with_wffc_claims": args.pods, "kcm_qps": args.kcm_qps},
    }
    koord, kube = summary.get("koord-scheduler"), summary.get("kube-scheduler")
    if koord and kube:
        summary["koord_to_kube_scheduler_wall"] = round(koord["wall_pods_per_s"] / kube["wall_pods_per_s"], 2)
    print(json.dumps({**head, "summary": summary}, indent=2))
    if args.json:
        Path(args.json).write_text(
            json.dumps({**head, "summary": summary, "runs": [asdict(r) for r in results]}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
