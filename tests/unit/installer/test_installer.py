"""ragd-installer's logic (packaging/installer/ragd_installer), run through its command line into a temp DESTDIR.

The payload is a small fake of the frozen program (bin/ragd, bin/ragctl scripts) with the real unit templates;
every install uses --root or --no-start, so no account is created and no systemctl runs.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from ragd.config import load_config

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "packaging" / "installer"))

from ragd_installer.cli import main  # noqa: E402
from ragd_installer.render import render_unit, unit_word  # noqa: E402

HOME = Path("/home/tester")
TEMPLATES = ("ragd.service", "ragd-system.service", "60-ragd-inotify.conf")


def make_payload(base: Path, version: str, *, tar: bool = False) -> Path:
    """A fake one-directory program: the manifest, two executables, a library file, the unit templates."""
    root = base / f"payload-{version}"
    (root / "bin" / "_internal").mkdir(parents=True)
    (root / "share" / "systemd").mkdir(parents=True)
    (root / "ragd-payload.json").write_text(json.dumps({"name": "ragd", "version": version, "glibc": "2.36"}))
    for name in ("ragd", "ragctl"):
        exe = root / "bin" / name
        exe.write_text(f"#!/bin/sh\necho {name} {version}\n")
        exe.chmod(0o755)
    (root / "bin" / "_internal" / "lib.txt").write_text(version)
    for name in TEMPLATES:
        (root / "share" / "systemd" / name).write_bytes((REPO / "systemd" / name).read_bytes())
    if not tar:
        return root
    archive = base / f"payload-{version}.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(root / "ragd-payload.json", arcname="ragd-payload.json")
        t.add(root / "bin", arcname="bin")
        t.add(root / "share", arcname="share")
    return archive


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def at(dest: Path, path: Path | str) -> Path:
    return dest / str(path).lstrip("/")


def user_install(capsys, tmp_path: Path, dest: Path, version: str = "1.0.0", *extra: str | Path) -> str:
    code, out = run(capsys, "install", "--root", dest, "--payload", make_payload(tmp_path, version), *extra)
    assert code == 0, out
    return out


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(HOME))
    return HOME


def test_user_install_places_files_with_modes(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    out = user_install(capsys, tmp_path, dest, "1.0.0", "--roots", "/srv/notes", "/srv/my docs")
    lib = at(dest, home / ".local/lib/ragd")
    assert os.readlink(lib / "current") == "1.0.0"
    assert mode_of(lib / "1.0.0") == 0o755 and mode_of(lib / "1.0.0/bin/ragd") == 0o755
    for name in ("ragd", "ragctl"):
        assert os.readlink(at(dest, home / ".local/bin" / name)) == str(
            home / f".local/lib/ragd/current/bin/{name}"
        )
    unit = at(dest, home / ".config/systemd/user/ragd.service")
    config = at(dest, home / ".config/ragd/config.toml")
    assert mode_of(unit) == 0o644 and mode_of(config) == 0o600 and mode_of(config.parent) == 0o700
    assert f"ExecStart={home}/.local/lib/ragd/current/bin/ragd run\n" in unit.read_text()
    # `systemctl reload` waits for the agent's answer and fails with it (a bare SIGHUP returned 0 at once)
    assert f"ExecReload={home}/.local/lib/ragd/current/bin/ragctl reload\n" in unit.read_text()
    assert "ReadWritePaths" not in unit.read_text()  # the user unit has no ProtectSystem=
    loaded = load_config(config, environ={})
    assert loaded.roots == (Path("/srv/notes"), Path("/srv/my docs"))
    assert "systemctl --user enable --now ragd" in out and "ran:" not in out
    manifest = json.loads((lib / "install.json").read_text())
    assert manifest["version"] == "1.0.0" and manifest["mode"] == "user" and manifest["config_written"]


def test_system_install_unit_has_the_roots_and_touches_only_destdir(capsys, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    payload = make_payload(tmp_path, "1.0.0")
    code, out = run(
        capsys,
        "install",
        "--system",
        "--root",
        dest,
        "--payload",
        payload,
        "--roots",
        "/srv/docs",
        "/srv/a b%c",
    )
    assert code == 0, out
    unit = (dest / "etc/systemd/system/ragd.service").read_text()
    assert "ExecStart=/opt/ragd/lib/ragd/current/bin/ragd run\n" in unit
    assert "ExecReload=/opt/ragd/lib/ragd/current/bin/ragctl reload\n" in unit
    assert "ReadWritePaths=-/srv/docs\n" in unit and 'ReadWritePaths="-/srv/a b%%c"\n' in unit
    assert "User=ragd" in unit and "ProtectSystem=strict" in unit
    config = dest / "etc/ragd/config.toml"
    assert mode_of(config) == 0o640 and mode_of(dest / "etc/systemd/system/ragd.service") == 0o644
    assert load_config(config).access.connect == "anyone"  # the system service serves every local user
    assert "RuntimeDirectoryMode=0711" in unit
    assert "u ragd - " in (dest / "etc/sysusers.d/ragd.conf").read_text()
    for link in ("opt/ragd/bin/ragd", "usr/local/bin/ragctl"):
        assert os.readlink(dest / link).startswith("/opt/ragd/lib/ragd/current/bin/")
    for command in ("systemd-sysusers /etc/sysusers.d/ragd.conf", "chgrp ragd /etc/ragd/config.toml",
                    "systemctl daemon-reload", "systemctl enable --now ragd"):  # fmt: skip
        assert f"  {command}\n" in out
    assert "ran:" not in out


def test_install_ends_with_how_to_connect_an_ai_tool(capsys, tmp_path: Path, home: Path) -> None:
    out = user_install(capsys, tmp_path, tmp_path / "dest")
    assert out.endswith(
        f"note: connect an AI tool (Claude, Cursor, VS Code): {home}/.local/bin/ragctl mcp-config\n"
    )
    code, out = run(
        capsys,
        "install",
        "--system",
        "--root",
        tmp_path / "sys",
        "--payload",
        make_payload(tmp_path, "1.0.1"),
    )
    assert code == 0, out
    assert "connect an AI tool (Claude, Cursor, VS Code): /opt/ragd/bin/ragctl mcp-config\n" in out


def test_reinstall_keeps_the_config_and_replaces_the_program(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    user_install(capsys, tmp_path / "a", dest, "1.0.0", "--roots", "/srv/one")
    config = at(dest, home / ".config/ragd/config.toml")
    config.write_text('roots = ["/srv/edited"]\n')
    stale = at(dest, home / ".local/lib/ragd/1.0.0/stale.txt")
    stale.write_text("left from the last install")
    out = user_install(capsys, tmp_path / "b", dest, "1.0.0", "--roots", "/srv/two")
    assert "reinstalled ragd 1.0.0" in out and "kept as it is" in out and "/srv/two" in out
    assert config.read_text() == 'roots = ["/srv/edited"]\n' and mode_of(config) == 0o600
    assert not stale.exists()


def test_upgrade_switches_current_keeps_one_previous(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    lib = at(dest, home / ".local/lib/ragd")
    user_install(capsys, tmp_path, dest, "1.0.0")
    config_text = at(dest, home / ".config/ragd/config.toml").read_text()
    code, out = run(capsys, "install", "--root", dest, "--payload", make_payload(tmp_path, "2.0.0", tar=True))
    assert code == 0, out
    assert "upgraded ragd 2.0.0" in out and "try-restart ragd" in out
    assert (
        os.readlink(lib / "current") == "2.0.0"
        and (lib / "2.0.0/bin/_internal/lib.txt").read_text() == "2.0.0"
    )
    assert (lib / "1.0.0").is_dir()  # the previous one stays (a running agent still uses it)
    assert json.loads((lib / "install.json").read_text())["previous_version"] == "1.0.0"
    user_install(capsys, tmp_path, dest, "3.0.0")
    assert sorted(p.name for p in lib.iterdir()) == ["2.0.0", "3.0.0", "current", "install.json"]
    assert at(dest, home / ".config/ragd/config.toml").read_text() == config_text


def test_an_older_installer_refuses_to_downgrade_unless_forced(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    lib = at(dest, home / ".local/lib/ragd")
    user_install(capsys, tmp_path / "a", dest, "1.10.0")
    code, out = run(capsys, "install", "--root", dest, "--payload", make_payload(tmp_path / "b", "1.9.2"))
    assert code == 1 and "ragd 1.10.0 is installed, newer than this installer's 1.9.2: not downgrading" in out
    assert "--force" in out and "upgraded" not in out and os.readlink(lib / "current") == "1.10.0"
    out = user_install(capsys, tmp_path / "c", dest, "1.9.2", "--force")
    assert "downgraded ragd 1.9.2 (user, was 1.10.0)" in out and "upgraded" not in out
    assert os.readlink(lib / "current") == "1.9.2"


def test_a_roots_folder_that_does_not_exist_is_refused(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "me/cfg"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "rt"))  # no user manager here: systemctl never runs
    payload = make_payload(tmp_path, "1.0.0")
    (tmp_path / "docs").mkdir()
    (tmp_path / "a file").write_text("x")
    for missing, what in ((tmp_path / "typo", "does not exist"), (tmp_path / "a file", "is not a folder")):
        code, out = run(
            capsys, "install", "--no-start", "--payload", payload, "--roots", tmp_path / "docs", missing
        )
        assert code == 1 and f"--roots {missing} {what}" in out and "mkdir -p" in out, out
        assert not (tmp_path / "me/.local/lib/ragd").exists()  # refused before anything was written
    code, out = run(capsys, "install", "--no-start", "--payload", payload, "--roots", tmp_path / "docs")
    assert code == 0, out


def test_interrupted_install_debris_is_cleaned(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    lib = at(dest, home / ".local/lib/ragd")
    (lib / ".1.0.0.new-4242" / "bin").mkdir(parents=True)
    user_install(capsys, tmp_path, dest)
    assert not (lib / ".1.0.0.new-4242").exists()


def test_system_reinstall_keeps_roots_of_config_and_ragctl(capsys, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    payload = make_payload(tmp_path, "1.0.0")
    assert (
        run(capsys, "install", "--system", "--root", dest, "--payload", payload, "--roots", "/srv/a")[0] == 0
    )
    (dest / "var/lib/ragd").mkdir(parents=True)
    (dest / "var/lib/ragd/roots.json").write_text(json.dumps({"added": ["/srv/added"], "removed": []}))
    code, out = run(capsys, "install", "--system", "--root", dest, "--payload", payload)
    assert code == 0, out
    unit = (dest / "etc/systemd/system/ragd.service").read_text()
    assert "ReadWritePaths=-/srv/a\n" in unit and "ReadWritePaths=-/srv/added\n" in unit
    assert "chgrp" not in out  # the kept config's ownership is left alone


def test_uninstall_removes_what_install_wrote(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    user_install(capsys, tmp_path, dest)
    data = at(dest, home / ".local/share/ragd")
    data.mkdir(parents=True)
    (data / "index").write_text("index")
    code, out = run(capsys, "uninstall", "--root", dest)
    assert code == 0, out
    left = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert left == [
        "home", "home/tester", "home/tester/.config", "home/tester/.config/ragd",
        "home/tester/.config/ragd/config.toml", "home/tester/.local", "home/tester/.local/share",
        "home/tester/.local/share/ragd", "home/tester/.local/share/ragd/index",
    ]  # fmt: skip
    assert "--purge removes them" in out and "systemctl --user disable --now ragd" in out


@pytest.mark.parametrize("system", [False, True], ids=["user", "system"])
def test_uninstall_then_uninstall_purge_removes_what_the_first_kept(
    capsys, tmp_path: Path, home: Path, system: bool
) -> None:
    """`uninstall` keeps the config and the data and says "--purge removes them"; `uninstall --purge` then failed
    with "no ragd installation found", stranding both."""
    dest = tmp_path / "dest"
    mode = ["--system"] if system else []
    payload = make_payload(tmp_path, "1.0.0")
    assert run(capsys, "install", *mode, "--root", dest, "--payload", payload, "--roots", "/srv/docs")[0] == 0
    data = at(dest, Path("/var/lib/ragd") if system else home / ".local/share/ragd")
    (data / "index").mkdir(parents=True)
    code, out = run(capsys, "uninstall", *mode, "--root", dest)
    assert code == 0 and "--purge removes them" in out, out
    assert data.exists()
    code, out = run(capsys, "uninstall", *mode, "--root", dest, "--purge")
    assert code == 0, out
    assert not data.exists() and "removed" in out
    assert not at(dest, Path("/etc/ragd") if system else home / ".config/ragd").exists()
    code, out = run(capsys, "uninstall", *mode, "--root", dest, "--purge")
    assert code == 1 and "no ragd installation found" in out, out  # nothing left: says so


def test_purge_removes_config_and_data_never_documents(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    docs = dest / "srv/docs"
    (docs / ".rag").mkdir(parents=True)
    (docs / "a.md").write_text("a document")
    (docs / ".rag/a.md.ragjson").write_text("{}")
    user_install(capsys, tmp_path, dest, "1.0.0", "--roots", "/srv/docs")
    at(dest, home / ".local/share/ragd/index").mkdir(parents=True)
    at(dest, home / ".config/systemd/user/ragd.service.d").mkdir()
    code, out = run(capsys, "uninstall", "--root", dest, "--purge")
    assert code == 0, out
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == [
        "home", "home/tester", "home/tester/.local", "home/tester/.local/share",  # made by the test, not install
        "srv", "srv/docs", "srv/docs/.rag", "srv/docs/.rag/a.md.ragjson", "srv/docs/a.md",
    ]  # fmt: skip
    assert "documents and their .rag/ sidecar folders are left as they are" in out


def test_system_purge_keeps_the_account(capsys, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    payload = make_payload(tmp_path, "1.0.0")
    assert run(capsys, "install", "--system", "--root", dest, "--payload", payload)[0] == 0
    code, out = run(capsys, "uninstall", "--system", "--root", dest, "--purge")
    assert code == 0, out
    assert list(dest.rglob("*")) == [] and "userdel ragd" in out


def test_install_without_destdir_and_no_start(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "me/cfg"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "rt"))  # no user manager here: systemctl never runs
    code, out = run(capsys, "install", "--no-start", "--payload", make_payload(tmp_path, "1.0.0"))
    assert code == 0, out
    assert (tmp_path / "me/cfg/systemd/user/ragd.service").is_file()
    assert (tmp_path / "me/cfg/ragd/config.toml").is_file()
    assert os.readlink(tmp_path / "me/.local/bin/ragd") == str(
        tmp_path / "me/.local/lib/ragd/current/bin/ragd"
    )
    assert "--no-start" in out and "is not on your PATH" in out
    assert run(capsys, "uninstall")[0] == 0
    assert not (tmp_path / "me/.local/lib/ragd").exists() and (tmp_path / "me/cfg/ragd/config.toml").is_file()


def test_refuses_to_replace_a_foreign_program(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    foreign = at(dest, home / ".local/bin/ragd")
    foreign.parent.mkdir(parents=True)
    foreign.write_text("#!/bin/sh\n# pip's ragd\n")
    code, out = run(capsys, "install", "--root", dest, "--payload", make_payload(tmp_path, "1.0.0"))
    assert code == 1 and "not replacing" in out and "hint:" in out
    assert not at(dest, home / ".local/lib").exists()


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (None, "cannot read"),
        ({"name": "other", "version": "1"}, "not a ragd payload"),
        ({"name": "ragd", "version": "../x"}, "unusable version"),
    ],
)
def test_bad_payload_is_refused(capsys, tmp_path: Path, manifest: dict | None, message: str) -> None:
    payload = make_payload(tmp_path, "1.0.0")
    if manifest is None:
        (payload / "ragd-payload.json").unlink()
    else:
        (payload / "ragd-payload.json").write_text(json.dumps(manifest))
    code, out = run(capsys, "install", "--root", tmp_path / "dest", "--payload", payload)
    assert code == 1 and message in out


def test_uninstall_without_installation_and_usage(capsys, tmp_path: Path) -> None:
    code, out = run(capsys, "uninstall", "--root", tmp_path)
    assert code == 1 and "no ragd installation found" in out
    assert run(capsys, "install", "--user", "--system")[0] == 2
    code, out = run(capsys, "--version")
    assert code == 0 and "no payload bundled" in out


def test_unit_words_are_quoted_and_escaped() -> None:
    assert unit_word("/srv/docs") == "/srv/docs"
    assert unit_word("/srv/50%") == '"/srv/50%%"'
    assert unit_word('/a b/"q"\\') == '"/a b/\\"q\\"\\\\"'
    assert unit_word("/opt/$x/ragd") == '"/opt/$x/ragd"'
    with pytest.raises(Exception, match="control character"):
        unit_word("/srv/a\nb")


def test_render_unit_replaces_execstart_and_adds_roots() -> None:
    template = (REPO / "systemd" / "ragd-system.service").read_text()
    text = render_unit(template, Path("/p/lib/ragd/current/bin/ragd"), [Path("/r1"), Path("/r 2")])
    lines = text.splitlines()
    assert "ExecStart=/p/lib/ragd/current/bin/ragd run" in lines
    marker = next(i for i, line in enumerate(lines) if line.startswith("# @roots"))
    assert lines[marker + 1 : marker + 3] == ["ReadWritePaths=-/r1", 'ReadWritePaths="-/r 2"']


def test_default_config_with_odd_roots_is_valid_toml(capsys, tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    odd = ['/srv/quote"d', "/srv/back\\slash", "/srv/中文 文档", "/srv/emoji 📄"]
    user_install(capsys, tmp_path, dest, "1.0.0", "--roots", *odd)
    data = tomllib.loads(at(dest, home / ".config/ragd/config.toml").read_text())
    assert data["roots"] == odd


@pytest.mark.skipif(os.geteuid() == 0, reason="runs as root: a system install is allowed")
def test_system_install_needs_root_unless_staged(capsys, tmp_path: Path) -> None:
    code, out = run(capsys, "install", "--system", "--payload", make_payload(tmp_path, "1.0.0"))
    assert code == 1 and "needs root" in out and "--root DESTDIR" in out


@pytest.mark.parametrize(
    ("name", "kind", "link"),
    [("../evil", tarfile.REGTYPE, ""), ("/etc/evil", tarfile.REGTYPE, ""), ("bin/out", tarfile.SYMTYPE, "../../x"),
     ("dev", tarfile.CHRTYPE, "")],
)  # fmt: skip
def test_a_payload_member_that_would_leave_the_program_directory_is_refused(
    tmp_path: Path, name: str, kind: bytes, link: str
) -> None:
    """The check used where tarfile has no "data" filter (Python before 3.11.4, e.g. Debian 12's 3.11.2)."""
    import io

    from ragd_installer.layout import InstallError
    from ragd_installer.payload import _check_members

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        member = tarfile.TarInfo(name)
        member.type, member.linkname = kind, link
        tar.addfile(member, io.BytesIO(b""))
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar, pytest.raises(InstallError, match="unsafe member"):
        _check_members(tar, tmp_path / "dest", tmp_path / "p.tar")
