"""The per-task kernel of the Spark data scan: one pass over Arrow batches, numpy only.

Why a kernel and not Spark SQL: the order checks (offset gaps, timestamp going backwards and by how
much) need each record's predecessor *in offset order*. A Spark window (``lag() over (partition by
topic, partition order by offset)``) shuffles and sorts every record; but the reader
(``jvm/KafkaRangeSource.java``) already hands each task whole partition ranges, each in offset order
(a task's partitions interleave; the state is kept per ``key``). So each task streams its
Arrow batches through this kernel (``mapInArrow``), keeps O(1) state per partition plus a per-minute
histogram, and emits one small JSON summary per partition segment. The driver merges segments
(:func:`kafkaops.health.data.merge_segments`), checking the seams between them.

This module imports nothing from kafkaops and nothing heavy at import time: it is shipped to the
executors by value (cloudpickle), so a YARN or standalone cluster needs only Python with numpy and
pyarrow (what PySpark's Arrow support needs anyway), not kafkaops itself.

Input columns (one row per record): ``key`` (int64, :func:`make_key` of topic id and partition),
``offset`` (int64), ``ts`` (int64 ms); for event topics also ``ts_type`` (int32: 0 CreateTime,
1 LogAppendTime), ``json_state`` (int8, see the ``JSON_*`` constants) and ``dt_ms`` (int64, nullable:
``meta.dt`` in ms). Other topics send only the first three: every column crosses the JVM/Python
boundary for every record, and that crossing is most of the scan's cost after the Kafka read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

#: ``json_state`` values, computed in the JVM (``from_json``) before the kernel sees the batch.
JSON_NOT_CHECKED = 0  # not an event topic
JSON_OK = 1  # a JSON object with a parseable meta.dt
JSON_NO_DT = 2  # a JSON object without meta.dt (or one that is not a timestamp)
JSON_INVALID = 3  # not JSON, or JSON that is not an object

#: Output schema of the kernel (one JSON document per segment).
OUTPUT_SCHEMA = "segment string"


def make_key(tid: int, partition: int) -> int:
    """Pack a topic id and a partition into the kernel's int64 ``key`` column."""
    return (tid << 32) | partition


def split_key(key: int) -> tuple[int, int]:
    """Inverse of :func:`make_key`."""
    return key >> 32, key & 0xFFFFFFFF


def _new_state(key: tuple[int, int]) -> dict[str, Any]:
    return {
        "tid": key[0], "partition": key[1],
        "first_offset": None, "last_offset": None, "first_ts": None, "last_ts": None,
        "count": 0, "context_count": 0, "holes": 0, "missing": 0,
        "back_steps": 0, "back_steps_over": 0, "worst_back_ms": 0, "worst_back_offset": None,
        "min_ts": None, "max_ts": None,
        "invalid_json": 0, "missing_dt": 0, "first_invalid_offset": None,
        "drift_max_ms": 0, "drift_over": 0, "drift_worst_offset": None, "future_ts": 0,
        "log_append_time": 0, "minutes": {},
    }


