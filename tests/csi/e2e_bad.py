"""Bad input for tests/test-csi.sh (e2e.py bad BACKEND): each call
gets the code the CSI specification names, and changes nothing: the
backend's images, both gateways' volume files and the drivers' records
are the same before and after.  Run while the volume is staged on node
a (so that staging it on b and deleting it must be refused).
"""
import os


def snapshot():
    """What a bad call must not change."""
    seen = {}
    tmp = os.environ["CSI_TMP"]
    for d in ("images", "a/volumes.d", "b/volumes.d", "a/state", "b/state"):
        path = os.path.join(tmp, d)
        seen[d] = sorted(os.listdir(path)) if os.path.isdir(path) else None
    return seen


def run(backend, e2e):
    a, b = e2e.client("a"), e2e.client("b")
    pb = a.pb
    cap = [e2e.mount_cap()]
    vid = e2e.vol_id(backend)
    tmp = os.environ["CSI_TMP"]
    notdir = os.path.join(tmp, "not-a-directory")
    open(notdir, "w").close()
    before = snapshot()
    sec = e2e.secrets(backend)
    cases = [
        ("INVALID_ARGUMENT", a, "controller", "CreateVolume",
         dict(volume_capabilities=cap, parameters={"backend": backend})),
        ("INVALID_ARGUMENT", a, "controller", "CreateVolume",
         dict(name="pvc-x1", volume_capabilities=cap,
              parameters={"backend": backend, "colour": "blue"})),
        ("INVALID_ARGUMENT", a, "controller", "CreateVolume",
         dict(name="pvc-x2", volume_capabilities=cap, parameters={})),
        ("INVALID_ARGUMENT", a, "controller", "CreateVolume",
         dict(name="pvc-x3", volume_capabilities=cap,
              parameters={"backend": "nosuch"})),
        ("INVALID_ARGUMENT", a, "controller", "CreateVolume",
         dict(name="pvc-x4", parameters={"backend": backend})),
        ("INVALID_ARGUMENT", a, "controller", "CreateVolume",
         dict(name="pvc-x5", parameters={"backend": backend},
              volume_capabilities=[e2e.mount_cap(
                  mode="MULTI_NODE_MULTI_WRITER")])),
        ("OUT_OF_RANGE", a, "controller", "CreateVolume",
         dict(name="pvc-x6", parameters={"backend": backend},
              volume_capabilities=cap, secrets=sec,
              capacity_range=pb.CapacityRange(required_bytes=1 << 50))),
        ("OUT_OF_RANGE", a, "controller", "CreateVolume",
         dict(name="pvc-x7", parameters={"backend": backend},
              volume_capabilities=cap, secrets=sec,
              capacity_range=pb.CapacityRange(required_bytes=2 << 20,
                                              limit_bytes=1 << 20))),
        ("INVALID_ARGUMENT", a, "controller", "DeleteVolume", dict()),
        ("INVALID_ARGUMENT", a, "controller", "DeleteVolume",
         dict(volume_id="no-colon-here")),
        ("FAILED_PRECONDITION", a, "controller", "DeleteVolume",
         dict(volume_id=vid, secrets=sec)),
        ("NOT_FOUND", a, "controller", "ValidateVolumeCapabilities",
         dict(volume_id=backend + ":pvc-nosuch", volume_capabilities=cap,
              secrets=sec)),
        ("INVALID_ARGUMENT", a, "node", "NodeStageVolume",
         dict(staging_target_path=tmp, volume_capability=cap[0])),
        ("INVALID_ARGUMENT", a, "node", "NodeStageVolume",
         dict(volume_id=vid, volume_capability=cap[0])),
        ("INVALID_ARGUMENT", a, "node", "NodeStageVolume",
         dict(volume_id=vid, staging_target_path=tmp)),
        ("INVALID_ARGUMENT", b, "node", "NodeStageVolume",
         dict(volume_id=vid, staging_target_path=notdir,
              volume_capability=cap[0], secrets=sec)),
        ("INVALID_ARGUMENT", b, "node", "NodeStageVolume",
         dict(volume_id=vid, staging_target_path=tmp,
              volume_capability=cap[0], secrets=sec,
              volume_context={"flavour": "x"})),
        # mount flags: the driver's own, empty, a NUL byte
        ("INVALID_ARGUMENT", b, "node", "NodeStageVolume",
         dict(volume_id=vid, staging_target_path=tmp,
              volume_capability=e2e.mount_cap(flags=["noexec", "remount"]),
              secrets=sec)),
        ("INVALID_ARGUMENT", b, "node", "NodeStageVolume",
         dict(volume_id=vid, staging_target_path=tmp,
              volume_capability=e2e.mount_cap(flags=["nodev,"]),
              secrets=sec)),
        ("INVALID_ARGUMENT", b, "node", "NodeStageVolume",
         dict(volume_id=vid, staging_target_path=tmp,
              volume_capability=e2e.mount_cap(flags=["data=x\0y"]),
              secrets=sec)),
        ("NOT_FOUND", b, "node", "NodeStageVolume",
         dict(volume_id=backend + ":pvc-nosuch", staging_target_path=tmp,
              volume_capability=cap[0], secrets=sec)),
        # staged on a: b may not stage it (its dirty blocks are on a)
        ("FAILED_PRECONDITION", b, "node", "NodeStageVolume",
         dict(volume_id=vid, staging_target_path=tmp,
              volume_capability=cap[0], secrets=sec)),
        ("INVALID_ARGUMENT", a, "node", "NodePublishVolume",
         dict(volume_id=vid, staging_target_path=tmp,
              volume_capability=cap[0])),
        ("INVALID_ARGUMENT", a, "node", "NodeGetVolumeStats",
         dict(volume_id=vid)),
        ("NOT_FOUND", a, "node", "NodeGetVolumeStats",
         dict(volume_id=vid, volume_path=notdir)),
    ]
    for i, (want, c, svc, method, fields) in enumerate(cases):
        got = c.code(svc, method, **fields)
        if got != want:
            e2e.fail("bad input %d, %s %s: expected %s, got %s"
                     % (i, method, sorted(fields), want, got))
        if snapshot() != before:
            e2e.fail("bad input %d, %s changed %s -> %s"
                     % (i, method, before, snapshot()))
    if backend == "cos":
        # the refused names made no volume in the bucket
        for n in ("pvc-x1", "pvc-x6", "pvc-x7"):
            got = a.code("controller", "ValidateVolumeCapabilities",
                         volume_id=backend + ":" + n,
                         volume_capabilities=cap, secrets=sec)
            if got != "NOT_FOUND":
                e2e.fail("refused volume %s exists in the bucket" % n)
    os.unlink(notdir)
