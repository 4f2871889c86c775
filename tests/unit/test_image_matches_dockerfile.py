"""The two ways to build the controller's image agree: the Dockerfile's final stage (for people
with Docker) and ``make image`` (``localcluster/controllerimage.py``, no container engine) set the
same entrypoint, user, working directory, environment, exposed ports and virtualenv path."""

from __future__ import annotations

import json
import re
from pathlib import Path

from localcluster import controllerimage, images

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"


def _final_stage() -> list[tuple[str, str]]:
    """The final stage's instructions (keyword, arguments), continuation lines joined."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    stages: list[list[tuple[str, str]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        elif stages:
            stages[-1].append((keyword.upper(), rest.strip()))
    return stages[-1]


def _one(stage: list[tuple[str, str]], keyword: str) -> str:
    found = [rest for key, rest in stage if key == keyword]
    assert len(found) == 1, f"{keyword}: {found}"
    return found[0]


def _env(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for key, rest in stage:
        if key == "ENV":
            env.update(re.findall(r"(\w+)=(\S+)", rest))
    return env


def _image_config() -> dict[str, object]:
    """The config ``make image`` writes, from the same call with empty layers."""
    image = images.make_image(
        [[]],
        entrypoint=controllerimage.ENTRYPOINT,
        env=controllerimage.ENV,
        user=controllerimage.USER,
        workdir=controllerimage.WORKDIR,
        exposed_ports=controllerimage.EXPOSED_PORTS,
    )
    config: dict[str, object] = json.loads(image.config.data)["config"]
    return config


def test_entrypoint_user_and_workdir_agree() -> None:
    stage = _final_stage()
    config = _image_config()
    assert json.loads(_one(stage, "ENTRYPOINT")) == config["Entrypoint"]
    assert _one(stage, "USER") == config["User"]
    assert _one(stage, "WORKDIR") == config["WorkingDir"]
    exposed = {f"{port}/tcp" for port in _one(stage, "EXPOSE").split()}
    assert exposed == set(config["ExposedPorts"])  # type: ignore[call-overload]


def test_environment_and_virtualenv_agree() -> None:
    stage = _final_stage()
    docker_env = _env(stage)
    ours = dict(item.split("=", 1) for item in controllerimage.ENV)
    assert docker_env.keys() == ours.keys()
    # PATH: the virtualenv's bin first, then the base image's PATH.
    assert docker_env.pop("PATH") == f"{controllerimage.VENV}/bin:$PATH"
    assert ours.pop("PATH").startswith(f"{controllerimage.VENV}/bin:")
    assert docker_env == ours
    copied = _one(stage, "COPY").split()
    assert copied == ["--from=builder", controllerimage.VENV, controllerimage.VENV]


def test_both_take_the_same_files_from_the_repository() -> None:
    """The builder stage's COPY lines name what ``make image`` builds its wheel from."""
    text = DOCKERFILE.read_text()
    copied = set()
    for line in text.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            copied.update(line.split()[1:-1])
    assert copied == set(controllerimage.BUILD_CONTEXT)
