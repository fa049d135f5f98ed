#!/usr/bin/env python3
"""Checks deploy/: the Kubernetes manifests, the systemd unit and the Prometheus config.

Usage: deploy_manifests_test.py LOOMD DEPLOY_DIR

 * Every YAML document parses (PyYAML, Debian's python3-yaml) and has apiVersion, kind and
   metadata.name of a known kind; every namespaced object is in the `loom` namespace.
 * The router is a Deployment + Service, the workers a StatefulSet (nvidia.com/gpu: 1 in
   its limits) + a headless Service (clusterIP: None) that the StatefulSet names as its
   serviceName; selectors match the pod labels; every Service port's targetPort is a
   container port of the pods it selects; probes name real container ports.
 * Flags: every --flag in a container command/args and in the unit's ExecStart is one
   loomd defines (read from the REAL binary's --helpfull), and loomd's own parser accepts
   each command line (`loomd ARGS --version` exits 0; absl checks names and values). The
   container ports equal --port / --metrics_port; --role is worker / router as the kind
   says; the router's --workers=dns:///NAME.NS.svc.cluster.local:PORT names the headless
   Service, its namespace and its grpc port.
 * `promtool check config` accepts the Prometheus config; its worker DNS name and its
   ports are the headless Service's, and its static targets use the real metrics ports.
Exits non-zero with every problem listed.
"""

import configparser
import glob
import os
import re
import shlex
import subprocess
import sys

import yaml

NAMESPACE = "loom"
KNOWN_KINDS = {"Namespace", "Service", "Deployment", "StatefulSet", "PersistentVolumeClaim",
               "ConfigMap", "Secret"}
PLACEMENTS = {"punica", "round_robin", "least_loaded"}

problems = []


def fail(msg):
    problems.append(msg)


