"""The few SCALE codec pieces the genesis computation needs (compact integers, vectors)."""

from __future__ import annotations

from ops_tools.errors import InputError


def encode_compact(n: int) -> bytes:
    if n < 0:
        raise ValueError(f"compact integers are unsigned, got {n}")
    if n < 1 << 6:
        return bytes((n << 2,))
    if n < 1 << 14:
        return ((n << 2) | 1).to_bytes(2, "little")
    if n < 1 << 30:
        return ((n << 2) | 2).to_bytes(4, "little")
    body = n.to_bytes((n.bit_length() + 7) // 8, "little")
    if len(body) > 67:
        raise ValueError(f"{n} is too large for a SCALE compact integer")
    return bytes((((len(body) - 4) << 2) | 3,)) + body


def encode_bytes(data: bytes) -> bytes:
    """``Vec<u8>``: compact length, then the bytes."""
    return encode_compact(len(data)) + data


def encode_str(text: str) -> bytes:
    return encode_bytes(text.encode("utf-8"))


class Reader:
    """A cursor over SCALE bytes; every read is bounds-checked and names what it was reading."""

    def __init__(self, data: bytes, what: str = "SCALE data") -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, n: int, field: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise InputError(
                f"{self.what}: truncated while reading {field} at byte {self.pos}"
                f" (needed {n} bytes, {len(self.data) - self.pos} left)"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def u8(self, field: str = "u8") -> int:
        return self._take(1, field)[0]

    def u32(self, field: str = "u32") -> int:
        return int.from_bytes(self._take(4, field), "little")

    def u64(self, field: str = "u64") -> int:
        return int.from_bytes(self._take(8, field), "little")

    def fixed(self, n: int, field: str = "bytes") -> bytes:
        return self._take(n, field)

    def compact(self, field: str = "compact integer") -> int:
        first = self.u8(field)
        mode = first & 3
        if mode == 0:
            return first >> 2
        if mode == 1:
            return int.from_bytes(bytes((first,)) + self._take(1, field), "little") >> 2
        if mode == 2:
            return int.from_bytes(bytes((first,)) + self._take(3, field), "little") >> 2
        return int.from_bytes(self._take((first >> 2) + 4, field), "little")

    def bytes_vec(self, field: str = "Vec<u8>") -> bytes:
        return self._take(self.compact(field), field)

    def string(self, field: str = "string") -> str:
        raw = self.bytes_vec(field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.what}: {field} is not valid UTF-8") from exc
