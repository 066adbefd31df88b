"""An independent, deliberately plain trie implementation used only to check the fast one.

It inserts keys one at a time into explicit node objects (the textbook way) and encodes them
recursively, sharing no code with ``ops_tools.chainspec.trie`` beyond Blake2.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


def _blake2(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def _compact(n: int) -> bytes:
    if n < 64:
        return bytes([n * 4])
    if n < 2**14:
        return (n * 4 + 1).to_bytes(2, "little")
    if n < 2**30:
        return (n * 4 + 2).to_bytes(4, "little")
    raise AssertionError("not needed in tests")


def _nibbles(key: bytes) -> tuple[int, ...]:
    out: list[int] = []
    for b in key:
        out += [b >> 4, b & 15]
    return tuple(out)


@dataclass
class Node:
    partial: tuple[int, ...]
    value: bytes | None = None
    children: dict[int, Node] = field(default_factory=dict)


def _insert(node: Node | None, path: tuple[int, ...], value: bytes) -> Node:
    if node is None:
        return Node(path, value)
    common = 0
    while common < min(len(path), len(node.partial)) and path[common] == node.partial[common]:
        common += 1
    if common < len(node.partial):
        # split the node: a new branch at the common prefix
        old = Node(node.partial[common + 1 :], node.value, node.children)
        branch = Node(path[:common], None, {node.partial[common]: old})
        if common == len(path):
            branch.value = value
        else:
            branch.children[path[common]] = Node(path[common + 1 :], value)
        return branch
    rest = path[common:]
    if not rest:
        node.value = value
        return node
    node.children[rest[0]] = _insert(node.children.get(rest[0]), rest[1:], value)
    return node


def _header(kind_bits: int, prefix_len: int, n: int) -> bytes:
    cap = (1 << (8 - prefix_len)) - 1
    if n < cap:
        return bytes([kind_bits | n])
    out = [kind_bits | cap]
    n -= cap
    while n >= 255:
        out.append(255)
        n -= 255
    out.append(n)
    return bytes(out)


def _pack(nibbles: tuple[int, ...]) -> bytes:
    if len(nibbles) % 2:
        nibbles = (0, *nibbles)
    return bytes(nibbles[i] * 16 + nibbles[i + 1] for i in range(0, len(nibbles), 2))


def _encode(node: Node, v1: bool) -> bytes:
    hashed = v1 and node.value is not None and len(node.value) >= 33
    if node.value is None:
        val = b""
    elif hashed:
        val = _blake2(node.value)
    else:
        val = _compact(len(node.value)) + node.value
    n = len(node.partial)
    if not node.children:
        head = _header(0x20, 3, n) if hashed else _header(0x40, 2, n)
        return head + _pack(node.partial) + val
    with_value = 0xC0 if node.value is not None else 0x80
    head = _header(0x10, 4, n) if hashed else _header(with_value, 2, n)
    bitmap = sum(1 << i for i in node.children)
    out = head + _pack(node.partial) + bitmap.to_bytes(2, "little") + val
    for i in sorted(node.children):
        enc = _encode(node.children[i], v1)
        ref = enc if len(enc) < 32 else _blake2(enc)
        out += _compact(len(ref)) + ref
    return out


def reference_root(entries: dict[bytes, bytes], state_version: int) -> bytes:
    root: Node | None = None
    for k, v in entries.items():
        root = _insert(root, _nibbles(k), v)
    if root is None:
        return _blake2(b"\x00")
    return _blake2(_encode(root, state_version == 1))
