"""Check that conf/k8s/'s manifests agree with hhc-csi and hhc-gateway.

    /usr/bin/python3 k8s-check.py DIR HHC-CSI HHC-GATEWAY TMPDIR

Every YAML document in DIR/*.yaml must parse; then the names, sockets,
paths and configs of the CSI driver's manifests must agree with each
other and with the programs (tests/test-csi-k8s.sh, which also runs this
on broken copies).  Each failed check is one line "k8s-check: FAIL: ...";
the exit status is 1 when any failed, 0 otherwise.
"""
import glob
import json
import os
import posixpath
import re
import subprocess
import sys

import yaml

PARAM_KEYS = {"backend", "mode", "cacheSize", "logSize"}
CONTEXT_KEYS = {"mode", "cacheSize", "logSize"}
MODES = {"pt", "wt", "wb", "wbflush", "hhc"}
SIZE = re.compile(r"^[0-9]+([bsKMGTPE]|[KMGTPE](i?B)?)?$", re.I)
REG_DIR = "/var/lib/kubelet/plugins_registry"
CO_PREFIX = "csi.storage.k8s.io/"
SECRET_KEYS = ("provisioner-secret-name", "provisioner-secret-namespace",
               "node-stage-secret-name", "node-stage-secret-namespace")

failures = []


def fail(msg):
    failures.append(msg)
    print("k8s-check: FAIL: " + msg, file=sys.stderr)


def load(directory):
    """All documents of DIR/*.yaml as (file, doc)."""
    docs = []
    files = sorted(glob.glob(os.path.join(directory, "*.yaml")))
    if not files:
        fail("%s: no *.yaml" % directory)
    for f in files:
        try:
            with open(f) as fh:
                for d in yaml.safe_load_all(fh):
                    if d is not None:
                        docs.append((os.path.basename(f), d))
        except yaml.YAMLError as e:
            fail("%s: does not parse: %s" % (f, str(e).replace("\n", " ")))
    return docs


def of_kind(docs, kind):
    return [d for _, d in docs if d.get("kind") == kind]


def driver_name(csi):
    out = subprocess.run([csi, "--version"], capture_output=True, text=True)
    m = re.match(r"^hhc-csi \S+ \((\S+)\)\n?$", out.stdout)
    if out.returncode != 0 or not m:
        fail("%s --version: unexpected output %r" % (csi, out.stdout))
        return None
    return m.group(1)


def check_csidriver(docs, name):
    drivers = of_kind(docs, "CSIDriver")
    if len(drivers) != 1:
        fail("expected one CSIDriver, found %d" % len(drivers))
        return
    d = drivers[0]
    if d["metadata"]["name"] != name:
        fail("CSIDriver name %s is not the driver's name %s"
             % (d["metadata"]["name"], name))
    want = {"attachRequired": False, "podInfoOnMount": False,
            "volumeLifecycleModes": ["Persistent"], "fsGroupPolicy": "File"}
    for k, v in want.items():
        if d["spec"].get(k) != v:
            fail("CSIDriver spec.%s is %r, expected %r"
                 % (k, d["spec"].get(k), v))
    for sc in of_kind(docs, "StorageClass"):
        if sc.get("provisioner") != name:
            fail("StorageClass %s: provisioner %s is not %s"
                 % (sc["metadata"]["name"], sc.get("provisioner"), name))
    for pv in of_kind(docs, "PersistentVolume"):
        drv = pv["spec"].get("csi", {}).get("driver")
        if drv != name:
            fail("PersistentVolume %s: csi.driver %s is not %s"
                 % (pv["metadata"]["name"], drv, name))


# ---- Pods: containers, their mounts and the volumes behind them ----

def pod_spec(w):
    return w["spec"]["template"]["spec"]


def is_csi(c):
    return any(str(a).startswith("--endpoint=") for a in c.get("args", []))


