"""CoreSched: the rule, pod groups and cookie steps (cases marked ``koord:`` are transcribed from Koordinator
v1.8.0 ``runtimehooks/hooks/coresched/rule_test.go`` and ``core_sched_test.go``, with its fake prctl), and
the reconciler on a fake cgroup tree."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from koordlet_fakes import FakeCgroups
from qos_helpers import make_ctx, pod, run_until_ticked

from apis.extension import KubeQOSClass, QoSClass
from apis.slo import merge_node_slo_spec
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, builtin_registry
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.plugins.coresched.cookies import CookieBook, CookieEntry
from koordlet.qosmanager.plugins.coresched.plugin import CoreSched
from koordlet.qosmanager.plugins.coresched.policy import CoreSchedRule, Param, core_sched_rule, pod_core_sched
from koordlet.system import CgroupDriver, CgroupVersion
from koordlet.system.clock import FakeClock
from koordlet.system.coresched import CoreSchedError

G, B, BE_K = KubeQOSClass.GUARANTEED, KubeQOSClass.BURSTABLE, KubeQOSClass.BEST_EFFORT


class FakeCoreSched:
    """Koordinator's ``FakeCoreSchedExtended``: cookies per pid, thread groups, pids that fail."""

    def __init__(self, cookies: dict[int, int], tgid: dict[int, int], errors: set[int], *, next_cookie: int) -> None:
        self.cookies, self.tgid, self.errors, self.next_cookie = cookies, tgid, errors, next_cookie

    def _group(self, pid: int) -> list[int]:
        return [pid, *(p for p, t in self.tgid.items() if t == pid and p != pid)]

    def get(self, pid: int) -> int:
        if pid in self.errors:
            raise CoreSchedError(3, "no such process")
        return self.cookies.get(pid, 0)

    def create(self, pid: int) -> None:
        if pid in self.errors:
            raise CoreSchedError(3, "no such process")
        for p in self._group(pid):
            self.cookies[p] = self.next_cookie
        self.next_cookie += 1

    def clear(self, pids: Sequence[int]) -> list[int]:
        failed = [p for p in pids if p in self.errors]
        for pid in pids:
            if pid not in self.errors:
                for p in self._group(pid):
                    self.cookies[p] = 0
        return failed

    def assign(self, source: int, pids: Sequence[int]) -> list[int]:
        if source in self.errors:
            return list(pids)
        failed = [p for p in pids if p in self.errors]
        for pid in pids:
            if pid not in self.errors:
                for p in self._group(pid):
                    self.cookies[p] = self.cookies.get(source, 0)
        return failed


# -- rule and groups -----------------------------------------------------------------------------


def slo(policy: str, classes: dict[str, dict[str, Any]]) -> NodeSLOSpec:
    strategy: dict[str, Any] = {name: {"cpuQOS": cfg} for name, cfg in classes.items()}
    strategy["policies"] = {"cpuPolicy": policy}
    return merge_node_slo_spec(NodeSLOSpec.model_validate({"resourceQOSStrategy": strategy}))


ON, OFF = Param(True, True, False), Param()


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param(
            merge_node_slo_spec(None), CoreSchedRule(False, {}, {}), id="koord:keep disabled (default NodeSLO)"
        ),
        pytest.param(
            slo("groupIdentity", {c: {"enable": True} for c in ("lsrClass", "lsClass", "beClass")}),
            CoreSchedRule(False, {}, {}),
            id="koord:policy disabled",
        ),
        pytest.param(
            slo(
                "coreSched",
                {
                    "lsrClass": {"enable": False},
                    "lsClass": {"enable": True, "groupIdentity": 2, "schedIdle": 0, "coreExpeller": True},
                    "beClass": {"enable": True, "groupIdentity": -1, "schedIdle": 1, "coreExpeller": False},
                },
            ),
            CoreSchedRule(
                True,
                {QoSClass.LSE: OFF, QoSClass.LSR: OFF, QoSClass.LS: ON, QoSClass.BE: Param(True, False, True)},
                {G: ON, B: ON, BE_K: Param(True, False, True)},
            ),
            id="koord:enabled on LS and BE",
        ),
    ],
)
def test_core_sched_rule(spec: NodeSLOSpec, want: CoreSchedRule) -> None:
    got = core_sched_rule(spec)
    assert got.enable == want.enable
    if want.pod_qos:
        assert (dict(got.pod_qos), dict(got.kube_pod)) == (dict(want.pod_qos), dict(want.kube_pod))


LS_AND_BE = core_sched_rule(
    slo(
        "coreSched",
        {
            "lsClass": {"enable": True, "coreExpeller": True},
            "beClass": {"enable": True, "coreExpeller": False, "schedIdle": 1},
        },
    )
)


