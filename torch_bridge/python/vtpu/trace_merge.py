"""Several processes' vtpu.trace() files as one timeline: each rank of a torch.distributed job
writes its own trace (its chips, and their interconnect rows with every collective), all on the
simulated clock that collectives keep in step; merged, a DDP or FSDP step shows each rank's
kernels and the collectives they wait for side by side."""
from __future__ import annotations

import json
import pathlib


def merge_traces(paths: list[str], out: str, names: list[str] | None = None) -> None:
    """Writes to `out` the traces at `paths`, each file's processes renamed "<name> <process>"
    (names default to rank0, rank1, ... in the order given) and renumbered apart."""
    names = names or [f"rank{i}" for i in range(len(paths))]
    if len(names) != len(paths):
        raise ValueError(f"merge_traces: {len(paths)} traces but {len(names)} names")
    events, other, next_pid = [], {}, 1
    for path, name in zip(paths, names):
        doc = json.loads(pathlib.Path(path).read_text())
        pids = {}
        for event in doc["traceEvents"]:
            if "pid" in event:
                event["pid"] = pids.setdefault(event["pid"], next_pid + len(pids))
            if event.get("ph") == "M" and event.get("name") == "process_name":
                event["args"]["name"] = f"{name} {event['args']['name']}"
            events.append(event)
        next_pid += len(pids)
        other = other or doc.get("otherData", {})
    merged = {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {**other, "merged_from": names}}
    pathlib.Path(out).write_text(json.dumps(merged))
