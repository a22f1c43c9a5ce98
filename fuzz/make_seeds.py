#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into fuzz/corpus/TARGET/.

A seed is 3 header bytes and a body (see crates/testkit/src/fuzz/events.rs
and crates/testkit/src/fuzz/k8s.rs):
  byte 0: flags. Event decoders: bits 0-1 the resume point (none, 1 us,
          2026, just before the appended event), 0x04 a listed object, 0x08
          a label filter, 0x40 readiness watched (health_status, pause and
          unpause mean something; inspections answered from byte 1). k8s:
          0x01 watch both kinds, 0x02 one namespace, 0x04 the list holds an
          object, 0x08 a label selector, 0x40 readiness watched. All: bits
          4-5 the chunk sizes (1..=16, 1, 1..=4096, 1..=65536).
  byte 1: seeds the chunk sizes (and the answers to inspections);
  byte 2: repeats the body: from 0xF8 on 2^(b - 0xEB) times (8192 to 2^20,
          at most 4 MiB in all), below once.
Run it from anywhere: python3 fuzz/make_seeds.py (it rewrites the seeds it
names and leaves other files alone).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = 1_796_012_924_361_184_687  # 2026-11-30T05:48:44Z

CHUNK16, CHUNK1, CHUNK4K, CHUNK64K = 0x00, 0x10, 0x20, 0x30
LISTED, READINESS = 0x04, 0x40


def write(target, name, flags, seed, repeat, body):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(body, str):
        body = body.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes([flags, seed, repeat]) + body)


def lines(*ls):
    return b"".join((l.encode() if isinstance(l, str) else l) + b"\n" for l in ls)


