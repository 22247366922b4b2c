"""The TypeScript SDK's wiring (sdk/typescript): what CI needs to build and test it, checked without Node.

The SDK's own tests are `node --test` against a real `kx serve` (sdk/typescript/test/); .ci/run runs them.
"""

from __future__ import annotations

import json

from .helpers import REPO

SDK = REPO / "sdk" / "typescript"


def test_the_package_has_no_runtime_dependencies_and_a_lockfile_in_step() -> None:
    package = json.loads((SDK / "package.json").read_text())
    assert package["name"] == "kx-sdk" and package["type"] == "module"
    assert "dependencies" not in package and "peerDependencies" not in package  # the global fetch only
    assert package["exports"]["."] == {"types": "./dist/index.d.ts", "import": "./dist/index.js"}
    lock = json.loads((SDK / "package-lock.json").read_text())
    root = lock["packages"][""]
    assert root["name"] == "kx-sdk" and root.get("dependencies") is None
    assert root["devDependencies"] == package["devDependencies"]
    for name, version in package["devDependencies"].items():  # exact pins, and the lock holds them
        assert version[0].isdigit(), f"{name} {version}: pin an exact version"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version


def test_the_build_is_strict_and_ci_runs_the_tests() -> None:
    config = json.loads((SDK / "tsconfig.json").read_text())["compilerOptions"]
    assert config["strict"] is True and config["declaration"] is True and config["module"] == "NodeNext"
    ci = (REPO / ".ci" / "run").read_text()
    assert "cd sdk/typescript && npm ci" in ci and "npm run check" in ci and "npm test" in ci
    # the README's second test command, with the Python whose kx the tests serve (without it 11 of 11 fail)
    command = '(cd sdk/typescript && npm ci && KX_PYTHON="$(command -v python)" npm test)'
    assert command in (REPO / "README.md").read_text()
    ignored = (SDK / ".gitignore").read_text().split()
    assert {"node_modules/", "dist/"} <= set(ignored)


def test_the_readme_shows_the_example_the_tests_run() -> None:
    example = (SDK / "examples" / "readme.ts").read_text().strip()
    assert example in (REPO / "README.md").read_text()
    assert 'from "kx-sdk"' in example and "RetrievalMode.HYBRID" in example
