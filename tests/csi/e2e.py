"""The container orchestrator's side of tests/test-csi.sh: each phase
is one command, run with Debian's /usr/bin/python3:

    e2e.py PHASE BACKEND

BACKEND is a backend of the drivers' config ("files" or "cos").  The
drivers' sockets and the work directory come from the environment
(CSI_A, CSI_B: unix:///... endpoints; CSI_TMP: a directory for the
staging and target paths and the test's records).  Secrets for cos come
from S3_ACCESS_KEY and S3_SECRET_KEY and are never printed.

Phases:
  create   CreateVolume twice (the same volume); an incompatible size
           is ALREADY_EXISTS
  stage    NodeStage twice and NodePublish on node a; write files with
           fsync; their digests go to CSI_TMP/BACKEND.files
  verify   NodePublish (again) on node N (CSI_NODE=a|b) and compare the
           files with the recorded digests
  unstage  NodeUnpublish and NodeUnstage on node N, each twice
  unstage-refused
           NodeUnpublish on node a, then NodeUnstage on a fails, twice,
           the second time with FAILED_PRECONDITION (a's cache holds
           blocks the backend lacks), and b may not stage the volume
  delete   DeleteVolume twice
  bad      bad input: the right codes, nothing changed
  compare  the files under CSI_ROOT against the recorded digests
"""
import hashlib
import json
import os
import sys

from csiclient import Client, block_cap, grpc, mount_cap

TMP = os.environ["CSI_TMP"]
NAME = "pvc-0123456789abcdef"
SIZE = 64 << 20
FILES = {"a.txt": 5000, "dir/b.bin": 200000, "c.bin": 1 << 20}


def fail(msg):
    sys.exit("e2e: FAIL: " + msg)


def client(node):
    return Client(os.environ["CSI_" + node.upper()])


def secrets(backend):
    if backend != "cos":
        return {}
    return {"access_key": os.environ["S3_ACCESS_KEY"],
            "secret_key": os.environ["S3_SECRET_KEY"]}


def vol_id(backend):
    return backend + ":" + NAME


def paths(node):
    stage = os.path.join(TMP, node, "staging", NAME)
    target = os.path.join(TMP, node, "pods", NAME, "mount")
    return stage, target


def expect(code, got, what):
    if got != code:
        fail("%s: expected %s, got %s" % (what, code, got))


def create(backend):
    c = client("a")
    cap = [mount_cap()]
    rng = c.pb.CapacityRange(required_bytes=SIZE)
    params = {"backend": backend, "mode": "hhc",
              "csi.storage.k8s.io/pvc/name": "data"}
    r1 = c.call("controller", "CreateVolume", name=NAME, capacity_range=rng,
                volume_capabilities=cap, parameters=params,
                secrets=secrets(backend))
    r2 = c.call("controller", "CreateVolume", name=NAME, capacity_range=rng,
                volume_capabilities=cap, parameters=params,
                secrets=secrets(backend))
    if r1.volume.volume_id != vol_id(backend) or r1 != r2:
        fail("CreateVolume twice: %s / %s" % (r1, r2))
    if r1.volume.capacity_bytes < SIZE:
        fail("capacity %d < %d" % (r1.volume.capacity_bytes, SIZE))
    big = c.pb.CapacityRange(required_bytes=2 * SIZE)
    expect("ALREADY_EXISTS",
           c.code("controller", "CreateVolume", name=NAME,
                  capacity_range=big, volume_capabilities=cap,
                  parameters=params, secrets=secrets(backend)),
           "CreateVolume with another size")
    with open(os.path.join(TMP, backend + ".ctx"), "w") as f:
        json.dump(dict(r1.volume.volume_context), f)


def context(backend):
    with open(os.path.join(TMP, backend + ".ctx")) as f:
        return json.load(f)


# Mount flags as Kubernetes sends a StorageClass's mountOptions: to
# the stage and the publish alike.
FLAGS = ["nosuid,nodev", "errors=remount-ro"]


def mount_opts(path):
    """The mount options of the last mount on path (mountinfo)."""
    real, opts = os.path.realpath(path), ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == real:
                opts = fields[5]
    return set(opts.split(","))


def stage_call(c, backend, node):
    stage, _ = paths(node)
    os.makedirs(stage, exist_ok=True)
    c.call("node", "NodeStageVolume", volume_id=vol_id(backend),
           staging_target_path=stage,
           volume_capability=mount_cap(flags=FLAGS),
           secrets=secrets(backend), volume_context=context(backend))


