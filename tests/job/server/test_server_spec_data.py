"""Through a real `daggers server`, a spec is data: its preview reads only the cluster's brokers and its
output only the cluster's InfluxDB, and no secret of the server's environment comes back (the server's
per-request planes serve clients: job.control.spec_check.served_spec)."""

from __future__ import annotations

import os
from pathlib import Path

import requests

from job.control import Registry
from tests.job.control.control_seed import bookings_spec
from tests.job.server.server_world import running_server, seed_tokens

SECRET = "pw-5e1a77c0d3"


def test_a_viewers_preview_and_output_stay_on_the_clusters_parts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = Registry(url)
    try:
        root, tokens = seed_tokens(registry)
        root.create(
            "a-jkt",
            bookings_spec("leaky").replace(
                "  url: ${DAGGERS_INFLUX}\n", "  url: http://127.0.0.1:9/leak/${PGPASSWORD}\n"
            ),
        )
        os.environ["PGPASSWORD"] = SECRET
        try:
            with running_server(url, tmp_path / "server.log") as base:
                vera = {"Authorization": f"Bearer {tokens['vera']}"}
                other = bookings_spec("probe").replace("${DAGGERS_BOOTSTRAP}", "127.0.0.1:19092")
                r = requests.post(
                    f"{base}/api/v1/preview",
                    json={"cluster": "a-jkt", "spec": other},
                    headers=vera,
                    timeout=120,
                )
                assert (
                    r.status_code == 422
                    and "reads only the cluster's brokers" in r.json()["error"]["message"]
                )
                r = requests.get(
                    f"{base}/api/v1/daggers/team-a/leaky/output",
                    params={"field": "bookings"},
                    headers=vera,
                    timeout=60,
                )
                assert r.status_code == 422, r.text
                assert "reads only sinks on the cluster's InfluxDB" in r.json()["error"]["message"]
                assert SECRET not in r.text
        finally:
            del os.environ["PGPASSWORD"]
        assert SECRET not in (tmp_path / "server.log").read_text()
    finally:
        registry.close()