def docker(action, cid, name, n, extra=None):
    attrs = {"com.docker.compose.project": "shop", "image": "nginx:1.27", "name": name,
             "tier": "frontend"}
    if extra:
        attrs.update(extra)
    return json.dumps({"status": action, "id": cid, "from": "nginx:1.27", "Type": "container",
                       "Action": action, "Actor": {"ID": cid, "Attributes": attrs},
                       "scope": "local", "time": n // 10**9, "timeNano": n},
                      separators=(",", ":"))


def podman(action, cid, name, n, extra=None, top=None):
    attrs = {"containerExitCode": "0", "image": "docker.io/library/busybox:latest",
             "name": name, "podId": "", "app": "web"}
    if extra:
        attrs.update(extra)
    event = {"status": action, "id": cid, "from": "docker.io/library/busybox:latest",
             "Type": "container", "Action": action,
             "Actor": {"ID": cid, "Attributes": attrs}, "scope": "local",
             "time": n // 10**9, "timeNano": n}
    # Top-level fields after the rest, as Podman 4.3's compat API writes
    # them (its health_status carries `HealthStatus` there).
    if top:
        event.update(top)
    return json.dumps(event, separators=(",", ":"))


def service(action, sid, name, n, extra=None):
    attrs = {"name": name}
    if extra:
        attrs.update(extra)
    return json.dumps({"Type": "service", "Action": action,
                       "Actor": {"ID": sid, "Attributes": attrs}, "scope": "swarm",
                       "time": n // 10**9, "timeNano": n}, separators=(",", ":"))


# Lines every JSON decoder must survive.
POISON = [
    "{this is not json",
    "[1,2]",
    "null",
    '"just a string"',
    "{}",
    '{"Type":7}',
    '{"Type":"container","Action":"start"}',
    '{"Action":"start","timeNano":6}',
    '{"Type":"container","timeNano":7}',
    '{"Type":"container","Action":"start","timeNano":8}',
    '{"Type":"container","Action":"start","Actor":{"ID":"c1"},"timeNano":9}',
    '{"Type":"container","Action":"start","Actor":{"ID":"c1","Attributes":{"name":7}},"timeNano":10}',
    '{"Type":"container","Action":"create","Actor":null,"timeNano":11}',
    '{"Type":"container","Action":"create","Actor":{"ID":"","Attributes":{"name":"e"}},"timeNano":12}',
    '{"Type":"container","Action":42,"Actor":{"ID":"y","Attributes":{"name":"num"}},"timeNano":13}',
    '{"Type":"container","Action":"create","Actor":{"ID":"z","Attributes":{"name":"z"}},"timeNano":"soon"}',
    '{"Type":"container","Action":"create","Actor":{"ID":"z","Attributes":{"name":"z"}},"timeNano":1.5e3}',
    '{"Type":"container","Action":"create","Actor":{"ID":"z","Attributes":{"name":"z"}},"timeNano":-5}',
    '{"Type":"container","Action":"create","Actor":{"ID":"z","Attributes":{"name":"z"}},"time":9223372036854775807}',
    '{"Type":"container","Action":"create","Actor":{"ID":"z","Attributes":{"name":"z"}},"timeNano":99999999999999999999999}',
    '{"Type":"container","Type":"container","Action":"create","Action":"die","Actor":{"ID":"d","Attributes":{"name":"dup"}},"timeNano":14}',
    '{"Type":"container","Action":"create","Actor":{"ID":"u","Attributes":{"name":"\\u0000\\ud800\\/web","app":"\\ud83d\\ude00"}},"timeNano":15}',
    '{"Type":"container","Action":"create","Actor":{"ID":"u","Attributes":{"name":"/"}},"timeNano":16}',
    "\x00\x01binary",
    "   ",
    "\r",
    "[" * 200 + "]" * 200,
    '{"a":' * 200 + "1" + "}" * 200,
    '{"Type":"container","Action":"create","Actor":{"ID":"x","Attributes":{"name":"x","big":' + "[0," * 64 + "0" + "]" * 64 + "}},\"timeNano\":17}",
]

UNKNOWN = [
    '{"Type":"network","Action":"connect","Actor":{"ID":"n1","Attributes":{"container":"c1","name":"bridge","type":"bridge"}},"scope":"local","time":1796012924,"timeNano":1796012924361184687}',
    '{"status":"pull","id":"busybox:latest","Type":"image","Action":"pull","Actor":{"ID":"busybox:latest","Attributes":{"name":"busybox"}},"scope":"local","time":1796012924,"timeNano":1796012924361184688}',
    '{"Type":"volume","Action":"mount","Actor":{"ID":"v1","Attributes":{"container":"c1","destination":"/data","driver":"local"}},"scope":"local","time":1796012924,"timeNano":1796012924361184689}',
    '{"Type":"martian","Action":"land","timeNano":1796012924361184690}',
]


def event_seeds(target, make, kind_actions, unknown_actions, legacy, readiness=None):
    n = T0
    life = [make(a, "c0ffee01", "web", n + i) for i, a in enumerate(kind_actions)]
    write(target, "lifecycle", 0x00, 1, 0, lines(*life))
    write(target, "lifecycle-1byte-chunks", CHUNK1, 2, 0, lines(*life))
    write(target, "lifecycle-crlf-blank-lines", CHUNK4K, 3, 0,
          b"\r\n\r\n".join(l.encode() for l in life) + b"\r\n\n\n")
    write(target, "listed-resumed-labelled", 0x0e, 4, 0,
          lines(make(kind_actions[-1], "0123456789ab", "web", n - 10),
                make(kind_actions[1], "0123456789ab", "web", n + 1),
                make(kind_actions[-1], "0123456789ab", "web", n + 2)))
    write(target, "resumed-replay", 0x02, 5, 0,
          lines(*(make(a, "c0ffee02", "db", n - 3 + i) for i, a in enumerate(kind_actions))))
    write(target, "resumed-just-before-tail", 0x03, 6, 0, lines(*life))
    write(target, "poison", 0x00, 7, 0, lines(*POISON))
    write(target, "poison-1byte-chunks", CHUNK1, 8, 0, lines(*POISON))
    write(target, "unknown-types", 0x00, 9, 0, lines(*UNKNOWN))
    write(target, "unknown-actions", 0x04, 10, 0,
          lines(*(make(a, "0123456789ab", "web", n + i) for i, a in enumerate(unknown_actions))))
    write(target, "legacy-format", 0x00, 11, 0,
          lines(*(json.dumps({"status": a, "id": "c0ffee03", "from": "busybox", "time": 1796012924})
                  for a in kind_actions)))
    utf8 = [make("create", "c0ffee04", "web", n).encode().replace(b"web", b"w\xffe\xc3b"),
            b"\x80" + make("start", "c0ffee04", "web", n + 1).encode(),
            b'{"Type":"container","Action":"cr\xe9ate","Actor":{"ID":"c0ffee04","Attributes":{"name":"web"}},"timeNano":1}',
            b"\xed\xa0\x80\xf4\x90\x80\x80\xc0\xaf"]
    write(target, "invalid-utf8", 0x00, 12, 0, lines(*utf8))
    write(target, "invalid-utf8-split-chunks", CHUNK1, 13, 0, lines(*utf8))
    cut = [make(a, "c0ffee05", "web", n + i) for i, a in enumerate(kind_actions)]
    truncated = "".join(l[: len(l) * (k + 1) // (len(cut) + 1)] for k, l in enumerate(cut))
    write(target, "truncated-events", 0x00, 14, 0, truncated + "\n" + cut[0][:40])
    write(target, "truncated-no-newline", 0x20, 15, 0, cut[0][:-1])
    # Huge lines: 8 bytes repeated to 4 MiB without a newline; a line of
    # exactly the limit (128 * 8192 = 1 MiB), then just over (129 * 8192).
    write(target, "huge-line-4mib", CHUNK64K, 16, 0xFF, b"aaaaaaaa")
    write(target, "line-at-limit", CHUNK64K, 17, 0xF8, b"a" * 128)
    write(target, "line-just-over-limit", CHUNK64K, 18, 0xF8, b"a" * 129)
    write(target, "long-valid-json-line", CHUNK4K, 19, 0,
          lines(make("create", "c0ffee07", "big", n, {"pad": "x" * 15000})))
    write(target, "many-events", 0x20, 20, 0x00, lines(*(life * 7)))
    # Found by libFuzzer (docker_events): 4 MiB of 3-byte lines in 64 KiB
    # chunks left a drained step queue holding megabytes between chunks.
    write(target, "short-lines-burst", CHUNK64K, 16, 0xFF, b"aa\n\xffaal")
    if legacy:
        write(target, "engine-specific", 0x00, 21, 0, lines(*legacy))
    if readiness:
        # Readiness watched, the listed container's events (its check
        # unknown: its start asks for an inspection) and a new one's.
        write(target, "readiness-listed", READINESS | LISTED, 22, 0, lines(*readiness))
        write(target, "readiness-listed-1byte-chunks", READINESS | LISTED | CHUNK1, 23, 0,
              lines(*readiness))
        write(target, "readiness-unknown-actions", READINESS | LISTED, 24, 0,
              lines(*(make(a, "0123456789ab", "web", n + i) for i, a in enumerate(unknown_actions))))


def readiness_lines(make, health_events, die):
    n = T0
    listed, new = "0123456789ab", "c0ffee08"
    events = [("start", listed)] + [(h, listed) for h in health_events] + [
        ("pause", listed), ("unpause", listed), (die, listed), ("start", listed),
        ("create", new), ("start", new), ("pause", new), ("unpause", new),
        ("unpause", "c0ffee09")]
    out = []
    for i, (a, cid) in enumerate(events):
        if isinstance(a, tuple):
            out.append(make(a[0], cid, "web", n + i, top=a[1]))
        else:
            out.append(make(a, cid, "web", n + i))
    return out


event_seeds("docker_events", docker, ["create", "start", "kill", "die", "destroy"],
            ["exec_create", "exec_start: sh -c true", "exec_die", "health_status: healthy",
             "health_status: unhealthy", "pause", "unpause", "rename", "oom", "frobnicate",
             "attach", "resize", "update", "stop", "restart", "top", "commit", "prune"],
            [docker("create", "c0ffee06", "/web", T0),
             docker("destroy", "c0ffee06", "web", T0 + 1, {"exitCode": "0", "signal": "15"})],
            readiness_lines(docker, ["health_status: healthy", "health_status: unhealthy",
                                     "health_status: sideways", "health_status"], "die"))
event_seeds("podman_events", podman, ["create", "init", "start", "died", "cleanup", "remove"],
            ["init", "cleanup", "sync", "exited", "exec", "exec_died", "mount", "unmount",
             "checkpoint", "restore", "health_status", "frobnicate", "die", "destroy"],
            [json.dumps({"status": "create", "id": "b1", "from": "", "Type": "pod",
                         "Action": "create", "Actor": {"ID": "b1", "Attributes": {"name": "pod1"}},
                         "scope": "local", "time": 1, "timeNano": 1796012924000000000}),
             podman("died", "c0ffee06", "web", T0, {"containerExitCode": "137"}),
             podman("health_status", "c0ffee06", "web", T0 + 1, top={"HealthStatus": "healthy"})],
            readiness_lines(podman, [("health_status", {"HealthStatus": s})
                                     for s in ["starting", "healthy", "unhealthy"]], "died"))
event_seeds("swarm_events", service, ["create", "update", "update", "remove"],
            ["rollback", "frobnicate", "scale", "create"],
            [service("update", "kq2x9m3v0w4t", "web", T0, {"replicas.old": "1", "replicas.new": "0"}),
             service("update", "kq2x9m3v0w4t", "web", T0 + 1, {"replicas.old": "0", "replicas.new": "3"}),
             service("update", "kq2x9m3v0w4t", "web", T0 + 2, {"replicas.new": "-1"}),
             service("update", "kq2x9m3v0w4t", "web", T0 + 3, {"replicas.new": "lots"}),
             service("update", "kq2x9m3v0w4t", "web", T0 + 4, {"replicas.new": 3}),
             service("create", "../../containers/x", "evil", T0 + 5),
             service("create", "ab?c=1", "evil", T0 + 6),
             service("remove", "kq2x9m3v0w4t", "web", T0 + 7),
             service("remove", "kq2x9m3v0w4t", "web", T0 + 8),
             json.dumps({"Type": "node", "Action": "update", "Actor": {"ID": "n1", "Attributes": {"name": "node1", "state.old": "unknown", "state.new": "ready"}}, "scope": "swarm", "time": 1, "timeNano": T0 + 9}),
             json.dumps({"Type": "secret", "Action": "create", "Actor": {"ID": "s1", "Attributes": {"name": "pw"}}, "scope": "swarm", "time": 1, "timeNano": T0 + 10})])


# Kubernetes watch frames (the watch body; the list is the harness's).
def deploy(name, ns, uid, rv, replicas=1, kind="Deployment", labels=None, extra_spec=None):
    spec = {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if extra_spec:
        spec.update(extra_spec)
    meta = {"name": name, "namespace": ns, "uid": uid, "resourceVersion": str(rv),
            "generation": 1, "creationTimestamp": "2026-11-30T05:48:44Z",
            "labels": labels if labels is not None else {"app": name}}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec,
            "status": {"replicas": replicas or 0, "observedGeneration": 1}}


def frame(t, obj):
    return json.dumps({"type": t, "object": obj}, separators=(",", ":"))


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


BOOKMARK = frame("BOOKMARK", {"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"resourceVersion": "1200", "annotations": {"k8s.io/initial-events-end": "true"}}})
K = "k8s_watch"
life = [frame("ADDED", deploy("web", "shop", "u-web", 101)),
        frame("MODIFIED", deploy("web", "shop", "u-web", 102, replicas=0)),
        frame("MODIFIED", deploy("web", "shop", "u-web", 103, replicas=3)),
        BOOKMARK,
        frame("DELETED", deploy("web", "shop", "u-web", 104, replicas=3))]
write(K, "lifecycle", 0x00, 1, 0, lines(*life))
write(K, "lifecycle-1byte-chunks", CHUNK1, 2, 0, lines(*life))
write(K, "both-kinds-namespaced-selector", 0x0f, 3, 0,
      lines(frame("ADDED", deploy("db", "shop", "u-db", 105, kind="StatefulSet")),
            frame("MODIFIED", deploy("web", "shop", "u-listed", 106, replicas=None)),
            frame("DELETED", deploy("listed", "shop", "u-listed", 107))))
write(K, "expired-410", 0x00, 4, 0,
      lines(life[0], frame("ERROR", status(410, "Expired", "too old resource version: 1 (200)"))))
write(K, "error-500", 0x00, 5, 0,
      lines(life[0], frame("ERROR", status(500, "InternalError", "etcd is sad"))))
write(K, "error-not-status", 0x00, 6, 0,
      lines(frame("ERROR", {"kind": "Deployment"}), frame("ERROR", "boom"), frame("ERROR", None)))
k8s_poison = [
    "{this is not json", "[1,2]", "null", "{}", '{"type":"ADDED"}', '{"object":{}}',
    '{"type":"FROBNICATED","object":{"metadata":{"name":"x","namespace":"y"}}}',
    '{"type":"ADDED","object":{"metadata":{"name":"nons"}}}',
    '{"type":"ADDED","object":{"metadata":{"namespace":"noname"}}}',
    '{"type":"ADDED","object":{"metadata":7}}',
    '{"type":"ADDED","object":{"metadata":{"name":"x","namespace":"y","labels":{"a":7}}}}',
    '{"type":"ADDED","object":{"metadata":{"name":"x","namespace":"y"},"spec":{"replicas":"two"}}}',
    '{"type":"ADDED","object":{"metadata":{"name":"x","namespace":"y"},"spec":{"replicas":1.5}}}',
    '{"type":"ADDED","object":{"metadata":{"name":"x","namespace":"y"},"spec":{"replicas":-1}}}',
    '{"type":"ADDED","object":{"metadata":{"name":"x","namespace":"y"},"spec":{"replicas":99999999999999999999}}}',
    '{"type":"ADDED","object":{"metadata":{"name":"x","namespace":"y"},"spec":7}}',
    '{"type":"DELETED","object":{"metadata":{"name":"ghost","namespace":"y"}}}',
    '{"kind":"Status","apiVersion":"v1","status":"Failure","message":"a bare status","code":0}',
    '{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden","reason":"Forbidden","code":403}',
    "[" * 200 + "]" * 200,
    "   ", "\r",
]
write(K, "poison", 0x00, 7, 0, lines(*k8s_poison))
write(K, "poison-1byte-chunks", CHUNK1, 8, 0, lines(*k8s_poison))
write(K, "invalid-utf8", 0x00, 9, 0,
      lines(life[0].encode().replace(b'"web"', b'"w\xffb"', 1), b"\x80\x80", life[1]))
cut = "".join(l[: len(l) * (k + 1) // (len(life) + 1)] for k, l in enumerate(life))
write(K, "truncated-frames", 0x00, 10, 0, cut + "\n" + life[0][:50])
write(K, "truncated-no-newline", CHUNK4K, 11, 0, life[0][:-1])
write(K, "huge-line-4mib", CHUNK64K, 12, 0xFF, b"aaaaaaaa")
write(K, "many-frames", 0x20, 13, 0x00, lines(*(life * 5)))
write(K, "statefulset-in-deployment-watch", 0x01, 14, 0,
      lines(frame("ADDED", deploy("db", "shop", "u-db", 108, kind="StatefulSet",
                                  extra_spec={"serviceName": "db", "podManagementPolicy": "Parallel"}))))


# Readiness (flag 0x40): status changes as a controller writes them.
def ready(obj, generation, **status):
    obj["metadata"]["generation"] = generation
    obj["status"] = status
    return obj


READY = 0x40
ready_life = [
    frame("ADDED", ready(deploy("web", "shop", "u-web", 101, replicas=2), 1)),
    frame("MODIFIED", ready(deploy("web", "shop", "u-web", 102, replicas=2), 1,
                            observedGeneration=1, replicas=2, readyReplicas=2, availableReplicas=2)),
    frame("MODIFIED", ready(deploy("web", "shop", "u-web", 103, replicas=2), 1,
                            observedGeneration=1, replicas=2, readyReplicas=2, availableReplicas=1)),
    frame("MODIFIED", ready(deploy("web", "shop", "u-web", 104, replicas=3), 2,
                            observedGeneration=1, replicas=2, readyReplicas=2, availableReplicas=2)),
    frame("MODIFIED", ready(deploy("web", "shop", "u-web", 105, replicas=3), 2,
                            observedGeneration=2, replicas=3, readyReplicas=3, availableReplicas=3)),
    frame("MODIFIED", ready(deploy("web", "shop", "u-web", 106, replicas=0), 3,
                            observedGeneration=2, replicas=3, availableReplicas=3)),
    frame("ADDED", ready(deploy("db", "shop", "u-db", 107, kind="StatefulSet"), 1,
                         observedGeneration=1, replicas=1, readyReplicas=1)),
]
write(K, "readiness-lifecycle", READY | 0x05, 15, 0, lines(*ready_life))
ready_poison = [
    '{"type":"ADDED","object":{"metadata":{"name":"x","namespace":"y","generation":"one"},"spec":{"replicas":1},"status":{"availableReplicas":1}}}',
    '{"type":"MODIFIED","object":{"metadata":{"name":"x","namespace":"y","resourceVersion":"5"},"spec":{"replicas":1},"status":7}}',
    '{"type":"MODIFIED","object":{"metadata":{"name":"x","namespace":"y","resourceVersion":"6"},"spec":{"replicas":1},"status":{"availableReplicas":"1","observedGeneration":[0]}}}',
    '{"type":"MODIFIED","object":{"metadata":{"name":"x","namespace":"y","resourceVersion":"7","generation":1.5},"spec":{"replicas":1},"status":{"availableReplicas":-4,"observedGeneration":99999999999999999999}}}',
    '{"type":"MODIFIED","object":{"metadata":{"name":"x","namespace":"y","resourceVersion":"8"},"spec":{"replicas":1},"status":{"availableReplicas":{"a":[1,{"b":null}]},"conditions":[{"type":"Available"}]}}}',
    '{"type":"MODIFIED","object":{"metadata":{"name":"x","namespace":"y","resourceVersion":"9"},"spec":{"replicas":1},"status":null}}',
]
write(K, "readiness-poison", READY, 16, 0, lines(*ready_poison))
write(K, "readiness-off-poison", 0x00, 17, 0, lines(*ready_poison))
