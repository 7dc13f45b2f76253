"""Static checks of deploy/: the Dockerfile, the compose file, redis.conf and the k8s manifests.

No container engine runs where the tests run, so these tests read the files: every YAML parses;
images are pinned; every compose service is health-checked or waits for Redis to be healthy;
every Kubernetes workload has readiness and liveness probes and resource limits, probing ports
its process serves; the environment variables are settings the code reads; and every command,
probe and health check starts a module, app or import that exists in the repository.

The Redis Cluster variants are read the same way: ``compose.cluster.yaml`` merged over
``compose.yaml`` by Compose's rules (``merged``), and ``deploy/k8s-cluster``'s manifests.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import AliasChoices

from services.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
K8S_CLUSTER = DEPLOY / "k8s-cluster"
CLUSTER_SCRIPTS = ("cluster-node.sh", "cluster-init.sh")
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet"}
OURS = ("CONQUIAN_", "REDIS_")
"""Environment variable prefixes that belong to this project (PYTHON*, PATH, … are not)."""


# --- reading the files ------------------------------------------------------------------------


class Override:
    """A value tagged ``!override`` in a Compose file: it replaces what the files before said."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Reset:
    """A value tagged ``!reset``: the key is removed from what the files before said."""


class ComposeLoader(yaml.SafeLoader):
    """Safe YAML with Compose's merge tags ``!override`` and ``!reset``."""


def _construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


ComposeLoader.add_constructor("!override", lambda ld, node: Override(_construct(ld, node)))
ComposeLoader.add_constructor("!reset", lambda ld, node: Reset())


def documents(path: Path) -> list[Any]:
    """The YAML documents of a file, empty ones left out."""
    return [doc for doc in yaml.load_all(path.read_text(), ComposeLoader) if doc is not None]


REPLACED = {("command",), ("entrypoint",), ("healthcheck", "test")}
"""Sequences that a later Compose file replaces rather than extends."""


def merged(base: Any, over: Any, path: tuple[str, ...] = ()) -> Any:
    """``over`` merged onto ``base`` by Compose's rules: mappings merge key by key, sequences
    append (``command``, ``entrypoint`` and ``healthcheck.test`` are replaced), ``!override``
    replaces, ``!reset`` removes, any other value replaces."""
    if isinstance(over, Override):
        return over.value
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            if isinstance(value, Reset):
                out.pop(key, None)
            elif key in out:
                out[key] = merged(out[key], value, (*path, str(key)))
            else:
                out[key] = merged(None, value, (*path, str(key)))
        return out
    replaced = path[-1:] in REPLACED or path[-2:] in REPLACED
    if isinstance(base, list) and isinstance(over, list) and not replaced:
        return base + over
    return over


