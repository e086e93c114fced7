#!/usr/bin/python3
"""One call to a tern shard as a stranger would make it: a few lines of
Python speaking the .proto contract (tern.v1.ParameterServer).

  attack.py ADDRESS CALL [--pb DIR] [--ca CA --cert CERT --key KEY]
            [--worker N] [--run_id R] [--chunks N] [--repeat N]

CALL is join, join_huge (a tiny Join declaring 2^31 chunks), push,
garbage_push (PushPull bytes that are no PushPullRequest), check, or
dup_push: join as both workers of an fp32 run of --elements floats,
push worker 0's step 0 and --duplicates copies of it, --spacing_s apart,
which wait at the barrier, then worker 1's push, which answers them all
(one code per call); or nan_push: join as the one worker (--num_workers 1)
of an fp32 run of --elements floats and push step 0 with a NaN in it. Without --ca the channel is plaintext. Prints the gRPC status code
name of each call (OK, PERMISSION_DENIED, UNAVAILABLE, ...) on one line,
then the first call's message on the next. --pb names the folder of the
Python modules protoc made from proto/tern/v1 (tern/v1/*_pb2.py).
"""
import argparse
import sys
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("call", choices=["join", "join_huge", "push",
                                         "garbage_push", "check", "dup_push",
                                         "nan_push"])
    parser.add_argument("--elements", type=int, default=12_500_000)
    parser.add_argument("--duplicates", type=int, default=20)
    parser.add_argument("--spacing_s", type=float, default=0.3)
    parser.add_argument("--pb", default=".")
    parser.add_argument("--ca")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--run_id", default="")
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout_s", type=float, default=10)
    return parser.parse_args()


def channel(grpc, args):
    # Answers carry the whole shard's part of the model; each channel is a
    # connection of its own.
    options = [("grpc.max_receive_message_length", -1),
               ("grpc.use_local_subchannel_pool", 1)]
    if not args.ca:
        return grpc.insecure_channel(args.address, options)
    read = lambda path: open(path, "rb").read() if path else None
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read(args.ca), private_key=read(args.key),
        certificate_chain=read(args.cert))
    return grpc.secure_channel(args.address, credentials, options)


def join_request(pb, args, huge):
    request = pb.JoinRequest(worker_id=args.worker, shard_index=0)
    config = request.config
    config.run_id = args.run_id
    config.num_workers = args.num_workers
    config.num_shards = 1
    config.partition_bytes = 4 if huge else 4 << 20
    config.seed = 1
    config.codec = payload_pb2.CODEC_TERNGRAD
    config.push_layout = payload_pb2.LAYOUT_TERNARY_2BIT
    config.pull_layout = payload_pb2.LAYOUT_SUM_BITS
    tensor = request.param_spec.tensors.add(name="w", dtype=1)
    tensor.shape.append((1 << 31) if huge else 10)
    return request


def fp32_run(request, elements):
    request.config.codec = payload_pb2.CODEC_FP32
    request.config.push_layout = payload_pb2.LAYOUT_RAW
    request.config.pull_layout = payload_pb2.LAYOUT_RAW
    request.param_spec.tensors[0].shape[0] = elements
    return request


