"""grpc.health.v1.Health/Check without generated code (two one-field messages).

HealthCheckRequest {string service = 1;}  HealthCheckResponse {ServingStatus status = 1;}
Encoded by hand so this package does not define a second copy of grpc.health.v1 in the
protobuf descriptor pool (grpcio-health-checking may define it too).
"""

CHECK_METHOD = "/grpc.health.v1.Health/Check"
STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(buf: bytes, pos: int):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def encode_request(service: str) -> bytes:
    data = service.encode("utf-8")
    if not data:
        return b""
    return b"\x0a" + _varint(len(data)) + data


def decode_request(buf: bytes) -> str:
    """Inverse of encode_request (for fakes in tests)."""
    pos, service = 0, ""
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        if key != 0x0A:
            raise ValueError("unexpected field in HealthCheckRequest")
        n, pos = _read_varint(buf, pos)
        service = buf[pos:pos + n].decode("utf-8")
        pos += n
    return service


def encode_response(status: int) -> bytes:
    return b"\x08" + _varint(status) if status else b""


def decode_response(buf: bytes) -> int:
    """The status field (0 when absent); other fields are skipped."""
    pos, status = 0, 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
            if field == 1:
                status = value
        elif wire == 2:
            n, pos = _read_varint(buf, pos)
            pos += n
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
    return status
