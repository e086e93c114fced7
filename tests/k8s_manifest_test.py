#!/usr/bin/env python3
"""Checks tern's deployment manifests against the binary they run.

Renders every overlay under deploy/k8s/overlays with `kubectl kustomize`
and fails when, in a rendered overlay:
  - a TERN_* variable (env, or a ConfigMap given through envFrom) or a
    container argument is not a flag of that role (`tern <role> --help`);
  - a Service selector matches no pod template;
  - a port disagrees: a listen address, the cluster spec's shard ports, a
    containerPort, a probe, a Service's targetPort or an address's port;
  - a --ps, --global or cluster-spec address names no Service (or, for
    pod.service names, no pod of that Service's StatefulSet);
  - the cluster spec disagrees with the StatefulSet's replicas or the
    Job's completions;
  - plaintext is not explicit (DESIGN section 7): a server that listens
    beyond loopback (0.0.0.0) must have either its TLS files
    (TERN_TLS_CERT, TERN_TLS_KEY, TERN_TLS_CA) or TERN_INSECURE=1, never
    both, or it refuses to start; a role that crosses data centers (the
    global server, an LPS) must have TLS and no TERN_INSECURE at all;
  - TLS is half wired: a container without TLS in an overlay whose servers
    have it; TLS files on no mounted Secret, or on an optional one; a
    certificate that is not the container's own role's (ps-, lps-,
    worker-, global), a key that is not its certificate's; a server with
    TLS whose TERN_RUN_ID is missing or differs from the workers';
  - a $(VAR) in an env value names no variable defined before it in the
    list (Kubernetes then leaves it unexpanded).
The compose files (deploy/compose/*.yaml) get the flag check and the
plaintext rule as well; each TLS override (tls-<file>.yaml) is merged onto
its file as compose merges it and must give every service its TLS files,
every server TERN_INSECURE "0" and the workers' run id.

--self_test then breaks the rendered manifests on purpose, one way at a
time, and fails unless each breakage is reported: the check must be able
to fail.

  k8s_manifest_test.py --tern BIN --kubectl KUBECTL --deploy DIR [--self_test]
"""
import argparse
import copy
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

ROLES = ("ps", "worker", "global", "health")
WORKLOADS = ("StatefulSet", "Deployment", "Job", "DaemonSet", "ReplicaSet")
# Variables the images' scripts read that are no flag (deploy/docker/tern-shape).
NON_FLAG_VARS = {"TERN_WAN_MBIT"}


def role_flags(tern):
    """{role: set of flag names}, from each subcommand's --help."""
    flags = {}
    for role in ROLES:
        run = subprocess.run([tern, role, "--help"], capture_output=True, text=True)
        # A binary without the subcommand prints the top-level help.
        if run.returncode != 0 or f"Usage: tern {role}" not in run.stdout:
            if role == "health":  # binaries before the health service
                continue
            raise SystemExit(f"`tern {role} --help` failed: {run.stderr.strip()}")
        names = set()
        for line in run.stdout.splitlines():
            # CLI11: "  -h,--help", "  --listen TEXT ...": the option column.
            match = re.match(r"\s+(?:-\w,\s*)?--([a-z][a-z0-9_]*)", line)
            if match:
                names.add(match.group(1))
        names.discard("help")
        if not names:
            raise SystemExit(f"no flags found in `tern {role} --help`")
        flags[role] = names
    return flags