def fp32_push(pb, worker, keys, elements, partition):
    """Worker `worker`'s step-0 push of zeros: the chunks as the
    partitioner cuts one tensor (common/partitioner.h)."""
    count = max(1, -(-elements // partition))
    request = pb.PushPullRequest(worker_id=worker, step=0)
    for key in keys:
        size = elements // count + (1 if key < elements % count else 0)
        chunk = request.chunks.add(chunk_key=key)
        chunk.payload.codec = payload_pb2.CODEC_FP32
        chunk.payload.layout = payload_pb2.LAYOUT_RAW
        chunk.payload.format_version = 1
        chunk.payload.num_elements = size
        chunk.payload.num_summands = 1
        chunk.payload.data = bytes(4 * size)
    return request


def dup_push(grpc, pb, args, chan):
    """The pushes held at the barrier, duplicates among them."""
    call = lambda method, response: chan.unary_unary(
        "/tern.v1.ParameterServer/" + method,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response.FromString)
    join, push = call("Join", pb.JoinResponse), call("PushPull",
                                                     pb.PushPullResponse)
    joins = []
    for worker in (0, 1):
        args.worker = worker
        request = fp32_run(join_request(pb, args, False), args.elements)
        joins.append(join.future(request, timeout=args.timeout_s))
    keys = list(joins[0].result().chunk_keys)
    joins[1].result()
    mine = fp32_push(pb, 0, keys, args.elements, (4 << 20) // 4)
    held = []
    for _ in range(args.duplicates + 1):
        held.append(push.future(mine, timeout=args.timeout_s))
        time.sleep(args.spacing_s)
    # Worker 1 on a connection of its own: the held calls fill the shard's
    # per-connection stream limit.
    other = channel(grpc, args).unary_unary(
        "/tern.v1.ParameterServer/PushPull",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.PushPullResponse.FromString)
    other(fp32_push(pb, 1, keys, args.elements, (4 << 20) // 4),
          timeout=args.timeout_s)
    codes = []
    for future in held:
        try:
            future.result()
            codes.append("OK")
        except grpc.RpcError as error:
            codes.append(error.code().name)
    return codes


def nan_push(pb, args, chan):
    """The one worker's step-0 push with a NaN as its first value."""
    call = lambda method, response: chan.unary_unary(
        "/tern.v1.ParameterServer/" + method,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response.FromString)
    request = fp32_run(join_request(pb, args, False), args.elements)
    keys = list(call("Join", pb.JoinResponse)(
        request, timeout=args.timeout_s).chunk_keys)
    push = fp32_push(pb, 0, keys, args.elements, (4 << 20) // 4)
    data = push.chunks[0].payload.data
    push.chunks[0].payload.data = b"\x00\x00\xc0\x7f" + data[4:]  # NaN
    try:
        call("PushPull", pb.PushPullResponse)(push, timeout=args.timeout_s)
        return ["OK"], ""
    except grpc_module.RpcError as error:
        return [error.code().name], error.details()


class RawBytes(bytes):
    """Bytes sent as they are, where a message would be serialized."""
    def SerializeToString(self):
        return bytes(self)


def build_call(pb, args):
    if args.call in ("join", "join_huge"):
        return "Join", join_request(pb, args, args.call == "join_huge"), \
            pb.JoinResponse
    if args.call == "push":
        request = pb.PushPullRequest(worker_id=args.worker, step=0)
        chunk = request.chunks.add(chunk_key=0)
        chunk.payload.codec = payload_pb2.CODEC_TERNGRAD
        chunk.payload.layout = payload_pb2.LAYOUT_TERNARY_2BIT
        chunk.payload.num_elements = 10
        chunk.payload.scalers.append(1.0)
        chunk.payload.data = b"\0" * 3
        return "PushPull", request, pb.PushPullResponse
    if args.call == "garbage_push":
        # A chunks field (2) announcing 65535 bytes that never come.
        return "PushPull", RawBytes(b"\x12\xff\xff\x03"), pb.PushPullResponse
    return "CheckParams", pb.CheckParamsRequest(
        worker_id=args.worker, step=0, param_checksum=1), \
        pb.CheckParamsResponse


def main():
    global payload_pb2, grpc_module  # the enums every request names
    args = parse_args()
    sys.path.insert(0, args.pb)
    import grpc
    grpc_module = grpc
    from tern.v1 import parameter_server_pb2 as pb
    from tern.v1 import payload_pb2
    if args.call == "dup_push":
        print(" ".join(dup_push(grpc, pb, args, channel(grpc, args))))
        print("")
        return
    if args.call == "nan_push":
        codes, message = nan_push(pb, args, channel(grpc, args))
        print(" ".join(codes))
        print(message)
        return
    method, request, response = build_call(pb, args)
    call = channel(grpc, args).unary_unary(
        "/tern.v1.ParameterServer/" + method,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response.FromString)
    codes, first = [], None
    for _ in range(args.repeat):
        try:
            call(request, timeout=args.timeout_s)
            codes.append("OK")
        except grpc.RpcError as error:
            codes.append(error.code().name)
            first = first or error.details()
    print(" ".join(codes))
    print(first or "")


if __name__ == "__main__":
    main()
