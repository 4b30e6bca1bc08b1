"""docs/deploy.md's files agree with the repository: the single-user image of deploy/values.yaml
holds requirements.txt's pins (its package list and its tag), deploy/Dockerfile installs
requirements.txt and nothing else and keeps solutions/ out of the learners' image, the grading
Job uses the grader image of the same build with the gradebook from a Secret, and the hub's
hook gives the gradebook to instructors' servers only."""
from __future__ import annotations

import hashlib
import re
import tomllib
import types

import yaml
from packaging.requirements import Requirement

from conftest import ROOT

DEPLOY = ROOT / "deploy"


def _pins() -> list[str]:
    pins = []
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pins.append(str(Requirement(line)))
    return sorted(pins, key=str.lower)


def _tag(pins) -> str:
    return "pins-" + hashlib.sha256("\n".join(pins).encode()).hexdigest()[:12]


def _values() -> dict:
    return yaml.safe_load((DEPLOY / "values.yaml").read_text())


def _stages() -> dict[str, list[str]]:
    """deploy/Dockerfile's instructions (continuation lines joined), per build stage."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    stages, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if m := re.fullmatch(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, flags=re.I):
            current = m.group(2)
            stages[current] = [line]
        else:
            assert current, f"an instruction before any FROM: {line}"
            stages[current].append(line)
    return stages


def test_singleuser_image_holds_the_pinned_packages():
    pins, values = _pins(), _values()
    listed = sorted((str(Requirement(p)) for p in values["custom"]["singleuserPackages"]), key=str.lower)
    missing, extra = sorted(set(pins) - set(listed)), sorted(set(listed) - set(pins))
    assert not missing and not extra, (
        f"deploy/values.yaml's custom.singleuserPackages differs from requirements.txt (missing "
        f"{missing}, not pinned {extra}); write:\n" + "\n".join(f"    - {p}" for p in pins))
    image = values["singleuser"]["image"]
    assert image["tag"] == _tag(pins), (
        f"requirements.txt changed: rebuild the image and set singleuser.image.tag to "
        f"\"{_tag(pins)}\" (and the Job's image tag) in deploy/")


def test_dockerfile_installs_requirements_and_nothing_else():
    stages = _stages()
    assert list(stages) == ["singleuser", "grader"]
    assert stages["grader"][0].split()[1] == "singleuser", "the grader image must extend the learners' one"
    base = stages["singleuser"][0].split()[1]
    python = next(d for d in yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
                  if isinstance(d, str) and d.startswith("python"))
    assert re.match(rf"python:{re.escape(python.split('=')[-1])}\b", base), (
        f"the image's Python ({base}) is not environment.yml's {python}")
    installs = [line for lines in stages.values() for line in lines if "pip install" in line]
    assert installs, "the Dockerfile installs nothing"
    for line in installs:
        args = line.split("pip install", 1)[1].split()
        if "-r" in args:
            assert args == ["-r", "/opt/course/requirements.txt"], line
        else:
            assert args == ["--no-deps", "/opt/course"], f"a package installed outside requirements.txt: {line}"
    copies = [line.split()[1:] for line in stages["singleuser"] if line.startswith("COPY")]
    assert ["requirements.txt", "/opt/course/requirements.txt"] in copies
    kept = {line[1:].strip("/") for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
            if line.startswith("!")}
    for lines in stages.values():
        for line in lines:
            if line.startswith("COPY"):
                for source in line.split()[1:-1]:
                    assert source.strip("/") in kept, f"{source} is left out of the build context"
    learners = " ".join(stages["singleuser"])
    assert "solutions" not in learners and "judge" not in learners, "the learners' image holds solutions"
    assert any(line.startswith("COPY solutions") for line in stages["grader"])


def test_grading_job_uses_the_grader_image_and_a_secret():
    job = yaml.safe_load((DEPLOY / "autograde-job.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] in ("Never", "OnFailure")
    (container,) = spec["containers"]
    single = _values()["singleuser"]["image"]
    assert container["image"] == f"{single['name'].replace('-singleuser', '-grader')}:{single['tag']}"
    assert container["command"][:4] == ["python", "-m", "autograder", "autograde"]
    env = {e["name"]: e for e in container.get("env", [])}
    assert "COURSE_DB_URL" not in env, "the gradebook's URL (with its password) belongs in a Secret"
    assert {"secretRef": {"name": "course-gradebook"}} in container["envFrom"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert env["COURSE_STATE"]["value"] in mounts


def test_no_password_in_deploy_files():
    from sqlalchemy.engine import make_url

    assert make_url(_values()["hub"]["db"]["url"]).password is None
    assert _values()["hub"]["db"]["type"] == "postgres"
    for path in DEPLOY.iterdir():
        for url in re.findall(r"postgres\w*(?:\+\w+)?://\S+", path.read_text()):
            assert "PASSWORD" in url or make_url(url.strip("'\"")).password is None, f"{path.name}: {url}"


def test_hub_hook_gives_the_gradebook_to_instructors_only():
    values = _values()
    group = tomllib.loads((ROOT / "hub" / "course.toml").read_text())["course"]["instructor_group"]
    assert group in values["hub"]["config"]["JupyterHub"]["load_groups"]
    c = types.SimpleNamespace(KubeSpawner=types.SimpleNamespace())
    for code in values["hub"]["extraConfig"].values():
        exec(compile(code, "values.yaml:hub.extraConfig", "exec"), {"c": c})  # noqa: S102

    def spawn(*groups):
        spawner = types.SimpleNamespace(
            user=types.SimpleNamespace(groups=[types.SimpleNamespace(name=g) for g in groups]),
            environment={}, volumes=[], volume_mounts=[], extra_container_config={})
        c.KubeSpawner.pre_spawn_hook(spawner)
        return spawner

    learner, instructor = spawn("learners"), spawn("learners", group)
    assert learner.extra_container_config == {} and learner.environment == {} and learner.volumes == []
    assert instructor.extra_container_config["envFrom"] == [{"secretRef": {"name": "course-gradebook"}}]
    assert instructor.environment["COURSE_STATE"] in {m["mountPath"] for m in instructor.volume_mounts}
