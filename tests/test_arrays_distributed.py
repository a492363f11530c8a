"""Beyond one machine: two Python processes on 127.0.0.1 joined by
``jax.distributed.initialize`` (gloo collectives, 2 CPU devices each) form one 4-device
mesh. Each builds its half of a global array, a jitted sum runs across both, and each
process's ``shard_layout`` shows its own shards and marks the other's as held elsewhere;
``jaxlab.devices()`` lists every process's devices."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

_WORKER = textwrap.dedent(
    """
    import json, sys
    pid, port = int(sys.argv[1]), sys.argv[2]
    import jax
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_num_cpu_devices", 2)
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid,
        initialization_timeout=60,
    )
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import jaxlab
    from jaxlab.arrays import show_record
    from jaxlab.arrays.shards import shard_layout

    mesh = Mesh(np.array(jax.devices()), ("x",))
    rows = np.arange(8.0, dtype=np.float32).reshape(8, 1)
    local = rows[4 * pid : 4 * pid + 4]  # this process's half
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local, (8, 1))
    total = float(jax.jit(lambda a: a.sum())(x))
    layout = shard_layout(x)
    record = show_record(x, "x")
    report = jaxlab.devices()
    print(json.dumps({
        "pid": pid,
        "total": total,
        "devices": [[d.id, d.process_index] for d in report.devices],
        "local": [d.id for d in jax.local_devices()],
        "process_count": report.process_count,
        "device_text": report.text(),
        "addressable": [[s.device.id, [[i.start, i.stop] for i in s.index]]
                        for s in x.addressable_shards],
        "shards": [[s.device, s.process, [list(b) for b in s.index], s.here]
                   for s in layout.shards],
        "words": layout.words(),
        "html": record.html(),
        "note": record.root.array.note,
    }))
    jax.distributed.shutdown()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gloo_unavailable(err: str) -> str:
    """The line of a worker's error that says this jaxlib has no gloo, or ''."""
    for line in reversed(err.splitlines()):
        low = line.lower()
        if "gloo" in low and any(w in low for w in ("not", "unavailable", "unknown", "invalid")):
            return line.strip()
    return ""


@pytest.mark.slow
def test_two_processes_form_one_mesh_and_each_sees_its_own_shards(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    env["JAX_PLATFORMS"] = "cpu"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(i), str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            if p.returncode != 0 and _gloo_unavailable(err):
                pytest.skip(f"gloo CPU collectives unavailable here: {_gloo_unavailable(err)}")
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:  # one that hangs (its peer died) is killed, never left behind
            if p.poll() is None:
                p.kill()
                p.communicate()
    every = sorted({tuple(d) for r in outs for d in r["devices"]})
    for r in outs:
        pid = r["pid"]
        assert r["total"] == sum(range(8))  # the jitted sum ran across both processes
        assert r["process_count"] == 2
        # jaxlab.devices() lists all four devices, two per process; two are local
        assert sorted(tuple(d) for d in r["devices"]) == every and len(every) == 4
        assert sorted(p for _, p in every) == [0, 0, 1, 1]
        mine = {d for d, p in every if p == pid}
        assert set(r["local"]) == mine
        assert r["device_text"].count("\n") >= 5  # a row per device
        # every device's block is listed; here exactly for this process's devices
        shards = {d: (p, idx, here) for d, p, idx, here in r["shards"]}
        assert set(shards) == {d for d, _ in every}
        assert {d for d, (_, _, here) in shards.items() if here} == mine
        assert all(shards[d][0] == p for d, p in every)
        for device, index in r["addressable"]:
            start, stop = index[0]
            assert shards[device][1][0] == [start, stop]
        # the other process's blocks are its second half of the rows
        theirs = sorted(shards[d][1][0] for d in shards if d not in mine)
        assert theirs == ([[4, 6], [6, 8]] if pid == 0 else [[0, 2], [2, 4]])
        assert "2 shard(s) held by other processes" in r["words"]
        assert r["html"].count('data-here="0"') == 2 and r["html"].count('data-here="1"') == 2
        assert "elsewhere" in r["html"]
        assert "other processes" in r["note"]
