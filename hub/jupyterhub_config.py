"""JupyterHub configuration for `make hub` (started by hub/workshop.py, which prepares users and
folders first). Everything course-specific comes from the course file (hub/course.toml or
$HUB_COURSE); see hub/workshop.py for the two modes.

The hub's own database is SQLite in <state>/private; JUPYTERHUB_DB_URL (any SQLAlchemy URL,
e.g. postgresql://hub@db-host/jupyterhub) points it elsewhere.
"""
import os
import posixpath
import sys
import urllib.parse
from pathlib import Path

from tornado import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workshop

c = get_config()  # noqa: F821 - provided by JupyterHub

course = workshop.load_course()
p = workshop.paths()
port = workshop.port()
# The servers' environment: the course's .venv, or its twin that every user may run (workshop.py).
venv_bin = Path((p["private"] / "server-venv").read_text()) / "bin"

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = port
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = port + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{port + 2}"
c.ConfigurableHTTPProxy.command = [str(workshop.CHP)]
c.JupyterHub.db_url = os.environ.get("JUPYTERHUB_DB_URL") or f"sqlite:///{p['private'] / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(p["private"] / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(p["private"] / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every learner's server

c.Spawner.cmd = [str(venv_bin / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180  # JupyterLab with JAX on a loaded 2-core machine
c.Spawner.http_timeout = 180
c.Spawner.environment = {"PATH": os.pathsep.join([str(venv_bin), "/usr/local/bin", "/usr/bin", "/bin"])}


def _instructor_env(spawner):
    """An instructor's server: the checkout as its root (the formgrader needs the course root
    inside it), the course's nbgrader configuration, and the shared course state."""
    spawner.notebook_dir = str(workshop.REPO)
    _set_env(spawner, JUPYTER_CONFIG_PATH=str(p["instructor_config"]),
             COURSE_REPORTS=str(workshop.reports_dir()))  # grade CSVs, class report: in JupyterLab


def _set_env(spawner, **values):
    # A new dict: the configured one is shared by every spawner.
    spawner.environment = {**spawner.environment, **values}


if course["mode"] == "alone":
    user = workshop.alone_user()
    from jupyterhub.spawner import SimpleLocalProcessSpawner

    class AloneSpawner(SimpleLocalProcessSpawner):
        """Servers run as the hub's user, from the checkout (nbgrader reads its config from the
        cwd), with a HOME of their own in the hub's state: Jupyter, npm and pip write there,
        never into the checkout."""

        def user_env(self, env):
            env = super().user_env(env)
            home = p["state"] / "home" / self.user.name
            home.mkdir(parents=True, exist_ok=True)
            env["HOME"] = str(home)
            return env

    c.JupyterHub.spawner_class = AloneSpawner
    c.SimpleLocalProcessSpawner.home_dir_template = str(workshop.REPO)  # the server's cwd
    c.JupyterHub.authenticator_class = "dummy"
    c.DummyAuthenticator.password = (p["private"] / "password").read_text().strip()
    c.Authenticator.allowed_users = {user}
    c.Authenticator.admin_users = {user}
    if os.geteuid() == 0:
        c.Spawner.args = ["--allow-root"]

    def pre_spawn_hook(spawner):
        _instructor_env(spawner)
else:
    c.JupyterHub.spawner_class = "localprocess"  # each server runs as its own system user
    c.JupyterHub.authenticator_class = "pam"
    c.Authenticator.allowed_users = set(course["instructors"]) | set(course["learners"])
    c.JupyterHub.load_groups = {course["instructor_group"]: {"users": course["instructors"]}}

    def pre_spawn_hook(spawner):
        name = spawner.user.name
        workshop.check_spawn(name, venv_bin.parent)  # a cause on the page, not a bare 500
        if name in course["instructors"]:
            _instructor_env(spawner)
            _set_env(spawner, COURSE_STATE=str(p["course"]),
                     COURSE_DB_URL=os.environ.get("COURSE_DB_URL")
                     or f"sqlite:///{p['gradebook'] / 'gradebook.db'}")
        else:
            _set_env(spawner, JUPYTER_CONFIG_PATH=str(p["learner_config"]))
            workshop.give_chapters(name)  # ~/course: their own copy of the chapters

c.Spawner.pre_spawn_hook = pre_spawn_hook


class ClassicLinks(web.RequestHandler):
    """The formgrader opened in a tab of its own links to the classic notebook's /tree/,
    /notebooks/ and /edit/ pages (its Preview links), which JupyterLab does not serve; the proxy
    hands them to the hub, which moves them under /hub/: sent on to the same file in the
    person's own JupyterLab. (Inside JupyterLab's Formgrader tab, links open in JupyterLab.)"""

    def get(self, kind, path):
        path = posixpath.normpath("/" + path).lstrip("/")
        self.redirect(f"{self.settings['base_url']}hub/user-redirect/lab/tree/{urllib.parse.quote(path)}")


c.JupyterHub.extra_handlers = [(r"/(tree|notebooks|edit)/(.*)", ClassicLinks)]

# HUB_API_TOKEN (for scripts and tests): a service that may start servers and issue tokens.
if os.environ.get("HUB_API_TOKEN"):
    c.JupyterHub.services = [{"name": "workshop-admin", "api_token": os.environ["HUB_API_TOKEN"]}]
    c.JupyterHub.load_roles = [{
        "name": "workshop-admin", "services": ["workshop-admin"],
        "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users"],
    }]
