"""A gRPC relay in front of a real Milvus server that passes every call through unchanged, except `GetVersion`,
which it answers with a version of its own choosing: a server whose version ragd cannot read (a build that names
none) is one ragd goes on to create its collection on, trusting the collection's own check. In front of the old
`milvus` 2.3.5 server it lets a test reach what follows `create_collection` on a server that cannot finish it.

It runs in the test's process (its threads) and stops with `stop()`; every other call, its payload and its
metadata, is the real server's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

GET_VERSION = "/milvus.proto.milvus.MilvusService/GetVersion"
# headers gRPC sets itself on every call: not passed on
OWN_HEADERS = ("user-agent", "grpc-", ":")
NO_DEADLINE = 86_400.0  # seconds: a call with more left than this set no deadline


class VersionRelay:
    """127.0.0.1:`port` relays to `upstream` ("127.0.0.1:19530"); GetVersion answers `version`."""

    def __init__(self, upstream: str, port: int, version: str) -> None:
        self.port, self.version = port, version
        self._channel = grpc.insecure_channel(upstream)
        self._server = grpc.server(_pool(), handlers=[_Handler(self)])
        self._server.add_insecure_port(f"127.0.0.1:{port}")

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None).wait(30)
        self._channel.close()

    def answer_version(self, _request: bytes, _context: grpc.ServicerContext) -> bytes:
        from pymilvus.grpc_gen import common_pb2, milvus_pb2

        said = milvus_pb2.GetVersionResponse(status=common_pb2.Status(), version=self.version)
        return bytes(said.SerializeToString())

    def relay(self, method: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        call = self._channel.unary_unary(method)  # bytes in, bytes out

        def relayed(request: bytes, context: grpc.ServicerContext) -> bytes:
            headers = [(k, v) for k, v in context.invocation_metadata() if not k.startswith(OWN_HEADERS)]
            left = context.time_remaining()  # about 2**63 when the caller set no deadline
            try:
                return bytes(call(request, metadata=headers, timeout=left if left < NO_DEADLINE else None))
            except grpc.RpcError as err:
                context.abort(err.code(), err.details() or "")  # type: ignore[attr-defined]
                raise  # abort raises; not reached

        return relayed


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, relay: VersionRelay) -> None:
        self._relay = relay

    def service(self, details: Any) -> grpc.RpcMethodHandler:
        method = details.method
        answer = self._relay.answer_version if method == GET_VERSION else self._relay.relay(method)
        return grpc.unary_unary_rpc_method_handler(answer)


def _pool() -> Any:
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=8, thread_name_prefix="milvus-relay")
