"""docs/deploy.md's files agree with the repository: the single-user image of deploy/values.yaml
holds requirements.txt's pins (its package list and its tag), deploy/Dockerfile installs
requirements.txt and nothing else and keeps solutions/ out of the learners' image, the grading
Job uses the grader image of the same build with the gradebook from a Secret, and the hub's
hook gives the gradebook to instructors' servers only."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tomllib
import types
from pathlib import Path

import pytest
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


def _jobs() -> dict[str, dict]:
    return {name: yaml.safe_load((DEPLOY / name).read_text())
            for name in ("autograde-job.yaml", "sandbox-check-job.yaml")}


def test_grading_job_asks_for_what_bubblewrap_needs_and_no_more():
    """The Job grades as uid 1000 with no capability and no privilege escalation (bubblewrap's
    unprivileged user namespaces contain the kernels); it asks only for what bubblewrap needs
    in a pod: a user namespace of the pod's own so that /proc may be unmasked, and no seccomp
    or AppArmor profile that forbids unshare and mount. The sandbox check runs the same pod."""
    pods = {}
    for name, job in _jobs().items():
        spec = job["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0, name
        assert spec["hostUsers"] is False, name
        assert pod["seccompProfile"] == {"type": "Unconfined"} and pod["appArmorProfile"] == {"type": "Unconfined"}
        own = container["securityContext"]
        assert own == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                       "procMount": "Unmasked"}, (name, own)
        assert not spec.get("hostPID") and not spec.get("hostNetwork") and not own.get("privileged")
        pods[name] = (spec["hostUsers"], pod, own, container["image"], container["workingDir"])
    assert pods["autograde-job.yaml"] == pods["sandbox-check-job.yaml"], "the check must run the Job's pod"
    check = _jobs()["sandbox-check-job.yaml"]["spec"]["template"]["spec"]["containers"][0]
    assert check["command"][:4] == ["python", "-m", "autograder", "grade"]
    assert (ROOT / check["command"][4]).is_file(), check["command"]


def _system_packages() -> dict[str, str]:
    """scripts/system-packages.txt: ``{package: the command of it grading runs}``."""
    listed = {}
    for line in (ROOT / "scripts" / "system-packages.txt").read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            package, command = words
            listed[package] = command
    return listed


def test_grader_image_installs_the_system_packages_grading_needs():
    """The grader stage installs scripts/system-packages.txt, the list make test's installer reads,
    with apt (the learners' image installs none of it), then drops root."""
    stages = _stages()
    grader = stages["grader"]
    assert ["COPY", "scripts/system-packages.txt", "/opt/course/system-packages.txt"] in [
        line.split() for line in grader]
    (install,) = [line for line in grader if "apt-get install" in line]
    assert "/opt/course/system-packages.txt" in install and "awk 'NF {print $1}'" in install, install
    assert grader.index(next(line for line in grader if "system-packages.txt" in line)) < grader.index(install)
    assert not any("apt-get" in line for line in stages["singleuser"])
    users = [line.split()[1] for line in grader if line.startswith("USER")]
    assert users[-1] != "root" and users[-1] != "0", "the grader image must not run as root"
    # the command the image runs to pick the packages picks exactly the list's packages
    picked = subprocess.run(["sh", "-c", "sed 's/#.*//' \"$0\" | awk 'NF {print $1}'",
                             ROOT / "scripts" / "system-packages.txt"], capture_output=True, text=True, check=True)
    assert picked.stdout.split() == list(_system_packages()), picked.stdout


def test_the_system_package_list_covers_what_grading_needs():
    """Each listed package provides the command listed beside it (asked of dpkg here, a Debian
    machine like the image), and the containment the grader uses is among them: the bwrap the
    grader finds is a listed package's file."""
    from autograder.sandbox.view import find_bwrap

    if not shutil.which("dpkg"):
        pytest.skip("needs Debian's dpkg to say which package provides a command")
    listed = _system_packages()
    assert "bubblewrap" in listed
    bwrap = find_bwrap()
    if bwrap is None:
        pytest.skip("bubblewrap is not installed here (make test installs the list as root)")
    owners = {}
    for package, command in listed.items():
        path = shutil.which(command, path="/usr/bin:/bin:/usr/sbin:/sbin")
        assert path, f"{package}'s {command} is not installed here"
        found = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True)
        owners[os.path.realpath(path)] = found.stdout.split(":", 1)[0]
        assert found.returncode == 0 and owners[os.path.realpath(path)] == package, (command, found.stdout)
    assert owners.get(os.path.realpath(bwrap)) == "bubblewrap", (bwrap, owners)


def test_make_tests_installer_reads_the_same_list():
    """scripts/ensure_system_packages.sh installs what the list names: run beside a list naming a
    package whose command is missing, by a user who cannot install, it names that package."""
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("as root the installer would install: needs setpriv to run it as another user")
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="packages-", dir="/tmp"))  # another user may enter it
    try:
        _run_installer_beside(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_installer_beside(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy(ROOT / "scripts" / "ensure_system_packages.sh", scripts)
    (scripts / "system-packages.txt").write_text("# a comment\nno-such-package-47 no-such-command-47  # why\n")
    os.chmod(tmp_path, 0o755)
    os.chmod(scripts, 0o755)
    as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    proc = subprocess.run([*as_user, "sh", str(scripts / "ensure_system_packages.sh")], capture_output=True, text=True)
    assert proc.returncode == 0 and "not installed: no-such-package-47" in proc.stderr, proc.stderr
    (scripts / "system-packages.txt").write_text("coreutils ls\n")
    proc = subprocess.run([*as_user, "sh", str(scripts / "ensure_system_packages.sh")], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


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