def make_kernel(check_from: Mapping[int, int], *, back_tolerance_ms: int, drift_tolerance_ms: int,
                future_limit_ms: int) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """Build the ``mapInArrow`` function.

    Args:
        check_from: ``{make_key(tid, partition): offset}``: records below it are pre-run context and only
            feed the produce-rate histogram; from it on every check applies.
        back_tolerance_ms: A backwards timestamp step larger than this counts as "over tolerance".
        drift_tolerance_ms: ``|timestamp - meta.dt|`` above this counts as drift.
        future_limit_ms: Timestamps above this (scan time + tolerance) are in the future.

    Returns:
        ``f(iterator of pyarrow.RecordBatch) -> iterator of pyarrow.RecordBatch``.
    """

    def kernel(batches: Iterable[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        states: dict[int, dict[str, Any]] = {}
        for batch in batches:
            if batch.num_rows == 0:
                continue
            cols = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
            keys = cols["key"].to_numpy(zero_copy_only=False)
            # Usually one key per batch (a task reads one partition's range); handle several anyway.
            if keys[0] == keys[-1] and (keys == keys[0]).all():
                groups = [(int(keys[0]), None)]
            else:
                groups = [(int(k), keys == k) for k in np.unique(keys)]
            for key, mask in groups:
                st = states.get(key)
                if st is None:
                    st = states[key] = _new_state(split_key(key))
                g: dict[str, Any] = {name: (cols[name].to_numpy(zero_copy_only=False) if name in cols else None)
                     for name in ("offset", "ts", "ts_type", "json_state")}
                dt_col = cols.get("dt_ms")
                g["dt_ms"] = (dt_col.to_numpy(zero_copy_only=False).astype("float64")
                              if dt_col is not None and dt_col.null_count < len(dt_col) else None)
                if mask is not None:
                    g = {k: (v[mask] if v is not None else None) for k, v in g.items()}
                minutes = st["minutes"]
                mins, counts = np.unique(g["ts"] // 60000, return_counts=True)
                for m, c in zip(mins.tolist(), counts.tolist(), strict=True):
                    minutes[m] = minutes.get(m, 0) + c
                start = check_from.get(key, 0)
                if g["offset"][0] < start:
                    keep = g["offset"] >= start
                    st["context_count"] += int((~keep).sum())
                    g = {k: (v[keep] if v is not None else None) for k, v in g.items()}
                if len(g["offset"]) == 0:
                    continue
                _update(st, g, np, back_tolerance_ms, drift_tolerance_ms, future_limit_ms)
        out = [json.dumps(st) for st in states.values()]
        yield pa.RecordBatch.from_pydict({"segment": out}, schema=pa.schema([("segment", pa.string())]))

    return kernel


def _update(st: dict[str, Any], g: Mapping[str, Any], np: Any, back_tol: int, drift_tol: int,
            future_limit: int) -> None:
    """Fold one batch (restricted to one key and to checked offsets) into ``st``."""
    offsets, ts = g["offset"], g["ts"]
    n = len(offsets)
    if st["first_offset"] is None:
        st["first_offset"], st["first_ts"] = int(offsets[0]), int(ts[0])
        offsets_ext, ts_ext = offsets, ts
    else:
        offsets_ext = np.concatenate(([st["last_offset"]], offsets))
        ts_ext = np.concatenate(([st["last_ts"]], ts))
    if len(offsets_ext) > 1:
        d_off = np.diff(offsets_ext)
        holes = d_off > 1
        st["holes"] += int(holes.sum())
        st["missing"] += int((d_off[holes] - 1).sum())
        d_ts = np.diff(ts_ext)
        nb = int((d_ts < 0).sum())
        if nb:
            st["back_steps"] += nb
            st["back_steps_over"] += int((d_ts < -back_tol).sum())
            i = int(np.argmin(d_ts))
            worst = int(-d_ts[i])
            if worst > st["worst_back_ms"]:
                st["worst_back_ms"] = worst
                st["worst_back_offset"] = int(offsets_ext[i + 1])
    st["last_offset"], st["last_ts"] = int(offsets[-1]), int(ts[-1])
    st["count"] += n
    lo, hi = int(ts.min()), int(ts.max())
    st["min_ts"] = lo if st["min_ts"] is None else min(st["min_ts"], lo)
    st["max_ts"] = hi if st["max_ts"] is None else max(st["max_ts"], hi)
    st["future_ts"] += int((ts > future_limit).sum())
    if g["ts_type"] is not None:
        st["log_append_time"] += int((g["ts_type"] == 1).sum())
    js = g["json_state"]
    if js is None:  # not an event topic: no JSON, meta.dt or drift checks
        return
    invalid = js == JSON_INVALID
    n_invalid = int(invalid.sum())
    if n_invalid and st["first_invalid_offset"] is None:
        st["first_invalid_offset"] = int(offsets[int(np.argmax(invalid))])
    st["invalid_json"] += n_invalid
    st["missing_dt"] += int((js == JSON_NO_DT).sum())
    dt = g["dt_ms"]
    if dt is not None:
        ok = ~np.isnan(dt)
        if ok.any():
            drift = np.abs(ts[ok].astype("float64") - dt[ok])
            j = int(np.argmax(drift))
            if drift[j] > st["drift_max_ms"]:
                st["drift_max_ms"] = int(drift[j])
                st["drift_worst_offset"] = int(offsets[ok][j])
            st["drift_over"] += int((drift > drift_tol).sum())