def find_container(spec, pred, what, wname):
    cs = [c for c in spec["containers"] if pred(c)]
    if len(cs) != 1:
        fail("%s: expected one %s container, found %d" % (wname, what, len(cs)))
        return None
    return cs[0]


def arg(c, flag):
    """The value of --flag=VALUE in c's args, or None."""
    for a in c.get("args", []) + c.get("command", []):
        if str(a).startswith(flag + "="):
            return str(a)[len(flag) + 1:]
    return None


def resolve(spec, c, path):
    """(volume, path inside it) for path in container c, or None."""
    best = None
    for m in c.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") or "/"
        if path == mp or path.startswith(mp.rstrip("/") + "/"):
            if best is None or len(mp) > len(best["mountPath"]):
                best = m
    if best is None:
        return None
    rel = posixpath.relpath(path, best["mountPath"])
    rel = posixpath.join(best.get("subPath", ""), "" if rel == "." else rel)
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    return vols.get(best["name"]), rel.rstrip("/"), best


def volume_id(r):
    """A comparable identity of resolve ()'s answer."""
    if r is None:
        return None
    v, rel, _ = r
    if v is None:
        return None
    if "hostPath" in v:
        return ("host", posixpath.normpath(
            posixpath.join(v["hostPath"]["path"], rel)))
    if "configMap" in v:
        return ("configMap", v["configMap"]["name"], rel)
    if "nfs" in v:
        return ("nfs", v["nfs"]["server"], posixpath.normpath(
            posixpath.join(v["nfs"]["path"], rel)))
    if "persistentVolumeClaim" in v:
        return ("pvc", v["persistentVolumeClaim"]["claimName"], rel)
    return (v["name"], rel)


def config_map_file(docs, spec, c, path, wname):
    """The text of the ConfigMap key mounted at path in c, or None."""
    vid = volume_id(resolve(spec, c, path))
    if vid is None or vid[0] != "configMap":
        fail("%s: %s in %s is not a ConfigMap key" % (wname, path, c["name"]))
        return None
    for cm in of_kind(docs, "ConfigMap"):
        if cm["metadata"]["name"] == vid[1] and vid[2] in cm.get("data", {}):
            return cm["data"][vid[2]]
    fail("%s: no ConfigMap %s with key %s" % (wname, vid[1], vid[2]))
    return None


def check_csi_args(spec, c, wname):
    ep = arg(c, "--endpoint") or ""
    if not ep.startswith("unix:///"):
        fail("%s: hhc-csi --endpoint=%s is not unix:///PATH" % (wname, ep))
    if arg(c, "--nodeid") != "$(NODE_NAME)":
        fail("%s: hhc-csi --nodeid is not $(NODE_NAME)" % wname)
    env = {e["name"]: e for e in c.get("env", [])}
    ref = env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {})
    if ref.get("fieldPath") != "spec.nodeName":
        fail("%s: NODE_NAME is not the fieldRef spec.nodeName" % wname)
    return ep[len("unix://"):]


def check_sidecars(spec, csi, sock, wname, sidecars):
    """Every sidecar's --csi-address is hhc-csi's socket."""
    want = volume_id(resolve(spec, csi, sock))
    if want is None:
        fail("%s: hhc-csi's socket %s is on no volume" % (wname, sock))
    for image in sidecars:
        c = find_container(spec, lambda c: image in c.get("image", ""),
                           image, wname)
        if c is None:
            continue
        addr = arg(c, "--csi-address")
        got = volume_id(resolve(spec, c, addr)) if addr else None
        if got is None or got != want:
            fail("%s: %s --csi-address=%s is not hhc-csi's --endpoint "
                 "socket %s" % (wname, c["name"], addr, sock))


