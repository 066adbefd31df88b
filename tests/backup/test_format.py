"""The backup's format without processes: encryption (wrong passphrase, altered bytes, cost
parameters from a hostile header), the manifest's sums, and archives built to attack restore
(path traversal, links, oversized members, a manifest that lies)."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from ops_tools.backup import archive, crypto, store
from ops_tools.backup import manifest as mf
from ops_tools.backup.take import passphrase_from
from ops_tools.errors import InputError

PASS = b"correct horse battery staple"
GENESIS = "0x" + "ab" * 32
# Cheap scrypt for tests that seal many times (the default costs 128 MiB per seal).
FAST = {"log2_n": 14, "r": 8, "p": 1}


def members() -> list[mf.Member]:
    return [mf.Member("nodes/authority-0/node_key", "node_key", "authority-0", b"k" * 32),
            mf.Member("nodes/authority-0/keystore/61757261" + "11" * 32, "keystore",
                      "authority-0", b'"//Alice"'),
            mf.Member("release/chainspec.json", "release", None, b"{}", {"file": "chainspec"})]


def write_backup(tmp_path: Path, monkeypatch, files: dict[str, bytes] | None = None,
                 manifest: dict | None = None) -> Path:
    monkeypatch.setattr(crypto, "LOG2_N", 14)
    ms = members()
    manifest = manifest or mf.build(ms, {"genesis_hash": GENESIS, "chain_id": "net_local"},
                                    "inventories/local", "2026-11-26T00:00:00Z")
    return store.write(tmp_path / "bk", manifest, files or {m.name: m.data for m in ms}, PASS)


def test_seal_round_trip_and_wrong_passphrase():
    sealed = crypto.seal(b"secret bytes", PASS, **FAST)
    assert b"secret bytes" not in sealed
    assert crypto.open_sealed(sealed, PASS, "x") == b"secret bytes"
    with pytest.raises(crypto.DecryptError, match="wrong passphrase, or the file was altered"):
        crypto.open_sealed(sealed, b"another passphrase!", "x")


@pytest.mark.parametrize("offset", [0, 9, 20, 40, -1])
def test_any_altered_byte_fails(offset):
    sealed = bytearray(crypto.seal(b"secret bytes", PASS, **FAST))
    sealed[offset] ^= 1
    with pytest.raises(crypto.DecryptError):
        crypto.open_sealed(bytes(sealed), PASS, "x")


def test_hostile_cost_parameters_are_refused_before_scrypt_runs():
    sealed = crypto.seal(b"x", PASS, **FAST)
    header = crypto.HEADER.unpack_from(sealed)
    # 2^40 would ask scrypt for terabytes of memory
    bomb = crypto.HEADER.pack(header[0], 40, *header[2:]) + sealed[crypto.HEADER.size:]
    with pytest.raises(crypto.DecryptError, match=r"scrypt log2\(n\) = 40 is outside 14..18"):
        crypto.open_sealed(bomb, PASS, "x")


def test_passphrase_file_rules(tmp_path):
    good = tmp_path / "pass"
    good.write_text("a long enough passphrase\n")
    good.chmod(0o600)
    assert passphrase_from(good) == b"a long enough passphrase"
    good.chmod(0o644)
    with pytest.raises(InputError, match="chmod 600"):
        passphrase_from(good)
    short = tmp_path / "short"
    short.write_text("short")
    short.chmod(0o600)
    with pytest.raises(InputError, match="at least 12"):
        passphrase_from(short)


def test_written_backup_is_private_and_reads_back(tmp_path, monkeypatch):
    out = write_backup(tmp_path, monkeypatch)
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for f in out.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert sorted(p.name for p in out.iterdir()) == [store.ARCHIVE, store.MANIFEST]
    verified = store.read(out, PASS)
    assert verified.files["nodes/authority-0/node_key"] == b"k" * 32
    outer = json.loads((out / store.MANIFEST).read_text())
    assert {m["name"]: m["sha256"] for m in outer["members"]}["release/chainspec.json"] \
        == mf.sha256(b"{}")
    # the keys are not readable without the passphrase
    assert b"//Alice" not in (out / store.ARCHIVE).read_bytes()


def test_existing_out_is_never_overwritten_and_a_failure_leaves_nothing(tmp_path, monkeypatch):
    out = write_backup(tmp_path, monkeypatch)
    with pytest.raises(InputError, match="already exists"):
        write_backup(tmp_path, monkeypatch)
    assert store.read(out, PASS)
    monkeypatch.setattr(store, "_write_private", lambda *a: (_ for _ in ()).throw(OSError("disk")))
    with pytest.raises(OSError):
        store.write(tmp_path / "other", json.loads((out / store.MANIFEST).read_text()),
                    {}, PASS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bk"]


def test_wrong_passphrase_names_it(tmp_path, monkeypatch):
    out = write_backup(tmp_path, monkeypatch)
    with pytest.raises(crypto.DecryptError, match="wrong passphrase"):
        store.read(out, b"not the passphrase")


def test_altered_archive_fails_the_sum_before_decrypting(tmp_path, monkeypatch):
    out = write_backup(tmp_path, monkeypatch)
    data = bytearray((out / store.ARCHIVE).read_bytes())
    data[-5] ^= 0xFF
    (out / store.ARCHIVE).write_bytes(bytes(data))
    with pytest.raises(mf.ManifestError, match="damaged or was altered"):
        store.read(out, PASS)


def test_altered_plain_manifest_is_caught_against_the_sealed_copy(tmp_path, monkeypatch):
    out = write_backup(tmp_path, monkeypatch)
    outer = json.loads((out / store.MANIFEST).read_text())
    outer["network"]["genesis_hash"] = "0x" + "cd" * 32  # point it at another network
    (out / store.MANIFEST).write_text(json.dumps(outer))
    with pytest.raises(mf.ManifestError, match="differs from the sealed copy"):
        store.read(out, PASS)


def test_oversized_manifest_is_not_read_whole(tmp_path, monkeypatch):
    out = write_backup(tmp_path, monkeypatch)
    (out / store.MANIFEST).write_bytes(b" " * (mf.MAX_MANIFEST_BYTES + 10))
    with pytest.raises(mf.ManifestError, match="larger than"):
        store.read(out, PASS)


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/cron.d/x", "nodes/../../x",
                                  "nodes//x", "nodes/./x", "nodes\\..\\x", "a/\x00b", "",
                                  "x" * 300, "nodes/.hidden"])
def test_unsafe_member_names_are_refused(name):
    with pytest.raises(mf.ManifestError):
        mf.check_name(name)


def sealed_tar(tmp_path: Path, build) -> Path:
    """A backup directory whose archive is the tar ``build`` writes, sealed with PASS and
    listed with a correct outer sum: only the inner checks stand between it and restore."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        build(tar)
    sealed = crypto.seal(raw.getvalue(), PASS, **FAST)
    out = tmp_path / "evil"
    out.mkdir()
    (out / store.ARCHIVE).write_bytes(sealed)
    manifest = mf.build([], {"genesis_hash": GENESIS}, "x", "now")
    manifest["archive"] = {"file": store.ARCHIVE, "size": len(sealed), "sha256": mf.sha256(sealed)}
    (out / store.MANIFEST).write_bytes(mf.dumps(manifest))
    return out


