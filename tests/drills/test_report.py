"""The drill's report from its journal's facts (pure): times, the bound, blocks lost."""

from __future__ import annotations

import pytest

from ops_tools.drills import report as rep
from ops_tools.errors import OpsError
from ops_tools.monitoring.alerts import parse_duration_s

SCENARIO = {"name": "authority-down"}


def facts(**over):
    base = {
        rep.F_FOR: 20.0, rep.F_SCRAPE: 2.0, rep.F_SLOT: 1.0,
        rep.F_INJECTED: 1000.0, rep.F_DETECTED: 1039.5, rep.F_REMOVED: 1060.0,
        rep.F_RESOLVED: 1062.0, rep.F_RECOVERED: 1065.0,
        rep.F_BEFORE: [100, "0xa", 98],
        # authority-0 and rpc-0 saw authority-0's blocks only (every other slot)
        rep.F_AT_REMOVAL: {"authority-0": [130, "0xb", 99], "rpc-0": [130, "0xb", 99]},
        rep.F_KEPT: {"authority-0": 0, "rpc-0": 0},
        rep.F_AFTER: [136, "0xc", 134],
    }
    return {**base, **over}


def test_times_and_the_bound():
    r = rep.build(SCENARIO, "completed", facts(), "rpc-0")
    assert r.detect_s == 39.5 and r.detect_bound_s == 42.0 and r.detected_within_bound
    assert r.fault_s == 60.0 and r.resolve_s == 2.0 and r.recover_s == 5.0
    late = rep.build(SCENARIO, "completed", facts(**{rep.F_DETECTED: 1043.0}), "rpc-0")
    assert late.detected_within_bound is False


def test_blocks_lost_are_the_slots_without_a_block_on_the_kept_chain():
    b = rep.build(SCENARIO, "completed", facts(), "rpc-0").blocks
    assert b is not None
    assert (b.slots, b.produced, b.lost, b.orphaned) == (60, 30, 30, 0)
    assert b.unfinalized_at_removal == 31
    assert (b.finalized_before, b.finalized_after) == (98, 134)


def test_a_partitions_losing_side_counts_as_orphaned():
    f = facts(**{rep.F_AT_REMOVAL: {"authority-0": [130, "0xb", 99],
                                    "authority-1": [129, "0xf", 99],
                                    "rpc-0": [130, "0xb", 99]},
                 rep.F_KEPT: {"authority-0": 0, "authority-1": 29, "rpc-0": 0}})
    b = rep.build(SCENARIO, "completed", f, "rpc-0").blocks
    assert b is not None and (b.produced, b.lost, b.orphaned) == (30, 30, 29)


def test_nodes_on_the_same_dropped_fork_count_it_once():
    # authority-1's fork won the tie; authority-0 and rpc-0 followed the other one.
    f = facts(**{rep.F_AT_REMOVAL: {"authority-0": [123, "0xb", 103],
                                    "authority-1": [123, "0xf", 103],
                                    "rpc-0": [123, "0xb", 103]},
                 rep.F_BEFORE: [103, "0xa", 103],
                 rep.F_KEPT: {"authority-0": 20, "authority-1": 0, "rpc-0": 20}})
    b = rep.build(SCENARIO, "completed", f, "rpc-0").blocks
    assert b is not None and (b.produced, b.orphaned) == (20, 20)


def test_a_resumed_drill_without_its_times_reports_none_rather_than_guessing():
    f = facts()
    for key in (rep.F_DETECTED, rep.F_AT_REMOVAL):
        f.pop(key)
    r = rep.build(SCENARIO, "restored", f, "rpc-0")
    assert r.detect_s is None and r.detected_within_bound is None and r.blocks is None
    assert r.to_json()["status"] == "restored"


@pytest.mark.parametrize(("text", "seconds"), [("2s", 2), ("20s", 20), ("1m30s", 90),
                                                ("500ms", 0.5), ("1h", 3600)])
def test_prometheus_durations(text, seconds):
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "2", "s", "2x", "2s junk"])
def test_bad_durations_are_refused(text):
    with pytest.raises(OpsError, match="not a Prometheus duration"):
        parse_duration_s(text)