def enabled(project: dict[str, Any], profiles: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The project as ``up`` runs it: services of a profile not in ``profiles`` left out."""
    services = {
        name: service
        for name, service in project["services"].items()
        if not service.get("profiles") or profiles & set(service["profiles"])
    }
    return {**project, "services": services}


@cache
def compose() -> dict[str, Any]:
    [doc] = documents(DEPLOY / "compose.yaml")
    assert isinstance(doc, dict)
    return doc


@cache
def compose_cluster() -> dict[str, Any]:
    """``docker compose -f compose.yaml -f compose.cluster.yaml``: what ``up`` starts."""
    [over] = documents(DEPLOY / "compose.cluster.yaml")
    return enabled(merged(compose(), over))


def compose_projects() -> dict[str, dict[str, Any]]:
    return {"single": enabled(compose()), "cluster": compose_cluster()}


def is_conquian(service: dict[str, Any]) -> bool:
    return str(service.get("image", "")).startswith("conquian:")


@cache
def k8s_docs() -> tuple[dict[str, Any], ...]:
    return tuple(doc for path in sorted(K8S.glob("*.yaml")) for doc in documents(path))


@cache
def k8s_cluster_docs() -> tuple[dict[str, Any], ...]:
    """The manifests deploy/k8s-cluster adds (its kustomization and patches left out)."""
    return tuple(
        doc
        for path in sorted(K8S_CLUSTER.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in documents(path)
    )


def k8s_kind(*kinds: str) -> list[dict[str, Any]]:
    return [doc for doc in k8s_docs() if doc.get("kind") in kinds]


def containers(kinds: tuple[str, ...] = tuple(WORKLOADS)) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(workload/container, container)`` of every k8s workload, deploy/k8s-cluster's too."""
    for doc in (*k8s_kind(*kinds), *(d for d in k8s_cluster_docs() if d.get("kind") in kinds)):
        for container in doc["spec"]["template"]["spec"]["containers"]:
            yield f"{doc['metadata']['name']}/{container['name']}", container


@cache
def dockerfile() -> tuple[tuple[str, str], ...]:
    """The Dockerfile's instructions ``(INSTRUCTION, arguments)``, continuations joined."""
    out: list[tuple[str, str]] = []
    current = ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        instruction, _, rest = current.strip().partition(" ")
        out.append((instruction.upper(), rest.strip()))
        current = ""
    return tuple(out)


def docker_cmd() -> list[str]:
    [cmd] = [json.loads(rest) for instr, rest in dockerfile() if instr == "CMD"]
    assert isinstance(cmd, list), "CMD must be in exec form (a JSON array)"
    return cmd


def compose_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


def redis_server_of(url: str) -> str:
    """A REDIS_URL without its user and password: the server and database it names."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port}{parts.path}"


def acl_users() -> list[str]:
    """The Redis users of ``deploy/redis/users.acl``, ``default`` aside."""
    lines = (DEPLOY / "redis" / "users.acl").read_text().splitlines()
    names = [line.split()[1] for line in lines if line.startswith("user ")]
    return [name for name in names if name != "default"]


def interpolated_default(value: str) -> str:
    """``${NAME:-16}`` → ``16``; a plain value unchanged."""
    match = re.fullmatch(r"\$\{\w+:?-([^}]*)\}", value)
    return match.group(1) if match else value


def argv_of(command: str | list[str]) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]


def healthcheck_argv(test: list[str] | str) -> list[str]:
    """The command a compose ``healthcheck.test`` runs (``CMD`` or ``CMD-SHELL``)."""
    if isinstance(test, str):
        return shlex.split(test)
    if test[0] == "CMD":
        return test[1:]
    if test[0] == "CMD-SHELL":
        return shlex.split(test[1])
    raise AssertionError(f"unexpected healthcheck test {test!r}")


def k8s_argv(container: dict[str, Any]) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def probes(container: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        if kind in container:
            yield kind, container[kind]


# --- what the code provides -------------------------------------------------------------------


@cache
def known_env_names() -> frozenset[str]:
    """Every variable ``Settings`` reads, and any other the services read with ``os.environ``."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names = {f"{prefix}{name}".upper() for name in Settings.model_fields}
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
        elif isinstance(alias, str):
            names.add(alias)
    read = re.compile(r"""(?:environ(?:\.get)?|getenv)\s*[(\[]\s*["']([A-Z][A-Z0-9_]+)["']""")
    for path in (ROOT / "services").rglob("*.py"):
        names.update(read.findall(path.read_text()))
    # the passwords deploy/redis/render-acl.sh reads, one a user of users.acl
    names.update(f"CONQUIAN_REDIS_PASSWORD_{user.upper()}" for user in acl_users())
    return frozenset(names)


def module_problems(name: str) -> list[str]:
    """``python -m name`` must find a module with a ``__main__`` guard (or a package __main__)."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        return [f"python -m {name}: no such module"]
    if spec.submodule_search_locations is not None:
        return [] if find_spec(f"{name}.__main__") else [f"python -m {name}: no __main__"]
    source = Path(str(spec.origin)).read_text()
    if not re.search(r"""if __name__ == ["']__main__["']""", source):
        return [f"python -m {name}: the module has no __main__ guard"]
    return []


def code_problems(code: str) -> list[str]:
    """``python -c code`` must compile, and every module and name it imports must exist."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"python -c: {exc}"]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            problems += [f"import {a.name}" for a in node.names if not find_spec(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if not find_spec(node.module):
                problems.append(f"from {node.module} import …: no such module")
                continue
            module = importlib.import_module(node.module)
            problems += [
                f"from {node.module} import {a.name}"
                for a in node.names
                if not hasattr(module, a.name) and not find_spec(f"{node.module}.{a.name}")
            ]
    return problems


def find_spec(name: str) -> object | None:
    """``importlib.util.find_spec``, None also when a parent package is missing."""
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None


def app_problems(argv: list[str]) -> list[str]:
    """``uvicorn [--factory] module:attr`` must name an existing (callable, for --factory) attr."""
    [target] = [a for a in argv[1:] if not a.startswith("-") and ":" in a]
    module_name, _, attr = target.partition(":")
    app = getattr(importlib.import_module(module_name), attr, None)
    if app is None:
        return [f"uvicorn {target}: no such attribute"]
    if "--factory" in argv and not callable(app):
        return [f"uvicorn --factory {target}: not callable"]
    return []


def entry_point_problems(argv: list[str]) -> list[str]:
    """What is wrong with the entry point of a command line (nothing, for a foreign program)."""
    program = Path(argv[0]).name
    if program.startswith("python"):
        if "-m" in argv:
            return module_problems(argv[argv.index("-m") + 1])
        if "-c" in argv:
            return code_problems(argv[argv.index("-c") + 1])
        return [f"{argv}: neither -m nor -c"]
    if program == "uvicorn":
        return app_problems(argv)
    if program == "conquian":
        from services.cli import SUBCOMMANDS

        names = {name for name, _ in SUBCOMMANDS}
        return [] if argv[1] in names else [f"conquian {argv[1]}: no such subcommand"]
    return []  # redis-server, redis-cli, sh: not ours


def served_ports(argv: list[str], env: dict[str, str]) -> set[int]:
    """The ports a command listens on: uvicorn's --port, the metrics port, Redis' 6379."""
    ports = {
        int(argv[argv.index(flag) + 1]) for flag in ("--port", "--metrics-port") if flag in argv
    }
    if "CONQUIAN_METRICS_PORT" in env:
        ports.add(int(env["CONQUIAN_METRICS_PORT"]))
    if runs_redis(argv):
        ports.add(6379)  # deploy/redis/redis.conf
        if "--cluster-enabled" in argv:
            ports.add(16379)  # the cluster bus: the port + 10000
    return ports


def runs_redis(argv: list[str]) -> bool:
    """redis-server, directly or through deploy/redis/cluster-node.sh or acl-server.sh (which
    exec it)."""
    starters = {"cluster-node.sh", "acl-server.sh"}
    return Path(argv[0]).name == "redis-server" or (
        Path(argv[0]).name == "sh" and len(argv) > 1 and Path(argv[1]).name in starters
    )


def all_commands() -> Iterator[tuple[str, list[str]]]:
    """Every command line in deploy/: CMD, compose commands and health checks, k8s commands and
    exec probes."""
    yield "Dockerfile CMD", docker_cmd()
    for project, spec in compose_projects().items():
        for name, service in spec["services"].items():
            if "command" in service:
                yield f"compose {project} {name}", argv_of(service["command"])
            if "healthcheck" in service:
                test = service["healthcheck"]["test"]
                yield f"compose {project} {name} healthcheck", healthcheck_argv(test)
    for where, container in containers((*WORKLOADS, "Job")):
        yield f"k8s {where}", k8s_argv(container)
        for kind, probe in probes(container):
            if "exec" in probe:
                yield f"k8s {where} {kind}", probe["exec"]["command"]


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", sorted(DEPLOY.rglob("*.yaml")), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_every_yaml_file_parses_into_mappings(path: Path) -> None:
    docs = documents(path)
    assert docs and all(isinstance(doc, dict) for doc in docs)


def image_problem(image: str) -> str | None:
    """None if ``image`` names a full version (``x.y.z`` in the tag) or a digest."""
    name, _, digest = image.partition("@")
    if digest:
        return None if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) else f"{image}: bad digest"
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        return f"{image}: no tag"
    tag = last.partition(":")[2]
    if tag == "latest" or not re.search(r"\d+\.\d+\.\d+", tag):
        return f"{image}: tag {tag!r} is not a full version"
    return None


def test_images_are_pinned() -> None:
    froms = [rest.split()[0] for instr, rest in dockerfile() if instr == "FROM"]
    stages = {
        rest.split()[-1]
        for instr, rest in dockerfile()
        if instr == "FROM" and " AS " in rest.upper()
    }
    images = [image for image in froms if image not in stages]
    for project in compose_projects().values():
        images += [s["image"] for s in project["services"].values() if "image" in s]
    images += [c["image"] for _, c in containers((*WORKLOADS, "Job"))]
    for kustomization in k8s_kind("Kustomization"):
        images += [f"{i.get('newName', i['name'])}:{i['newTag']}" for i in kustomization["images"]]
    assert images
    assert [p for p in map(image_problem, images) if p] == []


def waits_for(services: dict[str, Any], service: dict[str, Any]) -> set[str]:
    """The services ``service`` starts after: healthy ones (with a health check), or one-shot
    ones that completed successfully; never an optional dependency (``required: false``)."""
    out = set()
    for dep, how in (service.get("depends_on") or {}).items():
        assert dep in services, f"depends on {dep}, which does not start"
        assert how.get("required", True) is True, f"{dep}: an optional dependency"
        healthy = how.get("condition") == "service_healthy" and "healthcheck" in services[dep]
        if healthy or how.get("condition") == "service_completed_successfully":
            out.add(dep)
    return out


STORE_READY = {"single": "redis", "cluster": "redis-cluster-init"}
"""What every Conquian service waits for in each compose project."""


@pytest.mark.parametrize("project", ["single", "cluster"])
def test_compose_services_are_health_checked_or_wait_for_redis(project: str) -> None:
    services = compose_projects()[project]["services"]
    for name, service in services.items():
        waits = waits_for(services, service)
        assert "healthcheck" in service or waits, f"{name}: no healthcheck, waits for none"
        if is_conquian(service):
            assert STORE_READY[project] in waits, f"{name} must wait for {STORE_READY[project]}"


@pytest.mark.parametrize("project", ["single", "cluster"])
def test_compose_health_checks_probe_ports_the_service_serves(project: str) -> None:
    for name, service in compose_projects()[project]["services"].items():
        if "command" not in service or "healthcheck" not in service:
            continue
        argv = argv_of(service["command"])
        check = " ".join(healthcheck_argv(service["healthcheck"]["test"]))
        ports = {int(p) for p in re.findall(r"http://127\.0\.0\.1:(\d+)", check)}
        assert ports <= served_ports(argv, compose_env(service)), name


@pytest.mark.parametrize("project", ["single", "cluster"])
def test_compose_services_agree_on_shards_and_the_workers_fit(project: str) -> None:
    services = compose_projects()[project]["services"]
    for setting in ("CONQUIAN_SHARDS", "CONQUIAN_NAMESPACE", "REDIS_URL"):
        values = {compose_env(s).get(setting) for s in services.values() if is_conquian(s)}
        if setting == "REDIS_URL":  # one server, each service its own user (users.acl)
            values = {None if v is None else redis_server_of(v) for v in values}
        assert len(values) == 1 and None not in values, f"{setting}: {values}"
    shards = int(interpolated_default(compose_env(services["gateway"])["CONQUIAN_SHARDS"]))
    replicas = services["engine-worker"].get("deploy", {}).get("replicas", 1)
    assert 2 <= replicas <= shards


@pytest.mark.parametrize("where", [w for w, _ in containers()])
def test_k8s_workloads_have_probes_and_resource_limits(where: str) -> None:
    container = dict(containers())[where]
    assert {"readinessProbe", "livenessProbe"} <= container.keys()
    resources = container["resources"]
    assert {"cpu", "memory"} <= resources["limits"].keys()
    assert {"cpu", "memory"} <= resources["requests"].keys()


def test_k8s_probes_reach_ports_the_process_serves() -> None:
    configmap = {k: str(v) for c in k8s_kind("ConfigMap") for k, v in c.get("data", {}).items()}
    for where, container in containers():
        env = configmap | {e["name"]: str(e.get("value", "")) for e in container.get("env", [])}
        served = served_ports(k8s_argv(container), env)
        named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        assert set(named.values()) <= served, where
        for kind, probe in probes(container):
            for how in ("httpGet", "tcpSocket"):
                if how in probe:
                    port = probe[how]["port"]
                    assert named.get(port, port) in served, f"{where} {kind}: port {port}"


def test_gateway_probes_ask_for_routes_of_the_app() -> None:
    from services.gateway.app import create_app

    # The OpenAPI paths: newer FastAPI versions list included routers lazily in app.routes.
    routes = set(create_app(Settings()).openapi()["paths"])
    paths = [
        probe["httpGet"]["path"]
        for _, container in containers()
        if "uvicorn" in k8s_argv(container)[:1]
        for _, probe in probes(container)
        if "httpGet" in probe
    ]
    gateway_check = " ".join(
        healthcheck_argv(compose()["services"]["gateway"]["healthcheck"]["test"])
    )
    paths += re.findall(r"http://127\.0\.0\.1:8000(/[\w/]*)", gateway_check)
    assert {"/healthz", "/readyz"} <= set(paths)
    assert set(paths) <= routes


def test_k8s_engine_workers_fit_the_shards() -> None:
    [configmap] = [c for c in k8s_kind("ConfigMap") if c["metadata"]["name"] == "conquian-config"]
    [worker] = [d for d in k8s_kind("Deployment") if d["metadata"]["name"] == "engine-worker"]
    assert 1 <= worker["spec"]["replicas"] <= int(configmap["data"]["CONQUIAN_SHARDS"])


def env_names_used() -> Iterator[tuple[str, str]]:
    """``(where, name)`` of every environment variable deploy/ sets or interpolates."""
    for instr, rest in dockerfile():
        if instr == "ENV":
            yield from (("Dockerfile", item.partition("=")[0]) for item in shlex.split(rest))
    for path in (DEPLOY / "compose.yaml", DEPLOY / "compose.cluster.yaml"):
        text = path.read_text()
        yield from ((f"{path.name} ${{}}", n) for n in re.findall(r"\$\{([A-Za-z_]\w*)", text))
    for project, spec in compose_projects().items():
        for name, service in spec["services"].items():
            yield from ((f"compose {project} {name}", key) for key in compose_env(service))
    configmaps = [*k8s_kind("ConfigMap", "Secret"), *k8s_cluster_docs()]
    for doc in (d for d in configmaps if d["kind"] in {"ConfigMap", "Secret"}):
        if doc["metadata"]["name"] not in {"redis-config", "redis-cluster-scripts"}:
            data = {**doc.get("data", {}), **doc.get("stringData", {})}
            yield from ((doc["metadata"]["name"], key) for key in data)
    for where, container in containers((*WORKLOADS, "Job")):
        yield from ((where, e["name"]) for e in container.get("env", []))
        for ref in container.get("env", []):
            key_ref = ref.get("valueFrom", {}).get("secretKeyRef")
            if key_ref:
                yield where, key_ref["key"]


def test_environment_variables_are_settings_the_code_reads() -> None:
    used = list(env_names_used())
    assert ("compose single gateway", "CONQUIAN_TOKEN_SECRET") in used
    assert ("compose cluster gateway", "REDIS_URL") in used
    unknown = [(where, n) for where, n in used if n.startswith(OURS) and n not in known_env_names()]
    assert unknown == []


def test_secret_references_match_the_example_secret() -> None:
    secrets = {(s["metadata"]["name"], k) for s in k8s_kind("Secret") for k in s["stringData"]}
    refs = {
        (ref["name"], ref["key"])
        for _, container in containers()
        for e in container.get("env", [])
        if (ref := e.get("valueFrom", {}).get("secretKeyRef"))
    }
    assert refs and refs <= secrets


@pytest.mark.parametrize("where", [w for w, _ in all_commands()])
def test_commands_start_modules_that_exist(where: str) -> None:
    argv = dict(all_commands())[where]
    assert argv, where
    assert entry_point_problems(argv) == []


def test_dockerfile_installs_the_project_without_dev_extras_and_runs_as_non_root() -> None:
    instructions = dockerfile()
    copied = " ".join(rest for instr, rest in instructions if instr == "COPY")
    runs = " ".join(rest for instr, rest in instructions if instr == "RUN")
    assert "pyproject.toml" in copied
    assert re.search(r"pip install\b[^&;]*\s\.(\s|$)", runs), "pip install . (from pyproject)"
    assert "[dev]" not in runs and "-e " not in runs
    users = [rest for instr, rest in instructions if instr == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert docker_cmd()[0] == "uvicorn"


def test_redis_keeps_every_write_and_never_evicts() -> None:
    text = (DEPLOY / "redis" / "redis.conf").read_text()
    directives = dict(
        line.split(None, 1) for line in text.splitlines() if line.strip() and line[0] != "#"
    )
    assert directives["appendonly"] == "yes"
    assert directives["appendfsync"] == "everysec"
    assert directives["maxmemory-policy"] == "noeviction"
    assert directives["rdbcompression"] == "no"  # as the embedded server (docs/deploy.md)
    [copy] = [c for c in k8s_kind("ConfigMap") if c["metadata"]["name"] == "redis-config"]
    assert copy["data"]["redis.conf"] == text, "deploy/k8s/redis.yaml must copy redis.conf"
    redis = compose()["services"]["redis"]
    [mount] = [v for v in redis["volumes"] if v.startswith("./redis/redis.conf:")]
    assert mount.split(":")[1] in argv_of(redis["command"])


def test_kustomization_lists_every_manifest_but_the_examples() -> None:
    [kustomization] = documents(K8S / "kustomization.yaml")
    listed = set(kustomization["resources"])
    present = {
        p.name
        for p in K8S.glob("*.yaml")
        if p.name != "kustomization.yaml" and not p.name.endswith(".example.yaml")
    }
    assert listed == present


# --- the Redis Cluster variants ---------------------------------------------------------------


def flag(argv: list[str], name: str) -> str | None:
    """The value after ``--name`` in a command line, None when absent."""
    return argv[argv.index(f"--{name}") + 1] if f"--{name}" in argv else None


def cluster_nodes() -> dict[str, dict[str, Any]]:
    services = compose_cluster()["services"]
    return {n: s for n, s in services.items() if runs_redis(argv_of(s.get("command", [])))}


def mounted(service: dict[str, Any]) -> dict[str, str]:
    """A compose service's volumes, target → source."""
    return {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}


def test_compose_default_is_the_single_redis() -> None:
    services = enabled(compose())["services"]
    assert not [
        n for n, s in services.items() if "--cluster-enabled" in argv_of(s.get("command", []))
    ]
    for name, service in services.items():
        if is_conquian(service):
            assert set(service["depends_on"]) == {"redis"}, name
            url = urlsplit(compose_env(service)["REDIS_URL"])
            assert redis_server_of(url.geturl()) == "redis://redis:6379/0", name
            assert url.username in acl_users(), name  # a Redis user of its own
            variable = f"CONQUIAN_REDIS_PASSWORD_{url.username.upper()}"
            assert url.password == f"${{{variable}:-}}", name
            assert variable in compose_env(services["redis"]), name


def test_compose_cluster_nodes_run_the_single_redis_config_in_cluster_mode() -> None:
    nodes = cluster_nodes()
    single = compose()["services"]["redis"]
    assert len(nodes) >= 3 and "redis" not in compose_cluster()["services"]
    data_volumes = set()
    for name, node in nodes.items():
        argv = argv_of(node["command"])
        volumes = mounted(node)
        # The script and the configuration are the repository's files, where argv says.
        assert volumes[argv[1]] == "./redis/cluster-node.sh", name
        assert volumes[argv[2]] == "./redis/redis.conf" == mounted(single)[argv[2]], name
        assert flag(argv, "cluster-enabled") == "yes", name
        assert flag(argv, "cluster-config-file") == "nodes.conf", name
        # nodes.conf lives where cluster-node.sh refreshes it: dir /data of redis.conf.
        assert volumes["/data"] in compose_cluster()["volumes"], name
        data_volumes.add(volumes["/data"])
        assert flag(argv, "cluster-announce-hostname") == name, name
        assert flag(argv, "cluster-preferred-endpoint-type") == "hostname", name
        assert flag(argv, "cluster-require-full-coverage") == "no", name
        assert not {"appendonly", "appendfsync", "maxmemory-policy", "save"} & {
            a.lstrip("-") for a in argv
        }, f"{name}: persistence comes from redis.conf only"
        assert node["image"] == single["image"], name
        assert node["healthcheck"]["test"] == single["healthcheck"]["test"], name
    assert len(data_volumes) == len(nodes), "each node needs a volume of its own"


def test_compose_cluster_init_forms_the_cluster_of_every_node() -> None:
    services = compose_cluster()["services"]
    init = services["redis-cluster-init"]
    argv = argv_of(init["command"])
    assert argv[0] == "sh" and mounted(init)[argv[1]] == "./redis/cluster-init.sh"
    assert argv[2:] == [f"{name}:6379" for name in sorted(cluster_nodes())]
    assert waits_for(services, init) == set(cluster_nodes())
    assert init["restart"] == "no"  # one-shot: service_completed_successfully needs its exit


def test_compose_cluster_services_wait_for_the_formed_cluster_and_use_a_node() -> None:
    services = compose_cluster()["services"]
    conquian = {n: s for n, s in services.items() if is_conquian(s)}
    assert set(conquian) == {n for n, s in compose()["services"].items() if is_conquian(s)}
    for name, service in conquian.items():
        assert service["depends_on"] == {
            "redis-cluster-init": {"condition": "service_completed_successfully"}
        }, name
        url = urlsplit(compose_env(service)["REDIS_URL"])
        assert (url.scheme, url.hostname, url.port, url.path) == (
            "redis",
            url.hostname,
            6379,
            "/0",  # a cluster has database 0 only
        )
        assert url.hostname in cluster_nodes(), name


def test_k8s_cluster_overlay_swaps_the_single_redis_for_the_nodes() -> None:
    [kustomization] = documents(K8S_CLUSTER / "kustomization.yaml")
    present = {p.name for p in K8S_CLUSTER.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(kustomization["resources"]) == {"../k8s"} | present
    assert kustomization["namespace"] == documents(K8S / "kustomization.yaml")[0]["namespace"]
    patches = [yaml.safe_load(p["patch"]) for p in kustomization["patches"]]
    deleted = {(p["kind"], p["metadata"]["name"]) for p in patches if p.get("$patch") == "delete"}
    # Everything of the single Redis but its ConfigMap (redis-config), which the nodes mount.
    assert (
        deleted
        == {(d["kind"], "redis") for d in k8s_kind("StatefulSet", "Service")}
        == {
            ("StatefulSet", "redis"),
            ("Service", "redis"),
        }
    )
    [config] = [p for p in patches if p["kind"] == "ConfigMap"]
    assert config["metadata"]["name"] == "conquian-config"
    url = urlsplit(config["data"]["REDIS_URL"])
    [service] = [d for d in k8s_cluster_docs() if d["kind"] == "Service"]
    [nodes] = [d for d in k8s_cluster_docs() if d["kind"] == "StatefulSet"]
    assert (url.scheme, url.hostname, url.port, url.path) == (
        "redis",
        service["metadata"]["name"],
        6379,
        "/0",
    )
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
    assert nodes["spec"]["serviceName"] == service["metadata"]["name"]
    assert (
        service["spec"]["selector"].items()
        <= nodes["spec"]["template"]["metadata"]["labels"].items()
    )


def test_k8s_cluster_nodes_run_the_single_redis_config_and_announce_their_names() -> None:
    [nodes] = [d for d in k8s_cluster_docs() if d["kind"] == "StatefulSet"]
    [single] = k8s_kind("StatefulSet")
    pod = nodes["spec"]["template"]["spec"]
    [container] = pod["containers"]
    argv = k8s_argv(container)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # argv: sh <scripts>/cluster-node.sh <config>/redis.conf ...
    script_dir, conf_dir = (str(Path(argv[i]).parent) for i in (1, 2))
    assert Path(argv[1]).name == "cluster-node.sh" and Path(argv[2]).name == "redis.conf"
    assert volumes[mounts[conf_dir]]["configMap"]["name"] == "redis-config"  # the base's
    scripts = volumes[mounts[script_dir]]["configMap"]["name"]
    assert scripts in {
        d["metadata"]["name"] for d in k8s_cluster_docs() if d["kind"] == "ConfigMap"
    }
    assert mounts["/data"] in {t["metadata"]["name"] for t in nodes["spec"]["volumeClaimTemplates"]}
    assert flag(argv, "cluster-enabled") == "yes"
    assert flag(argv, "cluster-config-file") == "nodes.conf"
    assert flag(argv, "cluster-preferred-endpoint-type") == "hostname"
    assert flag(argv, "cluster-announce-hostname") == f"$(POD_NAME).{nodes['spec']['serviceName']}"
    [pod_name] = [e for e in container["env"] if e["name"] == "POD_NAME"]
    assert pod_name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    [single_container] = single["spec"]["template"]["spec"]["containers"]
    assert container["image"] == single_container["image"]
    assert flag(argv, "maxmemory") == flag(k8s_argv(single_container), "maxmemory")


def test_k8s_cluster_init_job_lists_every_node() -> None:
    [nodes] = [d for d in k8s_cluster_docs() if d["kind"] == "StatefulSet"]
    [job] = [d for d in k8s_cluster_docs() if d["kind"] == "Job"]
    [container] = job["spec"]["template"]["spec"]["containers"]
    argv = k8s_argv(container)
    assert argv[0] == "sh" and Path(argv[1]).name == "cluster-init.sh"
    name, service = nodes["metadata"]["name"], nodes["spec"]["serviceName"]
    count = nodes["spec"]["replicas"]
    assert argv[2:] == [f"{name}-{i}.{service}:6379" for i in range(count)]
    replicas = int({e["name"]: e.get("value") for e in container["env"]}["CLUSTER_REPLICAS"])
    assert count % (replicas + 1) == 0 and count // (replicas + 1) >= 3  # redis-cli's rule


@pytest.mark.parametrize("script", CLUSTER_SCRIPTS)
def test_cluster_scripts_in_k8s_are_verbatim_copies(script: str) -> None:
    [scripts] = [d for d in k8s_cluster_docs() if d["metadata"]["name"] == "redis-cluster-scripts"]
    assert scripts["data"][script] == (DEPLOY / "redis" / script).read_text()


@pytest.mark.parametrize("script", CLUSTER_SCRIPTS)
def test_cluster_scripts_are_valid_sh(script: str) -> None:
    checked = subprocess.run(
        ["sh", "-n", str(DEPLOY / "redis" / script)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("where", [w for w, _ in containers((*WORKLOADS, "Job"))])
def test_k8s_containers_are_hardened(where: str) -> None:
    docs = [*k8s_kind(*WORKLOADS, "Job"), *k8s_cluster_docs()]
    [pod] = [
        d["spec"]["template"]["spec"]
        for d in docs
        if d.get("kind") in {*WORKLOADS, "Job"}
        for c in d["spec"]["template"]["spec"]["containers"]
        if f"{d['metadata']['name']}/{c['name']}" == where
    ]
    [container] = [c for w, c in containers((*WORKLOADS, "Job")) if w == where]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"]


# --- the cluster variants run under the Redis users too -----------------------------------------

CLUSTER_SERVICE_USERS = {
    "gateway": "gateway",
    "engine-worker": "engine",
    "projector": "projector",
    "bots": "bots",
    "clock": "clock",
}
"""The Redis user of each Conquian service, in compose and as a Kubernetes Deployment."""


def _password_variable(user: str) -> str:
    return f"CONQUIAN_REDIS_PASSWORD_{user.upper()}"


def test_compose_cluster_nodes_load_the_users_and_each_service_is_its_own() -> None:
    services = compose_cluster()["services"]
    nodes = cluster_nodes()
    for name, node in nodes.items():
        env = node["environment"]
        template = Path(env["CLUSTER_ACL_TEMPLATE"])
        mounts = {v.split(":")[1]: v.split(":")[0] for v in node["volumes"]}
        assert mounts[str(template)] == "./redis/users.acl", name
        assert mounts[str(template.parent / "render-acl.sh")] == "./redis/render-acl.sh", name
        for user in acl_users():  # render-acl.sh refuses to start without every password
            variable = _password_variable(user)
            assert env[variable] == f"${{{variable}:-}}", (name, user)
    init = services["redis-cluster-init"]["environment"]
    assert init["CLUSTER_USER"] == "admin"
    assert init["REDISCLI_AUTH"] == "${CONQUIAN_REDIS_PASSWORD_ADMIN:-}"
    for name, user in CLUSTER_SERVICE_USERS.items():
        url = urlsplit(services[name]["environment"]["REDIS_URL"])
        assert url.username == user and url.hostname in nodes, name
        assert url.password == f"${{{_password_variable(user)}:-}}", name


def test_k8s_cluster_nodes_load_the_users_and_each_service_is_its_own() -> None:
    [nodes] = [d for d in k8s_cluster_docs() if d["kind"] == "StatefulSet"]
    [node] = nodes["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in node["env"]}
    template = Path(env["CLUSTER_ACL_TEMPLATE"])
    [config] = [
        v["mountPath"] for v in node["volumeMounts"] if v["name"] == "config"
    ]  # redis-config: users.acl and render-acl.sh beside redis.conf
    assert template == Path(config) / "users.acl"
    assert node["envFrom"] == [{"secretRef": {"name": "conquian-redis-users"}}]
    [job] = [d for d in k8s_cluster_docs() if d["kind"] == "Job"]
    [init] = job["spec"]["template"]["spec"]["containers"]
    init_env = {e["name"]: e for e in init["env"]}
    assert init_env["CLUSTER_USER"]["value"] == "admin"
    assert init_env["REDISCLI_AUTH"]["valueFrom"]["secretKeyRef"] == {
        "name": "conquian-redis-users",
        "key": "CONQUIAN_REDIS_PASSWORD_ADMIN",
    }
    [kustomization] = documents(K8S_CLUSTER / "kustomization.yaml")
    urls: dict[str, str] = {}
    for patch in kustomization["patches"]:
        doc = yaml.safe_load(patch["patch"])
        if doc.get("kind") != "Deployment":
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            for variable in container.get("env", []):
                if variable["name"] == "REDIS_URL":
                    urls[container["name"]] = variable["value"]
    assert urls == {
        name: f"redis://{user}:$({_password_variable(user)})@redis-cluster:6379/0"
        for name, user in CLUSTER_SERVICE_USERS.items()
    }
