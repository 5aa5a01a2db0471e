"""DESIGN rule: the engine imports no client library and nothing from systems/ or steps/."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = (
    "kazoo",
    "confluent_kafka",
    "paramiko",
    "pyspark",
    "requests",
    "kafkaops.systems",
    "kafkaops.steps",
)


def test_engine_imports_no_client_library() -> None:
    code = (
        "import json, sys, kafkaops.engine as e\n"
        "[getattr(e, n) for n in e.__all__]\n"
        "import kafkaops.engine.runner, kafkaops.engine.lock, kafkaops.engine.audit\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    bad = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert bad == []
