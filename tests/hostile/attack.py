#!/usr/bin/python3
"""One call to a tern shard as a stranger would make it: a few lines of
Python speaking the .proto contract (tern.v1.ParameterServer).

  attack.py ADDRESS CALL [--pb DIR] [--ca CA --cert CERT --key KEY]
            [--worker N] [--run_id R] [--chunks N] [--repeat N]

CALL is join, join_huge (a tiny Join declaring 2^31 chunks), push or
check. Without --ca the channel is plaintext. Prints the gRPC status code
name of each call (OK, PERMISSION_DENIED, UNAVAILABLE, ...) on one line,
then the first call's message on the next. --pb names the folder of the
Python modules protoc made from proto/tern/v1 (tern/v1/*_pb2.py).
"""
import argparse
import sys


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("call", choices=["join", "join_huge", "push", "check"])
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
    if not args.ca:
        return grpc.insecure_channel(args.address)
    read = lambda path: open(path, "rb").read() if path else None
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read(args.ca), private_key=read(args.key),
        certificate_chain=read(args.cert))
    return grpc.secure_channel(args.address, credentials)


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
    return "CheckParams", pb.CheckParamsRequest(
        worker_id=args.worker, step=0, param_checksum=1), \
        pb.CheckParamsResponse


def main():
    global payload_pb2
    args = parse_args()
    sys.path.insert(0, args.pb)
    import grpc
    from tern.v1 import parameter_server_pb2 as pb
    from tern.v1 import payload_pb2
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