def add(tar: tarfile.TarFile, name: str, data: bytes = b"x", **kw) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data))


def test_path_traversal_in_the_archive_is_refused_and_nothing_is_written(tmp_path):
    victim = tmp_path / "victim"
    out = sealed_tar(tmp_path, lambda tar: add(tar, "../victim", b"owned"))
    with pytest.raises(mf.ManifestError, match="not a plain relative path"):
        store.read(out, PASS)
    assert not victim.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil"]


def test_links_in_the_archive_are_refused(tmp_path):
    def build(tar):
        info = tarfile.TarInfo("nodes/a/node_key")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(info)

    with pytest.raises(mf.ManifestError, match="not a regular file"):
        store.read(sealed_tar(tmp_path, build), PASS)


def test_oversized_member_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "MAX_MEMBER_BYTES", 1000)
    out = sealed_tar(tmp_path, lambda tar: add(tar, "release/node", b"x" * 2000))
    with pytest.raises(mf.ManifestError, match="more than 1000"):
        store.read(out, PASS)


def test_member_not_in_the_manifest_or_with_another_sum_is_refused(tmp_path):
    def extra(tar):
        add(tar, "manifest.json", mf.dumps(mf.build([], {"genesis_hash": GENESIS}, "x", "now")))
        add(tar, "nodes/a/node_key", b"smuggled")

    with pytest.raises(mf.ManifestError, match="not in the manifest"):
        store.read(sealed_tar(tmp_path, extra), PASS)
    entries = [mf.Member("nodes/a/node_key", "node_key", "a", b"original").entry()]
    with pytest.raises(mf.ManifestError, match="sha256"):
        archive.check_members({"nodes/a/node_key": b"swapped!"}, entries, "x")


def test_duplicate_members_are_refused(tmp_path):
    def build(tar):
        add(tar, "nodes/a/node_key", b"one")
        add(tar, "nodes/a/node_key", b"two")

    with pytest.raises(mf.ManifestError, match="twice"):
        store.read(sealed_tar(tmp_path, build), PASS)


def test_manifest_with_an_unsafe_host_is_refused():
    bad = mf.build([], {"genesis_hash": GENESIS}, "x", "now")
    bad["members"] = [{"name": "nodes/x/node_key", "kind": "node_key", "host": "../x",
                       "size": 1, "sha256": "0" * 64}]
    with pytest.raises(mf.ManifestError, match="host"):
        mf.parse(mf.dumps(bad), "m")


def test_backup_files_are_not_left_readable_by_umask(tmp_path, monkeypatch):
    old = os.umask(0)
    try:
        out = write_backup(tmp_path, monkeypatch)
    finally:
        os.umask(old)
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in out.iterdir())