class Overlay:
    """One rendered overlay and the problems found in it."""

    def __init__(self, name, docs, flags):
        self.name = name
        self.docs = [d for d in docs if d]
        self.flags = flags
        self.problems = []
        # One record per tern container (check_workload).
        self.containers = []

    def problem(self, where, message):
        self.problems.append(f"{self.name}: {where}: {message}")

    def find(self, kind, name):
        for doc in self.docs:
            if doc.get("kind") == kind and doc["metadata"]["name"] == name:
                return doc
        return None

    def of_kind(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def workloads(self):
        for doc in self.docs:
            if doc.get("kind") in WORKLOADS:
                yield doc, doc["spec"]["template"]
            elif doc.get("kind") == "Pod":
                yield doc, doc


def tern_argv(tokens):
    """The command line `tokens` runs, from `tern` on, or None if it runs no
    tern. A shell's -c script (whose arguments are $0, ...) is split into
    words; a wrapper (tern-shape -- tern ...) is looked through."""
    tokens = [str(t) for t in tokens]
    if tokens and os.path.basename(tokens[0]) in ("sh", "bash") and "-c" in tokens:
        script = tokens[tokens.index("-c") + 1:][:1]
        tokens = shlex.split(script[0]) if script else []
    for i, token in enumerate(tokens):
        if os.path.basename(token.rstrip(";")) == "tern":
            return tokens[i:]
    return None


def container_argv(container):
    """The container's command line from `tern` on, or None if it runs no tern."""
    command = list(container.get("command") or [])
    args = [str(a) for a in container.get("args") or []]
    if not command:
        return ["tern"] + args  # the image's ENTRYPOINT
    return tern_argv(command + args)


def arg_flags(argv):
    """{flag: value or None} for the --flag[=value] tokens of argv."""
    given = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("--"):
            name, eq, value = token[2:].partition("=")
            if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                value = argv[i + 1]
                i += 1
            given[name] = value if (eq or value) else None
        i += 1
    return given


def split_address(address):
    host, _, port = address.rpartition(":")
    return host, int(port) if port.isdigit() else None


def check_workload(ov, doc, template, services):
    """Flags, settings, ports and transport of each tern container in one pod
    template; each is also recorded in ov.containers for the checks that
    span containers (check_overlay)."""
    kind_name = f"{doc['kind']}/{doc['metadata']['name']}"
    spec = template["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    for container in spec.get("containers") or []:
        where = f"{kind_name} container {container['name']}"
        argv = container_argv(container)
        if argv is None:
            continue
        if len(argv) < 2 or argv[1] not in ov.flags:
            ov.problem(where, f"runs `{' '.join(argv[:2])}`, not a tern role")
            continue
        role = argv[1]
        known = ov.flags[role]
        # settings: the flags' values where they are known; raw: also those
        # that Kubernetes or a shell fills in ($(VAR), $g); given: every flag
        # set at all (a value from a fieldRef is unknown here).
        settings, raw, given = {}, {}, set()
        # Lowest precedence first: ConfigMaps through envFrom, env, arguments.
        for source in container.get("envFrom") or []:
            ref = source.get("configMapRef")
            if not ref:
                continue
            config_map = ov.find("ConfigMap", ref["name"])
            if config_map is None:
                if not ref.get("optional"):
                    ov.problem(where, f"envFrom ConfigMap {ref['name']} does not exist")
                continue
            for key, value in (config_map.get("data") or {}).items():
                check_variable(ov, f"{where} (ConfigMap {ref['name']})", role, key, known)
                if key.startswith("TERN_"):
                    settings[key[5:].lower()] = raw[key[5:].lower()] = value
                    given.add(key[5:].lower())
        for var in container.get("env") or []:
            check_variable(ov, where, role, var["name"], known)
            if not var["name"].startswith("TERN_"):
                continue
            name = var["name"][5:].lower()
            given.add(name)
            value = env_value(ov, where, var)
            if value is not None:
                raw[name] = value
                if "$(" not in value:
                    settings[name] = value
        for name, value in arg_flags(argv[2:]).items():
            if name not in known:
                ov.problem(where, f"argument --{name} is not a flag of `tern {role}`")
                continue
            given.add(name)
            if value is not None:
                raw[name] = value
                if "$" not in value:
                    settings[name] = value
        check_env_order(ov, where, container)
        cluster = cluster_spec(ov, where, container, settings, volumes)
        check_ports(ov, where, doc, role, container, settings, cluster, services)
        record = {"where": where, "role": role, "settings": settings, "raw": raw,
                  "given": given, "env": {v["name"]: v.get("value") for v in container.get("env") or []},
                  "listen": listen_address(role, settings, given)}
        check_transport(ov, record, container, volumes)
        ov.containers.append(record)


def env_value(ov, where, var):
    """An env entry's value: its value, or the key of the ConfigMap it names
    (None where only the pod knows it: a fieldRef, a Secret)."""
    if "value" in var:
        return str(var["value"])
    ref = (var.get("valueFrom") or {}).get("configMapKeyRef")
    if not ref:
        return None
    config_map = ov.find("ConfigMap", ref["name"])
    data = (config_map or {}).get("data") or {}
    if ref["key"] not in data:
        if not ref.get("optional"):
            ov.problem(where, f"{var['name']}: ConfigMap {ref['name']} has no key {ref['key']}")
        return None
    return str(data[ref["key"]])


VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def check_env_order(ov, where, container):
    """Kubernetes expands $(VAR) in an env value only from envFrom and the
    variables before it in the list; anything else stays as it is, and a
    file named ps-$(TERN_SHARD_INDEX).pem is then looked for literally."""
    defined = set()
    for source in container.get("envFrom") or []:
        ref = source.get("configMapRef")
        config_map = ov.find("ConfigMap", ref["name"]) if ref else None
        defined |= set((config_map or {}).get("data") or {})
    for var in container.get("env") or []:
        for name in VAR_REF.findall(str(var.get("value", ""))):
            if name not in defined:
                ov.problem(where, f"{var['name']}: $({name}) names no variable defined before "
                           f"it in the list, so Kubernetes does not expand it")
        defined.add(var["name"])
    for token in list(container.get("command") or []) + list(container.get("args") or []):
        for name in VAR_REF.findall(str(token)):
            if name not in defined:
                ov.problem(where, f"$({name}) in the command names no variable of the container")


TLS_FLAGS = ("tls_cert", "tls_key", "tls_ca")


def is_loopback(address):
    host = split_address(address)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.") or address.startswith("unix:")


def listen_address(role, settings, given):
    """Where a server listens: --listen, else (a shard given a cluster spec)
    0.0.0.0 at its entry's port, else --listen's default, 127.0.0.1."""
    if role not in ("ps", "global"):
        return None
    if "listen" in settings:
        return settings["listen"]
    if role == "ps" and "cluster_spec" in given:
        return "0.0.0.0:<spec port>"
    return "127.0.0.1:<default port>"


def is_true(value):
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def identity_stem(role, raw):
    """(regular expression, name) of the certificate stem a role's TLS files
    must have, as `tern certs` names them; the id is a literal or the
    variable that holds it (a $(VAR) or a shell's $var)."""
    index = r"(\d+|\$\({var}\)|\$\w+|\$\{{\w+\}})"
    if role == "global":
        return r"global", "global"
    if role == "ps" and raw.get("global"):
        return "lps-" + index.format(var="TERN_DATACENTER"), "lps-<d>"
    if role == "ps":
        return "ps-" + index.format(var="TERN_SHARD_INDEX"), "ps-<i>"
    return "worker-" + index.format(var="TERN_WORKER_ID"), "worker-<g>"


def secrets_of(volume):
    """[(Secret name, optional)] a volume shows: a secret volume's, or the
    secret sources of a projected one (cert-manager's Secrets mapped to
    `tern certs`'s file names, deploy/README.md)."""
    if "secret" in volume:
        return [(volume["secret"].get("secretName"), bool(volume["secret"].get("optional")))]
    sources = (volume.get("projected") or {}).get("sources") or []
    return [(src["secret"].get("name"), bool(src["secret"].get("optional")))
            for src in sources if "secret" in src]


def check_transport(ov, record, container, volumes):
    """Plaintext only explicitly, TLS only whole (DESIGN section 7)."""
    where, role, raw, given = record["where"], record["role"], record["raw"], record["given"]
    tls = [f for f in TLS_FLAGS if f in given]
    insecure = "insecure" in given and is_true(raw.get("insecure", "1"))
    record["tls"] = bool(tls)
    if tls and len(tls) < len(TLS_FLAGS):
        missing = [f"TERN_{f.upper()}" for f in TLS_FLAGS if f not in tls]
        ov.problem(where, f"TLS half given: no {', '.join(missing)} (mutual TLS needs all three)")
    crosses = role == "global" or (role == "ps" and bool(raw.get("global")))
    if role in ("ps", "global"):
        listen = record["listen"]
        if tls and insecure:
            ov.problem(where, "has both TLS files and TERN_INSECURE=1: tern refuses to start "
                       "with both (choose one)")
        elif not tls and not insecure and not is_loopback(listen):
            ov.problem(where, f"listens on {listen} in plaintext without TERN_INSECURE=1: "
                       "tern refuses to start; give it TLS files or TERN_INSECURE=1")
        if crosses and "insecure" in given:
            ov.problem(where, "crosses data centers (DESIGN section 7: TLS required on the WAN), "
                       "but sets TERN_INSECURE")
        if crosses and not tls:
            ov.problem(where, "crosses data centers without TLS")
        if tls and not raw.get("run_id"):
            ov.problem(where, "serves TLS without TERN_RUN_ID: it would admit any run its CA "
                       "signed for")
    if not tls:
        return
    mounts = container.get("volumeMounts") or []
    for flag in tls:
        path = raw.get(flag)
        if path is None:
            continue
        mount = next((m for m in mounts if path.startswith(m["mountPath"].rstrip("/") + "/")), None)
        secrets = secrets_of(volumes.get(mount["name"]) or {}) if mount else []
        if not secrets:
            ov.problem(where, f"--{flag} {path} is on no mounted Secret")
        for name, optional in secrets:
            if optional:
                ov.problem(where, f"--{flag} {path} is on the optional Secret {name}: make it "
                           "required, so that a pod without its certificates does not start")
    cert, key = raw.get("tls_cert"), raw.get("tls_key")
    if cert is not None:
        stem, label = identity_stem(role, raw)
        if not re.fullmatch(stem + r"\.pem", os.path.basename(cert)):
            ov.problem(where, f"--tls_cert {cert} is not this role's certificate ({label}.pem)")
        if key is not None and key != cert[:-len(".pem")] + ".key":
            ov.problem(where, f"--tls_key {key} is not the key of --tls_cert {cert}")


def check_variable(ov, where, role, name, known):
    if not name.startswith("TERN_") or name in NON_FLAG_VARS:
        return
    if name[5:].lower() not in known:
        ov.problem(where, f"{name} is not a flag of `tern {role}` (no --{name[5:].lower()})")


def cluster_spec(ov, where, container, settings, volumes):
    """The JSON cluster spec the container reads, from its ConfigMap."""
    path = settings.get("cluster_spec")
    if not path:
        return None
    for mount in container.get("volumeMounts") or []:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        volume = volumes.get(mount["name"]) or {}
        ref = volume.get("configMap")
        config_map = ov.find("ConfigMap", ref["name"]) if ref else None
        data = (config_map or {}).get("data") or {}
        key = path[len(prefix):]
        if key not in data:
            ov.problem(where, f"--cluster_spec {path}: no key {key} in the mounted ConfigMap")
            return None
        return json.loads(data[key])
    ov.problem(where, f"--cluster_spec {path} is on no mounted volume")
    return None


def check_ports(ov, where, doc, role, container, settings, spec, services):
    declared = {p["containerPort"]: p.get("name") for p in container.get("ports") or []}
    by_name = {name: port for port, name in declared.items() if name}
    listen = set()
    if "listen" in settings:
        listen.add(split_address(settings["listen"])[1])
    elif role == "ps" and spec:
        listen |= {split_address(a)[1] for a in spec.get("shards", [])}
    for port in listen:
        if port not in declared:
            ov.problem(where, f"listens on port {port}, but declares containerPorts {sorted(declared)}")
    for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = container.get(probe_name) or {}
        ports = [probe[kind].get("port") for kind in ("grpc", "tcpSocket", "httpGet") if kind in probe]
        # `tern health host:port` as an exec probe (it speaks TLS; the
        # kubelet's gRPC probe does not).
        health = tern_argv((probe.get("exec") or {}).get("command") or [])
        if health and len(health) > 2 and health[1] == "health":
            address = next((t for t in health[2:] if not t.startswith("-")), "")
            ports.append(split_address(address)[1])
        for probe_port in ports:
            port = by_name.get(probe_port, probe_port)
            if port not in declared or (listen and port not in listen):
                ov.problem(where, f"{probe_name} port {probe_port} is not the "
                           f"serving port {sorted(listen) or sorted(declared)}")
    # Addresses this container dials.
    addresses = []
    if settings.get("ps"):
        addresses += [("--ps", a) for a in settings["ps"].split(",")]
    if role == "worker" and spec and "ps" not in settings:
        addresses += [("cluster spec", a) for a in spec.get("shards", [])]
    if role == "ps" and spec:
        addresses += [("cluster spec", a) for a in spec.get("shards", [])]
    if settings.get("global"):
        addresses.append(("--global", settings["global"]))
    for what, address in addresses:
        check_address(ov, where, what, address, services)
    # The spec's sizes against the controllers that run the roles.
    if spec and role == "ps" and doc["kind"] == "StatefulSet":
        replicas = doc["spec"].get("replicas", 1)
        if replicas != len(spec.get("shards", [])):
            ov.problem(where, f"{replicas} replicas, but the cluster spec lists "
                       f"{len(spec.get('shards', []))} shards")
    if spec and "num_workers" in settings and int(settings["num_workers"]) != spec.get("num_workers"):
        ov.problem(where, f"TERN_NUM_WORKERS is {settings['num_workers']}, but the cluster spec "
                   f"says {spec.get('num_workers')}")
    if spec and role == "worker" and doc["kind"] == "Job":
        workers = int(settings.get("num_workers", spec.get("num_workers", 0)))
        completions = doc["spec"].get("completions", 1)
        if completions != workers:
            ov.problem(where, f"{completions} completions, but num_workers is {workers}")


def check_address(ov, where, what, address, services):
    host, port = split_address(address)
    labels = host.split(".")
    # name, name.namespace, name.namespace.svc[.cluster.local]; pod.name[...]
    service = services.get(labels[0])
    pod = None
    if service is None and len(labels) > 1:
        service, pod = services.get(labels[1]), labels[0]
    if service is None:
        ov.problem(where, f"{what} address {address} names no Service")
        return
    name = service["metadata"]["name"]
    if pod is not None:
        owners = [s for s in ov.of_kind("StatefulSet") if s["spec"].get("serviceName") == name]
        pods = {f"{s['metadata']['name']}-{i}" for s in owners
                for i in range(s["spec"].get("replicas", 1))}
        if pod not in pods:
            ov.problem(where, f"{what} address {address}: no pod {pod} behind Service {name} "
                       f"(pods: {sorted(pods)})")
    ports = {p["port"] for p in service["spec"].get("ports") or []}
    if port not in ports:
        ov.problem(where, f"{what} address {address}: Service {name} has ports {sorted(ports)}")


def check_services(ov):
    templates = [(doc, t) for doc, t in ov.workloads()]
    for service in ov.of_kind("Service"):
        where = f"Service/{service['metadata']['name']}"
        selector = service["spec"].get("selector")
        if not selector:
            continue  # ExternalName, or endpoints given by hand
        matched = [t for _, t in templates
                   if selector.items() <= ((t.get("metadata") or {}).get("labels") or {}).items()]
        if not matched:
            ov.problem(where, f"selector {selector} matches no pod template")
            continue
        for port in service["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            for template in matched:
                container_ports = [p for c in template["spec"]["containers"]
                                   for p in c.get("ports") or []]
                if not any(target in (p["containerPort"], p.get("name")) for p in container_ports):
                    ov.problem(where, f"targetPort {target} is no containerPort of the pods "
                               f"it selects ({[p['containerPort'] for p in container_ports]})")
    for stateful in ov.of_kind("StatefulSet"):
        name = stateful["spec"].get("serviceName")
        service = ov.find("Service", name)
        if service is None or service["spec"].get("clusterIP") != "None":
            ov.problem(f"StatefulSet/{stateful['metadata']['name']}",
                       f"serviceName {name} is no headless Service")


def check_run(ov):
    """What spans containers: TLS everywhere or nowhere, one run id, and a
    geo worker's region (DATACENTER, which names its certificate) that of
    its LPS."""
    with_tls = [c["where"] for c in ov.containers if c["tls"]]
    for c in ov.containers:
        if with_tls and not c["tls"]:
            ov.problem(c["where"], f"has no TLS, but {with_tls[0]} has: mutual TLS needs every "
                       "role to present its certificate")
    workers = {c["raw"].get("run_id", "tern") for c in ov.containers if c["role"] == "worker"}
    for c in ov.containers:
        run_id = c["raw"].get("run_id")
        if c["role"] != "worker" and c["tls"] and run_id and workers and run_id not in workers:
            ov.problem(c["where"], f"TERN_RUN_ID {run_id}, but the workers run {sorted(workers)}: "
                       "it would refuse their certificates")
    lps_dc = {c["settings"].get("datacenter") for c in ov.containers
              if c["role"] == "ps" and c["raw"].get("global")}
    for c in ov.containers:
        region = c["env"].get("DATACENTER")
        if c["role"] == "worker" and region is not None and lps_dc and str(region) not in lps_dc:
            ov.problem(c["where"], f"DATACENTER {region}, but its LPS is data center {sorted(lps_dc)}")


def check_overlay(ov):
    services = {s["metadata"]["name"]: s for s in ov.of_kind("Service")}
    for doc, template in ov.workloads():
        check_workload(ov, doc, template, services)
    check_services(ov)
    check_run(ov)
    return ov.problems


def render(kubectl, directory):
    run = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"`kubectl kustomize {directory}` failed:\n{run.stderr}")
    return list(yaml.safe_load_all(run.stdout))


# ---- compose files: the flag check and the plaintext rule ----

def interpolate(value):
    """$$, ${VAR:-default} and ${VAR} as compose does, without the shell's values."""
    return re.sub(r"\$\$|\$\{(\w+)(?::?-([^}]*))?\}",
                  lambda m: "$" if m.group(0) == "$$" else (m.group(2) or ""), str(value))


def load_compose(path):
    with open(path) as f:
        return yaml.safe_load(f)  # resolves the << merge keys


def as_list(value):
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def service_env(service):
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.partition("=")[::2] for e in env)
    return {k: interpolate("" if v is None else v) for k, v in env.items()}


def mount_target(volume):
    """The container path of a compose volume ("source:target[:mode]")."""
    parts = interpolate(volume).split(":")
    return parts[1] if len(parts) > 1 else parts[0]


def merge_compose(base, override):
    """`override` (tls-<file>.yaml) merged onto `base` as docker compose
    merges a second -f file: environment by variable, volumes by target
    path, anything else replaced."""
    merged = copy.deepcopy(base)
    for name, service in (override.get("services") or {}).items():
        target = merged["services"].setdefault(name, {})
        for key, value in service.items():
            value = copy.deepcopy(value)
            if key == "environment":
                env = target.get("environment") or {}
                if isinstance(env, list):
                    env = dict(e.partition("=")[::2] for e in env)
                if isinstance(value, list):
                    value = dict(e.partition("=")[::2] for e in value)
                target["environment"] = {**env, **value}
            elif key == "volumes":
                paths = {mount_target(v) for v in value}
                kept = [v for v in target.get("volumes") or [] if mount_target(v) not in paths]
                target["volumes"] = kept + value
            else:
                target[key] = value
    return merged


def check_compose(path, compose, flags, tls=False):
    """The flag check and the plaintext rule on every service; with `tls`
    (an override merged in), every service must have its TLS files too."""
    problems = []
    runs = {}
    services = compose.get("services") or {}
    for name, service in services.items():
        where = f"{path}: service {name}"
        argv = tern_argv(as_list(service.get("entrypoint") or ["tern"]) + as_list(service.get("command")))
        argv = [interpolate(a) for a in argv] if argv else argv
        if not argv or len(argv) < 2:
            problems.append(f"{where}: runs no tern role")
            continue
        role = argv[1]
        if role not in flags:
            problems.append(f"{where}: `tern {role}` is not a role")
            continue
        env = service_env(service)
        for var in env:
            if var.startswith("TERN_") and var not in NON_FLAG_VARS and \
                    var[5:].lower() not in flags[role]:
                problems.append(f"{where}: {var} is not a flag of `tern {role}`")
        raw = {var[5:].lower(): value for var, value in env.items() if var.startswith("TERN_")}
        for flag, value in arg_flags(argv[2:]).items():
            if flag not in flags[role]:
                problems.append(f"{where}: --{flag} is not a flag of `tern {role}`")
            raw[flag] = "" if value is None else value
        for var, value in env.items():
            if var in ("TERN_PS", "TERN_GLOBAL") and value:
                for address in value.split(","):
                    host = address.rpartition(":")[0]
                    if host not in services:
                        problems.append(f"{where}: {var} names {host}, no service")
        problems += compose_transport(where, role, raw, env, service, tls)
        runs.setdefault(role, {})[name] = raw.get("run_id")
    # Servers under TLS require the workers' run in their certificates.
    worker_runs = {r or "tern" for r in (runs.get("worker") or {}).values()}
    for role in ("ps", "global"):
        for name, run_id in (runs.get(role) or {}).items():
            if tls and run_id is not None and worker_runs and run_id not in worker_runs:
                problems.append(f"{path}: service {name}: TERN_RUN_ID {run_id}, but the workers "
                                f"run {sorted(worker_runs)}")
    return problems


def compose_transport(where, role, raw, env, service, tls):
    """The plaintext rule of check_transport, for one compose service."""
    problems = []
    given = [f for f in TLS_FLAGS if raw.get(f)]
    insecure = is_true(raw.get("insecure", "0"))
    if role in ("ps", "global"):
        listen = raw.get("listen") or ("0.0.0.0:<spec port>" if raw.get("cluster_spec") else "127.0.0.1")
        if given and insecure:
            problems.append(f"{where}: has both TLS files and TERN_INSECURE=1: tern refuses to "
                            "start with both (an override must set TERN_INSECURE \"0\")")
        elif not given and not insecure and not is_loopback(listen):
            problems.append(f"{where}: listens on {listen} in plaintext without TERN_INSECURE=1: "
                            "tern refuses to start")
        if tls and raw.get("tls_cert") and not raw.get("run_id"):
            problems.append(f"{where}: serves TLS without TERN_RUN_ID")
    if given and len(given) < len(TLS_FLAGS):
        problems.append(f"{where}: TLS half given ({', '.join(given)})")
    if tls and not given:
        problems.append(f"{where}: has no TLS files with the TLS override")
    if not given:
        return problems
    mounts = [mount_target(v) for v in service.get("volumes") or []]
    for flag in given:
        if not any(raw[flag].startswith(m.rstrip("/") + "/") for m in mounts):
            problems.append(f"{where}: --{flag} {raw[flag]} is on no mounted volume")
    cert, key = raw.get("tls_cert"), raw.get("tls_key")
    if cert:
        stem, _ = identity_stem(role, raw)
        number = re.search(r"-(\d+)\.pem$", cert)
        own = {"ps": raw.get("datacenter") if raw.get("global") else raw.get("shard_index"),
               "worker": None if "DATACENTER" in env else raw.get("worker_id")}.get(role)
        if not re.fullmatch(stem + r"\.pem", os.path.basename(cert)) or \
                (number and own is not None and number.group(1) != own):
            problems.append(f"{where}: --tls_cert {cert} is not this `tern {role}`'s own "
                            "certificate")
        if key and key != cert[:-len(".pem")] + ".key":
            problems.append(f"{where}: --tls_key {key} is not the key of --tls_cert {cert}")
    return problems


def override_problems(path, base, override):
    """A TLS override must cover every service of its file, and must not
    set what podman-compose 1.0.3 would append to instead of replacing (a
    command; an entrypoint the file already has)."""
    problems = []
    services = override.get("services") or {}
    for name in base.get("services") or {}:
        if name not in services:
            problems.append(f"{path}: service {name} of the base file is not in the override")
    for name, service in services.items():
        if name not in (base.get("services") or {}):
            problems.append(f"{path}: service {name} is in no base file")
            continue
        if "command" in service or ("entrypoint" in service and
                                    "entrypoint" in base["services"][name]):
            problems.append(f"{path}: service {name} replaces a command, which podman-compose "
                            "1.0.3 appends instead")
    return problems


def compose_files(compose_dir):
    """(name, base file or None) of each compose file: tls-<file>.yaml
    overrides <file>."""
    names = sorted(n for n in os.listdir(compose_dir) if n.endswith(".yaml"))
    return [(n, n[len("tls-"):] if n.startswith("tls-") else None) for n in names]


def check_compose_file(compose_dir, name, base_name, flags, mutate=None):
    """check_compose on one file, an override merged onto its base; `mutate`
    changes the named file first (the self-test)."""
    compose = load_compose(os.path.join(compose_dir, name))
    if mutate:
        mutate(compose)
    if base_name is None:
        return check_compose(name, compose, flags)
    base_path = os.path.join(compose_dir, base_name)
    if not os.path.exists(base_path):
        return [f"{name}: overrides {base_name}, which does not exist"]
    base = load_compose(base_path)
    label = f"{base_name} + {name}"
    return override_problems(name, base, compose) + \
        check_compose(label, merge_compose(base, compose), flags, tls=True)


# ---- self-test: every breakage must be caught ----

def container_of(docs, kind, name):
    for doc in docs:
        if doc.get("kind") == kind and doc["metadata"]["name"] == name:
            return doc, doc["spec"]["template"]["spec"]["containers"][0]
    raise KeyError(f"{kind}/{name}")


def env_var(container, name):
    for var in container["env"]:
        if var["name"] == name:
            return var
    raise KeyError(name)


def breakages():
    """(what, overlay, mutate(docs), text the report must contain)."""
    def bad_env(docs):
        container_of(docs, "Job", "tern-worker")[1]["env"].append(
            {"name": "TERN_BATCHSIZE", "value": "32"})

    def bad_arg(docs):
        container_of(docs, "StatefulSet", "tern-ps")[1]["args"].append("--shards=2")

    def bad_config_map(docs):
        for doc in docs:
            if doc["kind"] == "ConfigMap" and doc["metadata"]["name"].startswith("tern-job"):
                doc["data"]["TERN_EPOCHS"] = "3"

    def bad_selector(docs):
        for doc in docs:
            if doc["kind"] == "Service" and doc["metadata"]["name"] == "tern-ps":
                doc["spec"]["selector"]["app.kubernetes.io/component"] = "shard"

    def bad_probe(docs):
        container_of(docs, "StatefulSet", "tern-ps")[1]["readinessProbe"]["grpc"]["port"] = 50052

    def bad_service_port(docs):
        for doc in docs:
            if doc["kind"] == "Service" and doc["metadata"]["name"] == "tern-ps":
                doc["spec"]["ports"][0]["port"] = 50052

    def bad_spec_host(docs):
        for doc in docs:
            if doc["kind"] == "ConfigMap" and doc["metadata"]["name"].startswith("tern-cluster"):
                spec = json.loads(doc["data"]["cluster.json"])
                spec["shards"][1] = "tern-shard-1.tern-shard:50051"
                doc["data"]["cluster.json"] = json.dumps(spec)

    def bad_replicas(docs):
        container_of(docs, "StatefulSet", "tern-ps")[0]["spec"]["replicas"] = 3

    def bad_global(docs):
        env_var(container_of(docs, "StatefulSet", "tern-ps")[1], "TERN_GLOBAL")["value"] = \
            "tern-gs:50060"

    def bad_global_port(docs):
        env_var(container_of(docs, "Deployment", "tern-global")[1], "TERN_LISTEN")["value"] = \
            "0.0.0.0:50061"

    def plaintext_shard(docs):
        container = container_of(docs, "StatefulSet", "tern-ps")[1]
        container["env"] = [v for v in container["env"] if v["name"] != "TERN_INSECURE"]

    def insecure_tls_shard(docs):
        container_of(docs, "StatefulSet", "tern-ps")[1]["env"].append(
            {"name": "TERN_INSECURE", "value": "1"})

    def insecure_global(docs):
        container = container_of(docs, "Deployment", "tern-global")[1]
        container["env"] = [v for v in container["env"] if not v["name"].startswith("TERN_TLS_")]
        container["env"].append({"name": "TERN_INSECURE", "value": "1"})

    def optional_secret(docs):
        for volume in container_of(docs, "StatefulSet", "tern-ps")[0]["spec"]["template"]["spec"]["volumes"]:
            if volume["name"] == "tls":
                volume["secret"]["optional"] = True

    def index_after_use(docs):
        container = container_of(docs, "StatefulSet", "tern-ps")[1]
        index = env_var(container, "TERN_SHARD_INDEX")
        container["env"].remove(index)
        container["env"].append(index)

    def plaintext_worker(docs):
        container = container_of(docs, "Job", "tern-worker")[1]
        container["env"] = [v for v in container["env"] if not v["name"].startswith("TERN_TLS_")]

    def lps_as_shard(docs):
        container = container_of(docs, "StatefulSet", "tern-ps")[1]
        env_var(container, "TERN_TLS_CERT")["value"] = "/etc/tern/tls/ps-0.pem"
        env_var(container, "TERN_TLS_KEY")["value"] = "/etc/tern/tls/ps-0.key"

    def other_run(docs):
        container = container_of(docs, "StatefulSet", "tern-ps")[1]
        container["env"] = [v for v in container["env"] if v["name"] != "TERN_RUN_ID"]
        container["env"].append({"name": "TERN_RUN_ID", "value": "another-run"})

    return [
        ("an env variable that is no flag", "local", bad_env, "TERN_BATCHSIZE is not a flag"),
        ("an argument that is no flag", "local", bad_arg, "--shards is not a flag"),
        ("a ConfigMap variable that is no flag", "local", bad_config_map, "TERN_EPOCHS is not a flag"),
        ("a selector that matches nothing", "local", bad_selector, "matches no pod template"),
        ("a probe on the wrong port", "local", bad_probe, "readinessProbe port 50052"),
        ("a Service port the spec does not use", "local", bad_service_port, "has ports [50052]"),
        ("a spec address naming no Service", "local", bad_spec_host, "names no Service"),
        ("more shards than the spec lists", "local", bad_replicas, "3 replicas"),
        ("a --global naming no Service", "geo-region-1", bad_global, "names no Service"),
        ("a global server listening elsewhere", "geo-region-0", bad_global_port, "listens on port 50061"),
        ("a shard on 0.0.0.0 without TLS or TERN_INSECURE", "local", plaintext_shard,
         "in plaintext without TERN_INSECURE=1"),
        ("a shard with TLS and TERN_INSECURE=1", "local-tls", insecure_tls_shard,
         "has both TLS files and TERN_INSECURE=1"),
        ("a plaintext global server across data centers", "geo-region-0", insecure_global,
         "crosses data centers (DESIGN section 7: TLS required on the WAN), but sets TERN_INSECURE"),
        ("an optional TLS Secret", "geo-region-1", optional_secret, "is on the optional Secret tern-tls"),
        ("a $(VAR) before its variable", "local-tls", index_after_use,
         "$(TERN_SHARD_INDEX) names no variable defined before it"),
        ("a plaintext worker among TLS servers", "local-tls", plaintext_worker,
         "has no TLS, but"),
        ("an LPS with a shard's certificate", "geo-region-2", lps_as_shard,
         "is not this role's certificate (lps-<d>.pem)"),
        ("a server requiring another run", "local-tls", other_run,
         "TERN_RUN_ID another-run, but the workers run ['k8s']"),
    ]


def compose_breakages():
    """(what, compose file, mutate(compose), text the report must contain)."""
    def bad_env(compose):
        compose["services"]["worker-0"]["environment"]["TERN_BATCHSIZE"] = "32"

    def bad_role(compose):
        compose["services"]["ps-0"]["command"] = ["shard"]

    def bad_ps(compose):
        compose["services"]["lps-0"]["environment"]["TERN_GLOBAL"] = "gs:50060"

    def plaintext_shard(compose):
        del compose["services"]["ps-0"]["environment"]["TERN_INSECURE"]

    def insecure_override(compose):
        compose["services"]["ps-1"]["environment"]["TERN_INSECURE"] = "1"

    def override_without_worker(compose):
        del compose["services"]["worker-2-1"]

    def borrowed_certificate(compose):
        env = compose["services"]["worker-2"]["environment"]
        env["TERN_TLS_CERT"] = "/etc/tern/tls/worker-3.pem"
        env["TERN_TLS_KEY"] = "/etc/tern/tls/worker-3.key"

    return [
        ("a compose shard without TLS or TERN_INSECURE", "local.yaml", plaintext_shard,
         "ps-0: listens on 0.0.0.0:<spec port> in plaintext without TERN_INSECURE=1"),
        ("a TLS override that leaves TERN_INSECURE on", "tls-local.yaml", insecure_override,
         "ps-1: has both TLS files and TERN_INSECURE=1"),
        ("a TLS override that misses a worker", "tls-geo.yaml", override_without_worker,
         "worker-2-1: has no TLS files with the TLS override"),
        ("a worker with another's certificate", "tls-local.yaml", borrowed_certificate,
         "worker-2: --tls_cert /etc/tern/tls/worker-3.pem is not this `tern worker`'s own"),
        ("a compose variable that is no flag", "local.yaml", bad_env,
         "TERN_BATCHSIZE is not a flag of `tern worker`"),
        ("a compose command that is no role", "local.yaml", bad_role,
         "`tern shard` is not a role"),
        ("a compose --global naming no service", "geo.yaml", bad_ps, "names gs, no service"),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tern", required=True)
    parser.add_argument("--kubectl", default="kubectl")
    parser.add_argument("--deploy", required=True, help="the deploy/ folder")
    parser.add_argument("--self_test", action="store_true")
    args = parser.parse_args()

    flags = role_flags(args.tern)
    print("flags: " + ", ".join(f"tern {r} {len(f)}" for r, f in sorted(flags.items())))
    overlays_dir = os.path.join(args.deploy, "k8s", "overlays")
    rendered = {}
    problems = []
    for name in sorted(os.listdir(overlays_dir)):
        rendered[name] = render(args.kubectl, os.path.join(overlays_dir, name))
        found = check_overlay(Overlay(name, copy.deepcopy(rendered[name]), flags))
        kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in rendered[name] if d)
        print(f"overlay {name}: {len(kinds)} objects, {len(found)} problems ({', '.join(kinds)})")
        problems += found
    compose_dir = os.path.join(args.deploy, "compose")
    for name, base in compose_files(compose_dir):
        found = check_compose_file(compose_dir, name, base, flags)
        print(f"compose {name}" + (f" (merged onto {base})" if base else "") +
              f": {len(found)} problems")
        problems += found
    for p in problems:
        print("PROBLEM: " + p)
    if problems:
        return 1

    if args.self_test:
        missed = 0
        for what, overlay, mutate, expected in breakages():
            docs = copy.deepcopy(rendered[overlay])
            mutate(docs)
            found = check_overlay(Overlay(overlay, docs, flags))
            hit = [p for p in found if expected in p]
            print(f"self-test: {what}: " + (f"caught: {hit[0]}" if hit else f"MISSED (got {found})"))
            missed += not hit
        bases = dict(compose_files(compose_dir))
        for what, name, mutate, expected in compose_breakages():
            found = check_compose_file(compose_dir, name, bases[name], flags, mutate)
            hit = [p for p in found if expected in p]
            print(f"self-test: {what}: " + (f"caught: {hit[0]}" if hit else f"MISSED (got {found})"))
            missed += not hit
        if missed:
            return 1
    print("k8s_manifest_test: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