def publish_call(c, backend, node, readonly=False):
    stage, target = paths(node)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    c.call("node", "NodePublishVolume", volume_id=vol_id(backend),
           staging_target_path=stage, target_path=target,
           volume_capability=mount_cap(flags=FLAGS), readonly=readonly,
           volume_context=context(backend))
    if not {"nosuid", "nodev"} <= mount_opts(target):
        fail("%s: mounted without nosuid,nodev" % target)
    return target


def write_files(target):
    digests = {}
    for rel, size in FILES.items():
        path = os.path.join(target, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = os.urandom(size)
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        digests[rel] = hashlib.sha256(data).hexdigest()
    fd = os.open(os.path.dirname(os.path.join(target, "dir/b.bin")),
                 os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    fd = os.open(target, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return digests


def stage(backend):
    c = client("a")
    stage_call(c, backend, "a")
    stage_call(c, backend, "a")  # idempotent
    target = publish_call(c, backend, "a")
    publish_call(c, backend, "a")  # idempotent
    digests = write_files(target)
    with open(os.path.join(TMP, backend + ".files"), "w") as f:
        json.dump(digests, f)
    st = c.call("node", "NodeGetVolumeStats", volume_id=vol_id(backend),
                volume_path=target)
    units = {u.unit: u for u in st.usage}
    if units[c.pb.VolumeUsage.BYTES].used <= 0:
        fail("NodeGetVolumeStats: no bytes used after writing files")


def compare(root, backend):
    with open(os.path.join(TMP, backend + ".files")) as f:
        digests = json.load(f)
    for rel, want in digests.items():
        with open(os.path.join(root, rel), "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != want:
            fail("%s: %s differs from what was written" % (root, rel))


def verify(backend):
    node = os.environ.get("CSI_NODE", "a")
    c = client(node)
    stage_call(c, backend, node)
    target = publish_call(c, backend, node)
    compare(target, backend)


def unstage(backend):
    node = os.environ.get("CSI_NODE", "a")
    c = client(node)
    stage, target = paths(node)
    for _ in range(2):
        c.call("node", "NodeUnpublishVolume", volume_id=vol_id(backend),
               target_path=target)
    if os.path.exists(target):
        fail("NodeUnpublishVolume left " + target)
    for _ in range(2):
        c.call("node", "NodeUnstageVolume", volume_id=vol_id(backend),
               staging_target_path=stage)
    if os.path.ismount(stage):
        fail("NodeUnstageVolume left %s mounted" % stage)


def unstage_refused(backend):
    c = client("a")
    stage, target = paths("a")
    c.call("node", "NodeUnpublishVolume", volume_id=vol_id(backend),
           target_path=target)
    got = []
    for _ in range(2):
        try:
            c.call("node", "NodeUnstageVolume", volume_id=vol_id(backend),
                   staging_target_path=stage)
            got.append(("OK", ""))
        except grpc.RpcError as e:
            got.append((e.code().name, e.details()))
    print("e2e: NodeUnstageVolume: %s" % got)
    if any(code == "OK" for code, _ in got):
        fail("NodeUnstageVolume succeeded with unwritten blocks: %s" % got)
    code, details = got[-1]
    if code != "FAILED_PRECONDITION" or "kept" not in details:
        fail("NodeUnstageVolume again: expected FAILED_PRECONDITION "
             "(files kept), got %s: %s" % (code, details))
    b = client("b")
    stage_b, _ = paths("b")
    os.makedirs(stage_b, exist_ok=True)
    expect("FAILED_PRECONDITION",
           b.code("node", "NodeStageVolume", volume_id=vol_id(backend),
                  staging_target_path=stage_b, volume_capability=mount_cap(),
                  secrets=secrets(backend), volume_context=context(backend)),
           "NodeStageVolume on b while a keeps unwritten blocks")


def delete(backend):
    c = client("a")
    for _ in range(2):
        c.call("controller", "DeleteVolume", volume_id=vol_id(backend),
               secrets=secrets(backend))


if __name__ == "__main__":
    phase, backend = sys.argv[1], sys.argv[2]
    if phase == "bad":
        import e2e_bad
        e2e_bad.run(backend, sys.modules[__name__])
    else:
        {"create": create, "stage": stage, "verify": verify,
         "unstage": unstage, "unstage-refused": unstage_refused,
         "delete": delete,
         "compare": lambda b: compare(os.environ["CSI_ROOT"], b),
         }[phase](backend)
    print("e2e: %s %s: ok" % (phase, backend))
