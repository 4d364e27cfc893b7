"""A CSI client that plays the container orchestrator in the tests.

The Python stubs are made from csi/csi.proto at import time (Debian's
python3-grpc-tools) into a temporary directory, so nothing generated is
kept in the tree.  Use Debian's /usr/bin/python3.

    from csiclient import Client, grpc
    c = Client("unix:///tmp/x/csi.sock")
    c.identity.GetPluginInfo(c.pb.GetPluginInfoRequest())
"""
import atexit
import importlib
import os
import shutil
import sys
import tempfile

import grpc
from grpc_tools import protoc

_HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.normpath(os.path.join(_HERE, "..", "..", "csi", "csi.proto"))


def _generate():
    out = tempfile.mkdtemp(prefix="csiproto.")
    atexit.register(shutil.rmtree, out, True)
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    args = ["protoc", "-I" + os.path.dirname(PROTO), "-I" + include,
            "--python_out=" + out, "--grpc_python_out=" + out,
            os.path.abspath(PROTO)]
    if protoc.main(args) != 0:
        sys.exit("csiclient: protoc failed on " + PROTO)
    sys.path.insert(0, out)
    return (importlib.import_module("csi_pb2"),
            importlib.import_module("csi_pb2_grpc"))


pb, pb_grpc = _generate()


class Client:
    """The three services of one driver, over its Unix socket."""

    def __init__(self, endpoint, timeout=300):
        self.channel = grpc.insecure_channel(endpoint)
        self.timeout = timeout
        self.pb = pb
        self.identity = pb_grpc.IdentityStub(self.channel)
        self.controller = pb_grpc.ControllerStub(self.channel)
        self.node = pb_grpc.NodeStub(self.channel)

    def wait_ready(self, seconds=30):
        grpc.channel_ready_future(self.channel).result(timeout=seconds)

    def call(self, service, method, **fields):
        """service.method(Request(**fields)): the answer, or raises
        grpc.RpcError (e.code(), e.details())."""
        stub = getattr(self, service)
        req = getattr(pb, method + "Request")(**fields)
        return getattr(stub, method)(req, timeout=self.timeout)

    def code(self, service, method, **fields):
        """The gRPC status code name of the call ("OK" on success)."""
        try:
            self.call(service, method, **fields)
            return "OK"
        except grpc.RpcError as e:
            return e.code().name


def mount_cap(fs_type="", mode="SINGLE_NODE_WRITER", flags=()):
    m = pb.VolumeCapability.AccessMode.Mode.Value(mode)
    return pb.VolumeCapability(
        mount=pb.VolumeCapability.MountVolume(fs_type=fs_type,
                                              mount_flags=list(flags)),
        access_mode=pb.VolumeCapability.AccessMode(mode=m))


def block_cap(mode="SINGLE_NODE_WRITER"):
    m = pb.VolumeCapability.AccessMode.Mode.Value(mode)
    return pb.VolumeCapability(
        block=pb.VolumeCapability.BlockVolume(),
        access_mode=pb.VolumeCapability.AccessMode(mode=m))