def check_csi_config(docs, spec, c, csi, tmp, wname):
    """hhc-csi --check on the ConfigMap's csi.json; its JSON."""
    path = arg(c, "--config")
    text = config_map_file(docs, spec, c, path, wname) if path else None
    if text is None:
        fail("%s: hhc-csi has no --config from a ConfigMap" % wname)
        return None
    f = os.path.join(tmp, wname + "-csi.json")
    with open(f, "w") as fh:
        fh.write(text)
    r = subprocess.run([csi, "--check", "--config=" + f],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("%s: hhc-csi --check: %s" % (wname, r.stderr.strip()))
        return None
    return json.loads(text)


def check_controller(docs, name, csi, tmp):
    ws = [w for w in of_kind(docs, "Deployment")
          if any(is_csi(c) for c in pod_spec(w)["containers"])]
    if len(ws) != 1:
        fail("expected one Deployment running hhc-csi, found %d" % len(ws))
        return None
    w = ws[0]
    spec, wname = pod_spec(w), "Deployment " + w["metadata"]["name"]
    c = find_container(spec, is_csi, "hhc-csi", wname)
    if c is None:
        return None
    sock = check_csi_args(spec, c, wname)
    check_sidecars(spec, c, sock, wname, ["csi-provisioner", "livenessprobe"])
    check_rbac(docs, w)
    conf = check_csi_config(docs, spec, c, csi, tmp, wname)
    if conf:
        for bname, b in conf.get("backends", {}).items():
            if b["type"] == "file":
                shared_dir(spec, [c], b["dir"], wname, "backend " + bname)
        claims_dirs(spec, c, conf, wname)
    return conf


def check_rbac(docs, w):
    """The provisioner's ServiceAccount may do what the sidecar does."""
    sa = pod_spec(w).get("serviceAccountName")
    ns = w["metadata"].get("namespace")
    need = {("", "persistentvolumes"): {"get", "list", "watch", "create",
                                        "delete"},
            ("", "persistentvolumeclaims"): {"get", "list", "watch",
                                             "update"},
            ("storage.k8s.io", "storageclasses"): {"get", "list", "watch"},
            ("", "events"): {"create", "patch"},
            ("", "secrets"): {"get"},
            ("storage.k8s.io", "csinodes"): {"get", "list", "watch"},
            ("", "nodes"): {"get", "list", "watch"},
            ("coordination.k8s.io", "leases"): {"get", "create", "update"}}
    have = {}
    for kind, rkind in (("ClusterRoleBinding", "ClusterRole"),
                        ("RoleBinding", "Role")):
        for b in of_kind(docs, kind):
            if not any(s.get("kind") == "ServiceAccount" and s["name"] == sa
                       and s.get("namespace", ns) == ns
                       for s in b.get("subjects", [])):
                continue
            for r in of_kind(docs, rkind):
                if r["metadata"]["name"] != b["roleRef"]["name"]:
                    continue
                for rule in r.get("rules", []):
                    for g in rule.get("apiGroups", []):
                        for res in rule.get("resources", []):
                            have.setdefault((g, res), set()).update(
                                rule.get("verbs", []))
    for k, verbs in need.items():
        missing = verbs - have.get(k, set())
        if missing:
            fail("ServiceAccount %s may not %s %s" % (
                sa, ",".join(sorted(missing)), k[1]))


def shared_dir(spec, cs, path, wname, what, host=False):
    """path is mounted at path in every container of cs, the same
    volume (a hostPath one when host)."""
    ids = set()
    for c in cs:
        r = resolve(spec, c, path)
        vid = volume_id(r)
        if vid is None or r[2]["mountPath"].rstrip("/") != path.rstrip("/"):
            fail("%s: %s %s is not mounted at %s in %s"
                 % (wname, what, path, path, c["name"]))
            return
        if host and vid[0] != "host":
            fail("%s: %s %s in %s is not a hostPath volume"
                 % (wname, what, path, c["name"]))
        ids.add(vid)
    if len(ids) > 1:
        fail("%s: %s %s is not the same volume in %s"
             % (wname, what, path, ", ".join(c["name"] for c in cs)))


# wname -> {backend: volume_id} of each iscsi backend's claims_dir
claims = {}
SHARED = ("nfs", "host", "pvc")


def claims_dirs(spec, c, conf, wname):
    """Each iscsi backend's claims_dir is mounted at its path in hhc-csi
    from a volume nodes can share (nfs, a PVC; hostPath on one node)."""
    for bname, b in conf.get("backends", {}).items():
        if b["type"] != "iscsi":
            continue
        what = "backend %s claims_dir" % bname
        shared_dir(spec, [c], b["claims_dir"], wname, what)
        vid = volume_id(resolve(spec, c, b["claims_dir"]))
        if vid is not None and vid[0] not in SHARED:
            fail("%s: %s %s is not on a volume nodes share (nfs, "
                 "persistentVolumeClaim, hostPath)"
                 % (wname, what, b["claims_dir"]))
        claims.setdefault(wname, {})[bname] = vid


def show(vid):
    return " ".join(str(x) for x in vid) if vid else "nothing"


def check_claims_agree():
    """The controller and the node pods mount the same claims_dir."""
    if len(claims) != 2:
        return
    (w1, c1), (w2, c2) = sorted(claims.items())
    for bname in sorted(set(c1) & set(c2)):
        if c1[bname] != c2[bname]:
            fail("backend %s claims_dir: %s mounts %s, %s mounts %s"
                 % (bname, w1, show(c1[bname]), w2, show(c2[bname])))


def check_node_pod(spec, c, name, wname):
    if not spec.get("shareProcessNamespace"):
        fail("%s: no shareProcessNamespace (hhcctl signals the gateway)"
             % wname)
    if not c.get("securityContext", {}).get("privileged"):
        fail("%s: hhc-csi is not privileged" % wname)
    r = resolve(spec, c, "/var/lib/kubelet")
    if (volume_id(r) != ("host", "/var/lib/kubelet")
            or r[2].get("mountPropagation") != "Bidirectional"):
        fail("%s: /var/lib/kubelet is not the host's with Bidirectional "
             "propagation in hhc-csi" % wname)
    if volume_id(resolve(spec, c, "/dev")) != ("host", "/dev"):
        fail("%s: hhc-csi does not see the host's /dev" % wname)


def check_registrar(spec, c, sock, name, wname):
    plugin = "/var/lib/kubelet/plugins/" + name
    host = volume_id(resolve(spec, c, sock))
    if host is None or host[0] != "host" or posixpath.dirname(
            host[1]) != plugin:
        fail("%s: hhc-csi's socket %s is not in the host's %s"
             % (wname, sock, plugin))
    reg = find_container(
        spec, lambda c: "csi-node-driver-registrar" in c.get("image", ""),
        "node-driver-registrar", wname)
    if reg is None:
        return
    path = arg(reg, "--kubelet-registration-path")
    if host is None or path != host[1]:
        fail("%s: --kubelet-registration-path=%s is not where hhc-csi's "
             "socket is on the host (%s)" % (wname, path,
                                             host and host[1]))
    if volume_id(resolve(spec, reg, "/registration")) != ("host", REG_DIR):
        fail("%s: the registrar's /registration is not the host's %s"
             % (wname, REG_DIR))


def gateway_file(c):
    argv = [str(a) for a in c.get("command", []) + c.get("args", [])]
    for i, a in enumerate(argv):
        if a == "-c" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--config="):
            return a[len("--config="):]
    return None


def run_gateway_check(text, gateway, tmp):
    """hhc-gateway --check on gateway.json with its run_dir and
    volumes_dir moved into tmp (--check wants volumes_dir's parent to
    exist); the other keys as they are."""
    g = json.loads(text)
    top = os.path.join(tmp, "gw")
    os.makedirs(top, exist_ok=True)
    g["run_dir"] = os.path.join(top, "run")
    if "volumes_dir" in g:
        g["volumes_dir"] = os.path.join(top, "volumes.d")
    f = os.path.join(top, "gateway.json")
    with open(f, "w") as fh:
        json.dump(g, fh)
    r = subprocess.run([gateway, "--check", "-c", f], capture_output=True,
                       text=True)
    if r.returncode != 0:
        fail("gateway.json: hhc-gateway --check: %s" % r.stderr.strip())


def check_nbd(g, conf, wname):
    listen = g.get("listen", {"address": "127.0.0.1", "port": 10809})
    nbd = conf["node"].get("nbd", {"address": "127.0.0.1", "port": 10809})
    if "socket" in listen or "socket" in nbd:
        if listen.get("socket") != nbd.get("socket"):
            fail("%s: the gateway listens on %s, csi.json node.nbd is %s"
                 % (wname, listen, nbd))
        return
    addr, port = listen.get("address", "127.0.0.1"), listen.get("port", 10809)
    caddr, cport = nbd.get("address", "127.0.0.1"), nbd.get("port", 10809)
    if port != cport or (addr != caddr and addr not in ("0.0.0.0", "::")):
        fail("%s: the gateway listens on %s port %s, csi.json node.nbd is "
             "%s port %s" % (wname, addr, port, caddr, cport))


def check_gateway(docs, spec, c, conf, gateway, tmp, wname):
    gw = find_container(spec, lambda c: any(
        "hhc-gateway" in str(a) for a in c.get("command", [])),
        "hhc-gateway", wname)
    if gw is None or conf is None:
        return
    path = gateway_file(gw)
    text = config_map_file(docs, spec, gw, path, wname) if path else None
    if text is None:
        return
    run_gateway_check(text, gateway, tmp)
    g = json.loads(text)
    node = conf["node"]
    if (volume_id(resolve(spec, c, node["gateway_config"]))
            != volume_id(resolve(spec, gw, path))):
        fail("%s: csi.json node.gateway_config %s is not the gateway's "
             "config %s" % (wname, node["gateway_config"], path))
    check_nbd(g, conf, wname)
    if g.get("volumes"):
        fail("%s: gateway.json has static volumes" % wname)
    if "volumes_dir" not in g:
        fail("%s: gateway.json has no volumes_dir" % wname)
    both = [c, gw]
    shared_dir(spec, both, g.get("run_dir", "/run/hhc"), wname, "run_dir")
    for what, p in (("volumes_dir", g.get("volumes_dir")),
                    ("node.cache_dir", node.get("cache_dir")),
                    ("node.state_dir", node.get("state_dir"))):
        if p:
            shared_dir(spec, both, p, wname, what, host=True)
    for p in node.get("log_dirs", []):
        shared_dir(spec, both, p, wname, "node.log_dirs", host=True)
    for bname, b in conf.get("backends", {}).items():
        if b["type"] == "file":
            shared_dir(spec, both, b["dir"], wname, "backend " + bname)


def check_node(docs, name, csi, gateway, tmp):
    ws = [w for w in of_kind(docs, "DaemonSet")
          if any(is_csi(c) for c in pod_spec(w)["containers"])]
    if len(ws) != 1:
        fail("expected one DaemonSet running hhc-csi, found %d" % len(ws))
        return None
    w = ws[0]
    spec, wname = pod_spec(w), "DaemonSet " + w["metadata"]["name"]
    c = find_container(spec, is_csi, "hhc-csi", wname)
    if c is None:
        return None
    sock = check_csi_args(spec, c, wname)
    check_sidecars(spec, c, sock, wname,
                   ["csi-node-driver-registrar", "livenessprobe"])
    check_node_pod(spec, c, name, wname)
    check_registrar(spec, c, sock, name, wname)
    conf = check_csi_config(docs, spec, c, csi, tmp, wname)
    if conf is not None and "node" not in conf:
        fail("%s: csi.json has no node section" % wname)
        conf = None
    check_gateway(docs, spec, c, conf, gateway, tmp, wname)
    if conf is not None:
        claims_dirs(spec, c, conf, wname)
    return conf


# ---- StorageClasses, Secrets, static volumes ----

def check_params(where, params, keys, conf):
    for k, v in params.items():
        if k.startswith(CO_PREFIX):
            continue
        if k not in keys:
            fail("%s: unknown parameter %s" % (where, k))
        elif k == "mode" and v not in MODES:
            fail("%s: mode %s is not one of %s"
                 % (where, v, " ".join(sorted(MODES))))
        elif k in ("cacheSize", "logSize") and not SIZE.match(str(v)):
            fail("%s: %s %s is not a size" % (where, k, v))


def check_secret(docs, where, params):
    for k in SECRET_KEYS:
        if CO_PREFIX + k not in params:
            fail("%s: a cos backend needs %s%s" % (where, CO_PREFIX, k))
            return
    for kind in ("provisioner", "node-stage"):
        name = params[CO_PREFIX + kind + "-secret-name"]
        ns = params[CO_PREFIX + kind + "-secret-namespace"]
        found = [s for s in of_kind(docs, "Secret")
                 if s["metadata"]["name"] == name
                 and s["metadata"].get("namespace") == ns]
        if len(found) != 1:
            fail("%s: no Secret %s/%s in the manifests" % (where, ns, name))
            continue
        s = found[0]
        keys = set(s.get("stringData", {})) | set(s.get("data", {}))
        if keys != {"access_key", "secret_key"}:
            fail("Secret %s/%s: keys %s, expected access_key and secret_key"
                 % (ns, name, ", ".join(sorted(keys))))


def check_classes(docs, conf):
    backends = conf.get("backends", {})
    for sc in of_kind(docs, "StorageClass"):
        where = "StorageClass " + sc["metadata"]["name"]
        params = sc.get("parameters", {})
        check_params(where, params, PARAM_KEYS, conf)
        b = params.get("backend")
        if b not in backends:
            fail("%s: backend %s is not a backend of csi.json" % (where, b))
            continue
        if backends[b]["type"] == "iscsi":
            fail("%s: backend %s is iscsi (static volumes only)" % (where, b))
        if backends[b]["type"] == "cos":
            check_secret(docs, where, params)


def check_static(docs, conf):
    backends = conf.get("backends", {})
    for pv in of_kind(docs, "PersistentVolume"):
        where = "PersistentVolume " + pv["metadata"]["name"]
        c = pv["spec"].get("csi", {})
        check_params(where, c.get("volumeAttributes", {}), CONTEXT_KEYS, conf)
        bname, _, lun = str(c.get("volumeHandle", "")).partition(":")
        b = backends.get(bname)
        if b is None or b["type"] != "iscsi" or lun not in b.get("luns", {}):
            fail("%s: volumeHandle %s is not BACKEND:LUN of an iscsi "
                 "backend of csi.json" % (where, c.get("volumeHandle")))


def main(argv):
    if len(argv) != 5:
        print("usage: k8s-check.py DIR HHC-CSI HHC-GATEWAY TMPDIR",
              file=sys.stderr)
        return 2
    directory, csi, gateway, tmp = argv[1:]
    docs = load(directory)
    name = driver_name(csi)
    if name:
        check_csidriver(docs, name)
    cconf = check_controller(docs, name, csi, tmp)
    nconf = check_node(docs, name, csi, gateway, tmp)
    if cconf is not None and nconf is not None and cconf != nconf:
        fail("the controller's and the node's csi.json differ")
    check_claims_agree()
    conf = cconf or nconf
    if conf is not None:
        check_classes(docs, conf)
        check_static(docs, conf)
    if failures:
        return 1
    print("k8s-check: %d documents ok, driver %s" % (len(docs), name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
