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
    Job's completions.
The compose files (deploy/compose/*.yaml) get the flag check as well.

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


def container_argv(container):
    """The container's command line from `tern` on, or None if it runs no tern."""
    command = list(container.get("command") or [])
    args = [str(a) for a in container.get("args") or []]
    if not command:
        return ["tern"] + args  # the image's ENTRYPOINT
    if os.path.basename(command[0]) in ("sh", "bash") and "-c" in command:
        script = " ".join(command[command.index("-c") + 1:] + args[:1])
        tokens = shlex.split(script)
    else:
        tokens = command + args
    for i, token in enumerate(tokens):
        if os.path.basename(token) == "tern":
            return tokens[i:]
    return None


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
    """Flags, settings and ports of each tern container in one pod template."""
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
        settings = {}
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
                    settings[key[5:].lower()] = value
        for var in container.get("env") or []:
            check_variable(ov, where, role, var["name"], known)
            if var["name"].startswith("TERN_") and "value" in var:
                settings[var["name"][5:].lower()] = str(var["value"])
        for name, value in arg_flags(argv[2:]).items():
            if name not in known:
                ov.problem(where, f"argument --{name} is not a flag of `tern {role}`")
            elif value is not None and "$" not in value:
                settings[name] = value
        check_ports(ov, where, doc, role, container, settings, volumes, services)


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


def check_ports(ov, where, doc, role, container, settings, volumes, services):
    declared = {p["containerPort"]: p.get("name") for p in container.get("ports") or []}
    by_name = {name: port for port, name in declared.items() if name}
    spec = cluster_spec(ov, where, container, settings, volumes)
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
        for kind in ("grpc", "tcpSocket", "httpGet"):
            if kind not in probe:
                continue
            port = probe[kind].get("port")
            port = by_name.get(port, port)
            if port not in declared or (listen and port not in listen):
                ov.problem(where, f"{probe_name} port {probe[kind].get('port')} is not the "
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


def check_overlay(ov):
    services = {s["metadata"]["name"]: s for s in ov.of_kind("Service")}
    for doc, template in ov.workloads():
        check_workload(ov, doc, template, services)
    check_services(ov)
    return ov.problems


def render(kubectl, directory):
    run = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"`kubectl kustomize {directory}` failed:\n{run.stderr}")
    return list(yaml.safe_load_all(run.stdout))


# ---- compose files: the flag check ----

def interpolate(value):
    """${VAR:-default} and ${VAR} as compose does, without the shell's values."""
    return re.sub(r"\$\{(\w+)(?::?-([^}]*))?\}", lambda m: m.group(2) or "", value)


def load_compose(path):
    with open(path) as f:
        return yaml.safe_load(f)  # resolves the << merge keys


def check_compose(path, compose, flags):
    problems = []
    for name, service in (compose.get("services") or {}).items():
        entrypoint = service.get("entrypoint") or ["tern"]
        argv = entrypoint + [str(a) for a in service.get("command") or []]
        tern = [i for i, token in enumerate(argv) if os.path.basename(token) == "tern"]
        if not tern or tern[-1] + 1 >= len(argv):
            problems.append(f"{path}: service {name}: runs no tern role")
            continue
        role = argv[tern[-1] + 1]
        if role not in flags:
            problems.append(f"{path}: service {name}: `tern {role}` is not a role")
            continue
        env = service.get("environment") or {}
        if isinstance(env, list):
            env = dict(e.partition("=")[::2] for e in env)
        for var in env:
            if var.startswith("TERN_") and var not in NON_FLAG_VARS and \
                    var[5:].lower() not in flags[role]:
                problems.append(f"{path}: service {name}: {var} is not a flag of `tern {role}`")
        for flag in arg_flags(argv[tern[-1] + 2:]):
            if flag not in flags[role]:
                problems.append(f"{path}: service {name}: --{flag} is not a flag of `tern {role}`")
        for var, value in env.items():
            if var in ("TERN_PS", "TERN_GLOBAL") and value:
                for address in interpolate(str(value)).split(","):
                    host = address.rpartition(":")[0]
                    if host not in compose["services"]:
                        problems.append(f"{path}: service {name}: {var} names {host}, no service")
    return problems


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
    ]


def compose_breakages():
    """(what, compose file, mutate(compose), text the report must contain)."""
    def bad_env(compose):
        compose["services"]["worker-0"]["environment"]["TERN_BATCHSIZE"] = "32"

    def bad_role(compose):
        compose["services"]["ps-0"]["command"] = ["shard"]

    def bad_ps(compose):
        compose["services"]["lps-0"]["environment"]["TERN_GLOBAL"] = "gs:50060"

    return [
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
    for name in sorted(os.listdir(compose_dir)):
        if name.endswith(".yaml"):
            path = os.path.join(compose_dir, name)
            found = check_compose(path, load_compose(path), flags)
            print(f"compose {name}: {len(found)} problems")
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
        for what, name, mutate, expected in compose_breakages():
            compose = load_compose(os.path.join(compose_dir, name))
            mutate(compose)
            found = check_compose(name, compose, flags)
            hit = [p for p in found if expected in p]
            print(f"self-test: {what}: " + (f"caught: {hit[0]}" if hit else f"MISSED (got {found})"))
            missed += not hit
        if missed:
            return 1
    print("k8s_manifest_test: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
