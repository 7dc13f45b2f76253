"""Static checks of deploy/: the Dockerfile, the compose file, redis.conf and the k8s manifests.

No container engine runs where the tests run, so these tests read the files: every YAML parses;
images are pinned; every compose service is health-checked or waits for Redis to be healthy;
every Kubernetes workload has readiness and liveness probes and resource limits, probing ports
its process serves; the environment variables are settings the code reads; and every command,
probe and health check starts a module, app or import that exists in the repository.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import AliasChoices

from services.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet"}
OURS = ("CONQUIAN_", "REDIS_")
"""Environment variable prefixes that belong to this project (PYTHON*, PATH, … are not)."""


# --- reading the files ------------------------------------------------------------------------


def documents(path: Path) -> list[Any]:
    """The YAML documents of a file, empty ones left out."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


@cache
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return doc


@cache
def k8s_docs() -> tuple[dict[str, Any], ...]:
    return tuple(doc for path in sorted(K8S.glob("*.yaml")) for doc in documents(path))


def k8s_kind(*kinds: str) -> list[dict[str, Any]]:
    return [doc for doc in k8s_docs() if doc.get("kind") in kinds]


def containers() -> Iterator[tuple[str, dict[str, Any]]]:
    """``(workload/container, container)`` of every k8s workload."""
    for doc in k8s_kind(*WORKLOADS):
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
    if Path(argv[0]).name == "redis-server":
        ports.add(6379)  # deploy/redis/redis.conf
    return ports


def all_commands() -> Iterator[tuple[str, list[str]]]:
    """Every command line in deploy/: CMD, compose commands and health checks, k8s commands and
    exec probes."""
    yield "Dockerfile CMD", docker_cmd()
    for name, service in compose()["services"].items():
        if "command" in service:
            yield f"compose {name}", argv_of(service["command"])
        if "healthcheck" in service:
            yield f"compose {name} healthcheck", healthcheck_argv(service["healthcheck"]["test"])
    for where, container in containers():
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
    images += [s["image"] for s in compose()["services"].values() if "image" in s]
    images += [c["image"] for _, c in containers()]
    for kustomization in k8s_kind("Kustomization"):
        images += [f"{i.get('newName', i['name'])}:{i['newTag']}" for i in kustomization["images"]]
    assert images
    assert [p for p in map(image_problem, images) if p] == []


def test_compose_services_are_health_checked_or_wait_for_redis() -> None:
    services = compose()["services"]
    for name, service in services.items():
        waits = {
            dep
            for dep, how in (service.get("depends_on") or {}).items()
            if how.get("condition") == "service_healthy" and "healthcheck" in services[dep]
        }
        assert "healthcheck" in service or waits, f"{name}: no healthcheck, waits for none"
        if name != "redis":
            assert "redis" in waits, f"{name} must wait for redis: condition: service_healthy"


def test_compose_health_checks_probe_ports_the_service_serves() -> None:
    for name, service in compose()["services"].items():
        if "command" not in service or "healthcheck" not in service:
            continue
        argv = argv_of(service["command"])
        check = " ".join(healthcheck_argv(service["healthcheck"]["test"]))
        ports = {int(p) for p in re.findall(r"http://127\.0\.0\.1:(\d+)", check)}
        assert ports <= served_ports(argv, compose_env(service)), name


def test_compose_services_agree_on_shards_and_the_workers_fit() -> None:
    services = compose()["services"]
    for setting in ("CONQUIAN_SHARDS", "CONQUIAN_NAMESPACE", "REDIS_URL"):
        values = {compose_env(s).get(setting) for n, s in services.items() if n != "redis"}
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
    text = (DEPLOY / "compose.yaml").read_text()
    yield from (("compose ${}", n) for n in re.findall(r"\$\{([A-Za-z_]\w*)", text))
    for name, service in compose()["services"].items():
        yield from ((f"compose {name}", key) for key in compose_env(service))
    for doc in k8s_kind("ConfigMap", "Secret"):
        if doc["metadata"]["name"] != "redis-config":
            data = {**doc.get("data", {}), **doc.get("stringData", {})}
            yield from ((doc["metadata"]["name"], key) for key in data)
    for where, container in containers():
        yield from ((where, e["name"]) for e in container.get("env", []))
        for ref in container.get("env", []):
            key_ref = ref.get("valueFrom", {}).get("secretKeyRef")
            if key_ref:
                yield where, key_ref["key"]


def test_environment_variables_are_settings_the_code_reads() -> None:
    used = list(env_names_used())
    assert ("compose gateway", "CONQUIAN_TOKEN_SECRET") in used
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
