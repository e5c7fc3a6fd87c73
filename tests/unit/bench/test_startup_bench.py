"""bench/startup.py: the phase times read from koord-scheduler's log and the summary's ratios."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.bench.conftest import load_bench


@pytest.fixture(scope="module")
def startup(e2e_throughput: ModuleType) -> ModuleType:
    return load_bench("startup")  # it imports e2e_throughput by bare name, loaded by the fixture


def test_log_offset_reads_the_first_matching_line(startup: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "koord.log"
    log.write_text(
        "Traceback-free noise without a time\n"
        "2026-11-26 12:00:01,250 INFO koord-scheduler: koord-scheduler: profiles default-scheduler, ...\n"
        "2026-11-26 12:00:03,500 INFO koord_scheduler.scheduler.kube_source: synced from https://x: 5 nodes\n"
        "2026-11-26 12:00:09,000 INFO koord_scheduler.scheduler.kube_source: synced from https://x: again\n"
    )
    started = datetime(2026, 11, 26, 12, 0, 0).timestamp()
    assert startup.log_offset(log, "koord-scheduler: profiles", started) == 1.25
    assert startup.log_offset(log, "synced from", started) == 3.5
    assert startup.log_offset(log, "never logged", started) is None


def test_summary_takes_medians_and_the_ratio_to_kube_scheduler(startup: ModuleType) -> None:
    runs = {
        "first_bind": [
            {
                "contender": "koord-scheduler",
                "seconds_to_first_bind": 2.0,
                "cpu_seconds_at_first_bind": 1.0,
                "seconds_to_profiles_built": 0.5,
                "seconds_to_synced": 1.5,
            },
            {
                "contender": "koord-scheduler",
                "seconds_to_first_bind": 4.0,
                "cpu_seconds_at_first_bind": 3.0,
                "seconds_to_profiles_built": 0.7,
                "seconds_to_synced": 3.5,
            },
            {
                "contender": "kube-scheduler",
                "seconds_to_first_bind": 1.5,
                "cpu_seconds_at_first_bind": 0.5,
                "seconds_to_profiles_built": None,
                "seconds_to_synced": None,
            },
        ],
        "takeover": [{"lease_duration": 15.0, "seconds_kill_to_bind": 15.4, "target": 16.0}],
    }
    want = {
        "koord-scheduler": {
            "seconds_to_first_bind": 3.0,
            "cpu_seconds_at_first_bind": 2.0,
            "seconds_to_profiles_built": 0.6,
            "seconds_to_synced": 2.5,
        },
        "kube-scheduler": {"seconds_to_first_bind": 1.5, "cpu_seconds_at_first_bind": 0.5},
        "koord_to_kube_scheduler_first_bind": 2.0,
        "takeover_seconds": 15.4,
        "takeover_target_seconds": 16.0,
    }
    assert startup.summarize(runs) == want


def test_summary_compares_protobuf_with_json_and_counts_the_api_server(startup: ModuleType) -> None:
    def run(contender: str, seconds: float, cpu: float, apiserver: float) -> dict[str, object]:
        return {
            "contender": contender,
            "seconds_to_first_bind": seconds,
            "cpu_seconds_at_first_bind": cpu,
            "apiserver_cpu_seconds": apiserver,
            "seconds_to_profiles_built": None,
            "seconds_to_synced": None,
        }

    runs = {
        "first_bind": [run("koord-scheduler", 6.0, 2.0, 1.5), run("koord-scheduler-json", 8.0, 2.5, 3.0)],
        "takeover": [],
    }

    summary = startup.summarize(runs)

    assert summary["koord-scheduler"]["apiserver_cpu_seconds"] == 1.5
    assert summary["protobuf_to_json"] == {
        "seconds_to_first_bind": 0.75,
        "cpu_seconds_at_first_bind": 0.8,
        "apiserver_cpu_seconds": 0.5,
    }
