"""Every module of the project imports first, alone: an import cycle cannot hide behind the order in
which some entry point happens to import things (`eval.thresholds` could not be imported first once)."""
import json
import subprocess
import sys

from tests.conftest import REPO
from tests.test_layering import FLOORS

# In one process: before each module, every module of the packages is forgotten (third-party ones stay
# loaded, which keeps it fast), so each is imported as if first.
ALONE = """
import importlib, json, pathlib, sys
root, packages = pathlib.Path(sys.argv[1]), sys.argv[2:]
sys.path.insert(0, str(root))
names = []
for package in packages:
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
failed = {}
for name in names:
    for loaded in [m for m in sys.modules if m.split(".")[0] in packages]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"
print(json.dumps({"imported": len(names), "failed": failed}))
"""


def modules_failing_alone(root, packages: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", ALONE, str(root), *packages], cwd=root, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_module_imports_alone():
    result = modules_failing_alone(REPO, FLOORS)
    assert result["imported"] > 100 and not result["failed"], result["failed"]


def test_a_planted_cycle_is_named(tmp_path):
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "__init__.py").write_text("")
    (tmp_path / "planted" / "first.py").write_text("from planted.second import B\nA = 1\n")
    (tmp_path / "planted" / "second.py").write_text("from planted.first import A\nB = 2\n")
    failed = modules_failing_alone(tmp_path, ["planted"])["failed"]
    assert set(failed) == {"planted.first", "planted.second"}
    assert "partially initialized module 'planted.first'" in failed["planted.first"]