@pytest.mark.parametrize(
    ("labels", "kube_qos", "want"),
    [
        pytest.param(
            {"koordinator.sh/qosClass": "LS", "koordinator.sh/core-sched-group-id": "group-xxx"},
            B,
            (True, "group-xxx-expeller"),
            id="koord:LS pod in its labelled group, expeller suffix",
        ),
        pytest.param({"koordinator.sh/qosClass": "BE"}, BE_K, (True, ""), id="BE pod in the default group"),
        pytest.param({"koordinator.sh/qosClass": "LSR"}, G, (False, ""), id="LSR class off"),
        pytest.param({}, G, (True, "-expeller"), id="no label, Guaranteed takes LS while LSR is off"),
        pytest.param(
            {"koordinator.sh/qosClass": "BE", "koordinator.sh/core-sched-policy": "exclusive"},
            BE_K,
            (True, "uid-1"),
            id="exclusive: a group of its own",
        ),
        pytest.param(
            {"koordinator.sh/qosClass": "BE", "koordinator.sh/core-sched-policy": "none"},
            BE_K,
            (False, ""),
            id="policy none: off",
        ),
    ],
)
def test_pod_core_sched(labels: dict[str, str], kube_qos: KubeQOSClass, want: tuple[bool, str]) -> None:
    assert pod_core_sched(LS_AND_BE, labels, kube_qos, "uid-1") == want


# -- cookie steps --------------------------------------------------------------------------------

PIDS = [12344, 12345, 12346]
TGID = {1: 1, 1000: 1000, 1001: 1001, 1002: 1001, 12344: 12344, 12345: 12344, 12346: 12346}


def test_add_cookie_for_a_new_group() -> None:
    """koord: add cookie for LS container correctly (12346 is gone)."""
    ops = FakeCoreSched({p: 0 for p in (1, 10, *PIDS)}, TGID, {12346}, next_cookie=1000000)
    book = CookieBook(ops)
    assert book.enable("pod/c", "group-xxx-expeller", PIDS) == 1000000
    assert book.groups == {"group-xxx-expeller": CookieEntry(1000000, {12344, 12345})}


def test_assign_the_groups_cookie_from_a_sibling() -> None:
    """koord: assign cookie for LS container correctly."""
    cookies = {1: 0, 10: 0, 1000: 1000000, 1001: 1000000, 1002: 1000000, 12344: 0, 12345: 0, 12346: 0}
    ops = FakeCoreSched(cookies, TGID, {12346}, next_cookie=2000000)
    book = CookieBook(ops, groups={"group-xxx-expeller": CookieEntry(1000000, {1000, 1001, 1002})})
    assert book.enable("pod/c", "group-xxx-expeller", PIDS) == 1000000
    assert book.groups["group-xxx-expeller"] == CookieEntry(1000000, {1000, 1001, 1002, 12344, 12345})
    assert ops.cookies[12344] == ops.cookies[12345] == 1000000


def test_no_sibling_holds_the_cookie_falls_back_to_a_new_one() -> None:
    """koord: failed to assign cookie for LS container but fallback to add correctly."""
    ops = FakeCoreSched(
        {1: 0, 10: 0, 12344: 0, 12345: 0, 12346: 0}, TGID, {1000, 1001, 1002, 12346}, next_cookie=2000000
    )
    book = CookieBook(ops, groups={"group-xxx-expeller": CookieEntry(1000000, {1000, 1001, 1002})})
    assert book.enable("pod/c", "group-xxx-expeller", PIDS) == 2000000
    assert book.groups == {"group-xxx-expeller": CookieEntry(2000000, {12344, 12345})}


def test_all_pids_gone_does_nothing() -> None:
    """koord: failed to add cookie for BE container when PIDs no longer exist."""
    ops = FakeCoreSched({}, TGID, set(PIDS), next_cookie=5)
    book = CookieBook(ops)
    assert book.enable("pod/c", "", PIDS) is None
    assert book.groups == {}


def test_clear_cookies_of_a_container_that_was_enabled() -> None:
    """koord: clear cookie for LS container correctly; the group goes when its last pid leaves."""
    ops = FakeCoreSched({12344: 7, 12345: 7, 12346: 7}, TGID, set(), next_cookie=8)
    book = CookieBook(ops, groups={"g": CookieEntry(7, set(PIDS))}, container_group={"pod/c": "g"})
    book.disable("pod/c", PIDS)
    assert [ops.cookies[p] for p in PIDS] == [0, 0, 0]
    assert book.groups == {} and book.container_group == {}


def test_clear_skips_a_container_never_enabled() -> None:
    """koord: failed to clear cookie for LS container when not enabled before."""
    ops = FakeCoreSched({12344: 9}, TGID, set(), next_cookie=10)
    book = CookieBook(ops)
    book.disable("pod/c", [12344])
    assert ops.cookies[12344] == 9


