"""bookied's autorecovery HTTP endpoints and /metrics figures, with a real ZooKeeper and a real
bookied running its autorecovery daemon (httpServerEnabled=true, autoRecoveryDaemonEnabled=true)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from tests.support.ports import free_port
from tests.support.waiting import wait_for

AR = "/api/v1/autorecovery"


def http(port: int, path: str, method: str = "GET", body: dict | None = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(port: int) -> dict[str, float]:
    status, text = http(port, "/metrics")
    assert status == 200
    return {
        line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line.startswith("autorecovery_")
    }


def test_autorecovery_over_http_and_metrics(bookie_cluster, zkstore):
    port = free_port()
    [bookie] = bookie_cluster(
        1,
        httpServerEnabled="true",
        httpServerPort=port,
        httpServerHost="127.0.0.1",
        autoRecoveryDaemonEnabled="true",
        auditorPeriodicBookieCheckInterval=0,
        auditorPeriodicCheckInterval=0,
    )

    answer = wait_for(
        what="an auditor",
        predicate=lambda: (lambda r: r if r[0] == 200 else None)(http(port, f"{AR}/who_is_auditor")),
        timeout=60,
    )
    assert answer == (200, f"Auditor: {bookie.bookie_id}")

    assert http(port, f"{AR}/lost_bookie_recovery_delay", "PUT", {"delay_seconds": 0}) == (
        200,
        "Success set lostBookieRecoveryDelay to 0",
    )
    assert zkstore.underreplication.lost_bookie_recovery_delay() == 0
    assert http(port, f"{AR}/lost_bookie_recovery_delay") == (200, "lostBookieRecoveryDelay value: 0")
    status, text = http(port, f"{AR}/lost_bookie_recovery_delay", "PUT", {"delay_seconds": "soon"})
    assert status == 400 and "delay_seconds" in json.loads(text)["error"]

    # held back: a marked ledger stays marked, and an audit is refused with the reason
    assert http(port, f"{AR}/status?enabled=false", "PUT") == (200, '{\n  "enabled" : false\n}')
    assert zkstore.underreplication.is_enabled() is False
    zkstore.underreplication.mark(4242, ["10.9.9.9:3181"])
    status, text = http(port, f"{AR}/list_under_replicated_ledger?printmissingreplica")
    assert (status, json.loads(text)) == (200, {"4242": ["10.9.9.9:3181"]})
    status, text = http(port, f"{AR}/trigger_audit", "PUT")
    assert status == 409 and "disabled" in json.loads(text)["error"]

    # the gauges are set at different moments (the audit's count, the election's flag): wait for both
    figures = wait_for(
        what="the under-replicated and auditor gauges",
        predicate=lambda: (
            lambda s: (
                s
                if s.get("autorecovery_num_under_replicated_ledgers") == 1 and s.get("autorecovery_is_auditor") == 1
                else None
            )
        )(samples(port)),
        timeout=60,
    )
    assert figures["autorecovery_is_auditor"] == 1
    assert figures["autorecovery_elections_won_total"] == 1

    # enabled: the worker drops the mark of a ledger that does not exist; an audit runs on demand
    assert http(port, f"{AR}/status?enabled=true", "PUT") == (200, '{\n  "enabled" : true\n}')
    wait_for(what="the mark to go", predicate=lambda: zkstore.underreplication.count() == 0, timeout=60)
    assert http(port, f"{AR}/list_under_replicated_ledger")[0] == 404
    audits = samples(port)["autorecovery_audits_total"]
    assert http(port, f"{AR}/trigger_audit", "PUT") == (200, "Success trigger audit.")
    after = wait_for(
        what="the triggered audit",
        predicate=lambda: (
            lambda s: (
                s
                if s["autorecovery_audits_total"] > audits and s.get("autorecovery_num_under_replicated_ledgers") == 0
                else None
            )
        )(samples(port)),
        timeout=60,
    )
    assert after["autorecovery_rereplicate_failures_total"] == 0

    # decommission: refused while the bookie runs
    status, text = http(port, f"{AR}/decommission", "PUT", {"bookie_src": bookie.bookie_id})
    assert status == 409 and "registered" in json.loads(text)["error"]