def defined_flags(loomd):
    out = subprocess.run([loomd, "--helpfull"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True).stdout
    flags = set(re.findall(r"^\s+--([A-Za-z0-9_]+) \(", out, re.M))
    if "port" not in flags or "model" not in flags:
        sys.exit("FAIL: could not read loomd's flags from --helpfull:\n" + out[:2000])
    return flags


def flag_map(args):
    """{name: value} of --name=value / --name arguments (value None for bare flags)."""
    out = {}
    for a in args:
        if not a.startswith("--"):
            continue
        name, _, value = a[2:].partition("=")
        out[name] = value if _ else None
    return out


def check_flags(where, argv, flags, loomd):
    for name in flag_map(argv):
        bare = name[2:] if name.startswith("no") and name[2:] in flags else name
        if bare not in flags:
            fail("%s: --%s is not a loomd flag" % (where, name))
    # loomd's own parser: unknown names and malformed values (ints, durations, bools).
    r = subprocess.run([loomd] + [a for a in argv if a.startswith("--")] + ["--version"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode != 0:
        errors = [l for l in r.stdout.splitlines() if l.startswith("ERROR")]
        fail("%s: loomd rejects the command line: %s" % (where, "; ".join(errors) or r.stdout[:300]))


def load_docs(deploy):
    docs = []
    files = sorted(glob.glob(os.path.join(deploy, "k8s", "*.yaml")))
    if not files:
        sys.exit("FAIL: no manifests under %s/k8s" % deploy)
    for path in files:
        with open(path) as f:
            try:
                for d in yaml.safe_load_all(f):
                    if d is None:
                        continue
                    docs.append((os.path.basename(path), d))
            except yaml.YAMLError as e:
                fail("%s: YAML error: %s" % (path, e))
    return docs


def pod_template(doc):
    return doc.get("spec", {}).get("template", {})


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def container_ports(template):
    ports = {}
    for c in template.get("spec", {}).get("containers", []):
        for p in c.get("ports", []):
            ports[p.get("name")] = p["containerPort"]
            ports[p["containerPort"]] = p["containerPort"]
    return ports


def check_workload(fname, doc, flags, loomd, claims):
    kind, name = doc["kind"], doc["metadata"]["name"]
    where = "%s %s/%s" % (fname, kind, name)
    spec = doc.get("spec", {})
    tmpl = pod_template(doc)
    labels = tmpl.get("metadata", {}).get("labels", {})
    if not selects(spec.get("selector", {}).get("matchLabels"), labels):
        fail("%s: spec.selector.matchLabels does not match the pod template labels" % where)
    containers = tmpl.get("spec", {}).get("containers", [])
    if not containers:
        fail("%s: no containers" % where)
    for c in containers:
        cw = "%s container %s" % (where, c.get("name"))
        for field in ("name", "image"):
            if not c.get(field):
                fail("%s: missing %s" % (cw, field))
        cmd = c.get("command", []) + c.get("args", [])
        if not cmd or not cmd[0].endswith("loomd"):
            fail("%s: command must run loomd, got %r" % (cw, cmd[:1]))
        argv = [a for a in cmd if a.startswith("--")]
        check_flags(cw, argv, flags, loomd)
        fm = flag_map(argv)
        role = fm.get("role")
        want_role = {"StatefulSet": "worker", "Deployment": "router"}[kind]
        if role != want_role:
            fail("%s: --role=%s, expected %s for a %s" % (cw, role, want_role, kind))
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        for pname, flag in (("grpc", "port"), ("metrics", "metrics_port")):
            if pname not in ports:
                fail("%s: no container port named %s" % (cw, pname))
            elif str(ports[pname]) != str(fm.get(flag)):
                fail("%s: container port %s=%s but --%s=%s" % (cw, pname, ports[pname], flag,
                                                              fm.get(flag)))
        for h in ("host", "metrics_host"):
            if fm.get(h) != "0.0.0.0":
                fail("%s: --%s must be 0.0.0.0 in a pod (got %s)" % (cw, h, fm.get(h)))
        ann = tmpl.get("metadata", {}).get("annotations", {})
        if ann.get("prometheus.io/port") not in (None, str(ports.get("metrics"))):
            fail("%s: prometheus.io/port annotation differs from the metrics port" % cw)
        for probe in ("readinessProbe", "livenessProbe"):
            p = c.get(probe, {}).get("httpGet")
            if p and p.get("port") not in ports and p.get("port") not in ports.values():
                fail("%s: %s uses port %r, not a container port" % (cw, probe, p.get("port")))
        limits = c.get("resources", {}).get("limits", {})
        requests = c.get("resources", {}).get("requests", {})
        if kind == "StatefulSet":
            if str(limits.get("nvidia.com/gpu")) != "1":
                fail("%s: workers need resources.limits nvidia.com/gpu: 1" % cw)
            if "nvidia.com/gpu" in requests and requests["nvidia.com/gpu"] != limits.get("nvidia.com/gpu"):
                fail("%s: nvidia.com/gpu request differs from its limit" % cw)
        mounts = {m["name"] for m in c.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in tmpl.get("spec", {}).get("volumes", [])}
        for m in mounts - set(volumes):
            fail("%s: volumeMount %s has no volume" % (cw, m))
        for v in volumes.values():
            claim = v.get("persistentVolumeClaim", {}).get("claimName")
            if claim and claim not in claims:
                fail("%s: volume %s uses claim %s, which no manifest defines" % (where, v["name"], claim))
    return fm if containers else {}


def main():
    loomd, deploy = sys.argv[1], sys.argv[2]
    flags = defined_flags(loomd)
    docs = load_docs(deploy)
    by_kind = {}
    for fname, d in docs:
        for field in ("apiVersion", "kind", "metadata"):
            if field not in d:
                fail("%s: document without %s" % (fname, field))
        kind = d.get("kind")
        name = d.get("metadata", {}).get("name")
        if kind not in KNOWN_KINDS:
            fail("%s: unexpected kind %s" % (fname, kind))
        if not name:
            fail("%s: %s without metadata.name" % (fname, kind))
        if kind != "Namespace" and d.get("metadata", {}).get("namespace") != NAMESPACE:
            fail("%s: %s/%s is not in namespace %s" % (fname, kind, name, NAMESPACE))
        by_kind.setdefault(kind, []).append((fname, d))
    if problems:
        report()

    claims = {d["metadata"]["name"] for _, d in by_kind.get("PersistentVolumeClaim", [])}
    services = {d["metadata"]["name"]: d for _, d in by_kind.get("Service", [])}
    sts = by_kind.get("StatefulSet", [])
    deps = by_kind.get("Deployment", [])
    if len(sts) != 1 or len(deps) != 1:
        fail("expected one worker StatefulSet and one router Deployment, got %d and %d" %
             (len(sts), len(deps)))
        report()
    worker_flags = check_workload(sts[0][0], sts[0][1], flags, loomd, claims)
    router_flags = check_workload(deps[0][0], deps[0][1], flags, loomd, claims)

    # Services select pods of a workload and target its container ports.
    workloads = [d for _, d in sts + deps]
    for sname, svc in services.items():
        sel = svc.get("spec", {}).get("selector", {})
        targets = [w for w in workloads
                   if selects(sel, pod_template(w).get("metadata", {}).get("labels", {}))]
        if len(targets) != 1:
            fail("Service %s selects %d workloads (want 1)" % (sname, len(targets)))
            continue
        ports = container_ports(pod_template(targets[0]))
        for p in svc.get("spec", {}).get("ports", []):
            t = p.get("targetPort", p.get("port"))
            if t not in ports:
                fail("Service %s port %s: targetPort %r is not a container port of %s" %
                     (sname, p.get("name"), t, targets[0]["metadata"]["name"]))

    headless_name = sts[0][1]["spec"].get("serviceName")
    headless = services.get(headless_name)
    if headless is None:
        fail("StatefulSet serviceName %s is not a Service" % headless_name)
        report()
    if headless["spec"].get("clusterIP") != "None":
        fail("Service %s must be headless (clusterIP: None)" % headless_name)
    router_svc = [s for s in services.values()
                  if selects(s["spec"].get("selector", {}),
                             pod_template(deps[0][1]).get("metadata", {}).get("labels", {}))]
    if not router_svc:
        fail("no Service selects the router pods")
    headless_ports = {p.get("name"): p["port"] for p in headless["spec"].get("ports", [])}

    m = re.fullmatch(r"dns:///([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:(\d+)",
                     router_flags.get("workers") or "")
    if not m:
        fail("router --workers=%r is not dns:///SERVICE.NAMESPACE.svc.cluster.local:PORT" %
             router_flags.get("workers"))
    else:
        svc, ns, port = m.group(1), m.group(2), int(m.group(3))
        if svc != headless_name or ns != NAMESPACE:
            fail("router --workers names %s.%s, the headless Service is %s.%s" %
                 (svc, ns, headless_name, NAMESPACE))
        if port != headless_ports.get("grpc") or str(port) != str(worker_flags.get("port")):
            fail("router --workers port %d differs from the headless grpc port %s / worker --port %s"
                 % (port, headless_ports.get("grpc"), worker_flags.get("port")))
    if router_flags.get("placement") not in PLACEMENTS:
        fail("router --placement=%s is not one of %s" % (router_flags.get("placement"),
                                                          sorted(PLACEMENTS)))

    # systemd unit.
    unit_path = os.path.join(deploy, "systemd", "loomd.service")
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    try:
        unit.read(unit_path)
    except configparser.Error as e:
        fail("%s: %s" % (unit_path, e))
    for section, key in (("Unit", "Description"), ("Service", "ExecStart"),
                         ("Install", "WantedBy")):
        if not unit.has_option(section, key):
            fail("%s: [%s] %s missing" % (unit_path, section, key))
    unit_flags = {}
    if unit.has_option("Service", "ExecStart"):
        argv = shlex.split(unit.get("Service", "ExecStart"))
        if not argv[0].endswith("/loomd"):
            fail("%s: ExecStart must run loomd by absolute path" % unit_path)
        check_flags(unit_path + " ExecStart", argv[1:], flags, loomd)
        unit_flags = flag_map(argv[1:])

    # Prometheus.
    prom_path = os.path.join(deploy, "prometheus", "prometheus.yml")
    promtool = os.environ.get("PROMTOOL", "/usr/bin/promtool")
    if not os.access(promtool, os.X_OK):
        fail("%s not found: install Debian's 'prometheus' package" % promtool)
    else:
        r = subprocess.run([promtool, "check", "config", prom_path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode != 0:
            fail("promtool check config %s:\n%s" % (prom_path, r.stdout))
    with open(prom_path) as f:
        prom = yaml.safe_load(f)
    dns_names, static = [], []
    for job in prom.get("scrape_configs", []):
        for sd in job.get("dns_sd_configs", []):
            for n in sd.get("names", []):
                dns_names.append((n, sd.get("port")))
        for sc in job.get("static_configs", []):
            static.extend(sc.get("targets", []))
    want_dns = "%s.%s.svc.cluster.local" % (headless_name, NAMESPACE)
    if (want_dns, headless_ports.get("metrics")) not in dns_names:
        fail("prometheus: no dns_sd on %s port %s (the workers' metrics port); got %s" %
             (want_dns, headless_ports.get("metrics"), dns_names))
    router_metrics = ["%s.%s.svc.cluster.local:%s" % (s["metadata"]["name"], NAMESPACE, p["port"])
                      for s in router_svc for p in s["spec"]["ports"] if p.get("name") == "metrics"]
    if not set(router_metrics) & set(static):
        fail("prometheus: the router's metrics Service %s is not a static target" % router_metrics)
    if unit_flags and "localhost:%s" % unit_flags.get("metrics_port") not in static:
        fail("prometheus: localhost:%s (the unit's --metrics_port) is not a static target" %
             unit_flags.get("metrics_port"))
    report()


def report():
    if problems:
        print("FAIL: %d problem(s) in deploy/:" % len(problems))
        for p in problems:
            print("  - " + p)
        sys.exit(1)
    print("PASS: deploy/ manifests, unit and scrape config are consistent with loomd")
    sys.exit(0)


if __name__ == "__main__":
    main()
