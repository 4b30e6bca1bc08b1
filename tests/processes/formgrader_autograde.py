"""What the formgrader's Autograde button does (nbgrader's ``NbGraderAPI.autograde``), for each
student, with the course's nbgrader configuration or with nbgrader's stock one:

    python tests/processes/formgrader_autograde.py ROOT stock|course ASSIGNMENT STUDENT [STUDENT ...]

``ROOT``: the folder of ``nbgrader_config.py``; ``stock``: without the course's autograde and
sanitize preprocessors, as a course without ours would run it. Prints one line per student:
``STUDENT SUCCESS|FAILED error log``."""
import sys

from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader


def main(root: str, mode: str, assignment: str, students: list[str]) -> None:
    config = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()
    if mode == "stock":  # nbgrader's own autograde, as a course without ours would run it
        del config.Autograde["autograde_preprocessors"], config.Autograde["sanitize_preprocessors"]
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    for student in students:
        got = api.autograde(assignment, student)  # what the formgrader's Autograde button calls
        print(student, "SUCCESS" if got["success"] else "FAILED", got.get("error") or "", got.get("log", "")[-3000:])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