def test_load_adopts_existing_cookies_so_a_restart_keeps_groups() -> None:
    """koord: sync pods correctly for multiple containers with inconsistent cookies (first cookie kept)."""
    ops = FakeCoreSched({1: 5, 2: 5, 3: 6, 4: 0}, {}, set(), next_cookie=100)
    book = CookieBook(ops)
    book.load([("p/a", "g", [1, 2]), ("p/b", "g", [3]), ("p/c", "h", [4])])
    assert book.groups == {"g": CookieEntry(5, {1, 2})}
    assert book.container_group == {"p/a": "g"}
    assert book.enable("p/b", "g", [3]) == 5 and ops.cookies[3] == 5  # the next reconcile fixes the odd one


# -- the reconciler on a fake tree ---------------------------------------------------------------

UID_LS = "66666666-7777-4888-9999-aaaaaaaaaaaa"
UID_BE = "11111111-2222-4333-8444-555555555555"
CORE_SCHED_ON = {
    "spec": {
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": "coreSched"},
            "lsClass": {"cpuQOS": {"enable": True}},
            "beClass": {"cpuQOS": {"enable": True, "schedIdle": 1}},
        }
    }
}


def core_sched_tree(tmp_path: Path) -> tuple[PluginContext, FakeCgroups]:
    fake = FakeCgroups(tmp_path / "cgroup", CgroupVersion.V1, CgroupDriver.CGROUPFS)
    layout = fake.fs().layout
    for q in KubeQOSClass:
        fake.make_dir(layout.qos_dir(q))
        (fake.root / "cpu" / layout.qos_dir(q) / "cpu.idle").write_text("0\n")
    for uid, qos, procs in ((UID_LS, B, "101\n102\n"), (UID_BE, BE_K, "201\n")):
        rel = f"{layout.pod_dir(qos, uid)}/c1"
        fake.make_dir(rel)
        (fake.root / "cpu" / rel / "cgroup.procs").write_text(procs)
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "sched_group_identity_enabled").write_text("1\n")
    ctx = make_ctx(fake.fs(), clock=FakeClock(), args={"proc_root": proc, "sysfs_root": tmp_path / "sys"})
    ctx.states_informer.replace_pods(
        [
            pod("ls", UID_LS).qos("Burstable", "LS").container("c1", "containerd://c1").build(),
            pod("be", UID_BE).be().container("c1", "containerd://c1").build(),
        ]
    )
    ctx.states_informer.set_node_slo(CORE_SCHED_ON)
    return ctx, fake


def test_reconciler_sets_cookies_per_group_and_cpu_idle(tmp_path: Path) -> None:
    ctx, fake = core_sched_tree(tmp_path)
    ops = FakeCoreSched({}, {}, set(), next_cookie=50)
    plugin = CoreSched(ops)
    plugin.setup(ctx)
    plugin.tick()
    # LS (expeller by default) and BE are two groups: two cookies
    assert (ops.cookies[101], ops.cookies[102], ops.cookies[201]) == (50, 50, 51)
    layout = fake.fs().layout
    idle = {q: (fake.root / "cpu" / layout.qos_dir(q) / "cpu.idle").read_text().strip() for q in KubeQOSClass}
    assert idle == {G: "0", B: "0", BE_K: "1"}
    assert (tmp_path / "proc/sys/kernel/sched_group_identity_enabled").read_text().strip() == "0"
    plugin.tick()  # steady: no new cookie
    assert ops.next_cookie == 52
    ctx.states_informer.set_node_slo(None)  # core scheduling off: cookies cleared, idle back to 0
    plugin.tick()
    assert (ops.cookies[101], ops.cookies[201]) == (0, 0)
    assert (fake.root / "cpu" / layout.qos_dir(BE_K) / "cpu.idle").read_text().strip() == "0"


def test_without_core_scheduling_only_cpu_idle_is_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from koordlet.qosmanager.plugins.coresched import plugin as module

    monkeypatch.setattr(module, "core_sched_missing", lambda: "prctl(PR_SCHED_CORE) fails with EINVAL")
    ctx, fake = core_sched_tree(tmp_path)
    plugin = CoreSched()
    plugin.setup(ctx)
    plugin.tick()
    assert plugin.book is None
    assert (fake.root / "cpu" / fake.fs().layout.qos_dir(BE_K) / "cpu.idle").read_text().strip() == "1"


@pytest.mark.parametrize(("gate_on", "want"), [(True, "1"), (False, "0")])
async def test_core_sched_acts_only_with_its_gate(tmp_path: Path, gate_on: bool, want: str) -> None:
    ctx, fake = core_sched_tree(tmp_path)
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    gates = FeatureGates.resolve(
        {**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, {"AllBeta": False, "CoreSched": gate_on}
    )
    await run_until_ticked(manager, gates, ctx)
    assert (fake.root / "cpu" / fake.fs().layout.qos_dir(BE_K) / "cpu.idle").read_text().strip() == want
