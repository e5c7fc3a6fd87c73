#!/usr/bin/env python3
"""Pods with one-device ResourceClaims, end to end: koord-scheduler vs kube-scheduler, same control plane.

A real kube-apiserver + etcd; ``--nodes`` (default 1,000) Nodes as in ``bench/e2e_throughput.py``, each
with a ResourceSlice of ``--devices`` (default 8) GPUs of one driver, published as a DRA driver does
(``index``, ``uuid``, ``model`` attributes; ``memory`` capacity), and a DeviceClass selecting the driver
by CEL. For each contender, in turn: the previous run's pods and claims deleted, then ``--pods`` (default
2,000) ResourceClaims asking for one device of the class and as many pending pods, each naming its claim;
the contender starts and drains them. A pod counts when it is bound, which both schedulers do only after
writing the claim's allocation and reservation (DynamicResources PreBind), so every pod costs its
scheduler a claim update, a claim status update and a binding. ``rate``, ``wall`` and CPU are as in
``bench/e2e_throughput.py``; the summary adds koord-scheduler / kube-scheduler. Repeats alternate the
order.

    .venv/bin/python bench/e2e_dra.py [--nodes 1000] [--devices 8] [--pods 2000] [--repeat 1] [--json out.json]
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
import e2e_volumes

from kubeapi import ApiError, ApiHttp, HttpOptions, TokenBucket, load_connection

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.bench.pykoord"
CLASS = "bench-gpu"
SLICE_LABEL = "pykoord-bench-dra"


def slice_body(node: int, devices: int) -> dict[str, Any]:
    name = f"bench-node-{node}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-gpus", "labels": {SLICE_LABEL: "1"}},
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{d}",
                    "attributes": {
                        "index": {"int": d},
                        "uuid": {"string": f"GPU-{node:05d}-{d}"},
                        "model": {"string": "bench-gpu"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for d in range(devices)
            ],
        },
    }


def claim_body(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{i}", "namespace": e2e.NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
    }


def pod_with_claim(i: int) -> bytes:
    pod = json.loads(e2e.pod_body(i))
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"claim-{i}"}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return json.dumps(pod).encode()


async def ensure_devices(http: ApiHttp, nodes: int, devices: int) -> None:
    try:
        await http.request(
            "POST",
            f"{RESOURCE}/deviceclasses",
            body={
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": CLASS},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            },
        )
    except ApiError as err:
        if not err.conflict:
            raise
    listing = await http.request_json("GET", f"{RESOURCE}/resourceslices", params={"labelSelector": SLICE_LABEL})
    have = {item["metadata"]["name"] for item in listing.get("items") or ()}
    missing = [i for i in range(nodes) if f"bench-node-{i}-gpus" not in have]
    await e2e.bounded(
        len(missing),
        64,
        lambda k: http.request("POST", f"{RESOURCE}/resourceslices", body=slice_body(missing[k], devices)),
    )


async def prepare(http: ApiHttp, n: int) -> None:
    """Delete the previous run's pods and claims (their finalizers cleared: no DRA driver or
    kube-controller-manager runs here); create ``n`` claims and their pending pods."""
    await e2e.delete_pods(http)
    claims = f"{RESOURCE}/namespaces/{e2e.NAMESPACE}/resourceclaims"
    await e2e_volumes.delete_all(http, claims)
    await e2e.bounded(n, 64, lambda i: http.request("POST", claims, body=claim_body(i)))
    pods = f"/api/v1/namespaces/{e2e.NAMESPACE}/pods"
    await e2e.bounded(n, 64, lambda i: http.request("POST", pods, body=pod_with_claim(i)))


async def run_bench(args: argparse.Namespace, kubeconfig: str, kube_scheduler: str, work: Path) -> list[e2e.Result]:
    http = ApiHttp(
        load_connection(kubeconfig), TokenBucket(0, 1), options=HttpOptions(pool_size=96, request_timeout=120)
    )
    try:
        await e2e.ensure_namespace(http)
        started = time.monotonic()
        await e2e.ensure_nodes(http, args.nodes)
        await ensure_devices(http, args.nodes, args.devices)
        print(
            f"# {args.nodes} nodes x {args.devices} devices ready ({time.monotonic() - started:.1f}s)", file=sys.stderr
        )
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
                    f"{result.server_cpu_seconds_per_1000})",
                    file=sys.stderr,
                )
                results.append(result)
        await prepare(http, 0)
        return results
    finally:
        await http.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=8, help="devices per node (default 8)")
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a contender may take (default 900)")
    parser.add_argument(
        "--only",
        default=["koord-scheduler", "kube-scheduler"],
        type=lambda s: s.split(","),
        help="contenders (default koord-scheduler,kube-scheduler)",
    )
    parser.add_argument("--kube-scheduler", help="kube-scheduler binary (default: from control-plane.sh build)")
    parser.add_argument("--json", help="write raw results and the summary here")
    parser.add_argument("--work-dir", help="keep contender configs and logs here (default: a temp dir)")
    args = parser.parse_args()
    unknown = [c for c in args.only if c not in ("koord-scheduler", "kube-scheduler")]
    if unknown:
        parser.error(f"--only: unknown contenders {unknown}; choose from koord-scheduler, kube-scheduler")
    if args.nodes <= 0 or args.pods <= 0 or args.devices <= 0:
        parser.error("--nodes, --devices and --pods: want positive counts")
    if args.pods > args.nodes * args.devices:
        parser.error("--pods: more pods than devices")
    from controlplane import Binaries, running_control_plane

    kube_scheduler = args.kube_scheduler or str(Binaries.build().kube_scheduler)
    with tempfile.TemporaryDirectory(prefix="pykoord-e2e-dra-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        with running_control_plane(work / "cluster") as plane:
            results = asyncio.run(run_bench(args, str(plane.kubeconfig), kube_scheduler, work))
    summary = e2e.summarize(results)
    head = {
        "machine": {"nproc": os.cpu_count(), "python": sys.version.split()[0]},
        "shape": {"nodes": args.nodes, "devices_per_node": args.devices, "pods_with_one_device_claims": args.pods},
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
