#!/usr/bin/env python3
"""Example Python client for crossreg-server.

Shows the model (GetModelInfo), then streams one Generate call, printing text as it
arrives and the Complete message's statistics at the end.

The stubs are generated at build time (CMake target crossreg_python_stubs) into
<build>/python; put that directory on PYTHONPATH:

    PYTHONPATH=build/python python3 clients/python/crossreg_client.py \
        --server localhost:50051 --prompt "Once upon a time" --mode ngram
"""

import argparse
import os
import sys

try:
    import grpc
    from crossreg.v1 import generation_pb2 as pb
    from crossreg.v1 import generation_pb2_grpc as pb_grpc
except ImportError as e:  # Say what to do, not just what is missing.
    sys.exit(
        f"crossreg_client.py: {e}\n"
        "  grpc/protobuf: apt-get install python3-grpcio python3-protobuf\n"
        "  crossreg.v1 stubs: build the crossreg_python_stubs target, then "
        "PYTHONPATH=<build>/python")

MODES = {
    "ar": pb.DECODING_MODE_AR,
    "lossless": pb.DECODING_MODE_LOSSLESS,
    "lossy": pb.DECODING_MODE_LOSSY,
    "ngram": pb.DECODING_MODE_NGRAM,
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default="localhost:50051", help="host:port of crossreg-server")
    p.add_argument("--prompt", default="Once upon a time", help="prompt text")
    p.add_argument("--mode", choices=sorted(MODES), default="ar", help="decoding mode")
    p.add_argument("--max_tokens", "--max-tokens", type=int, default=64,
                   help="most tokens to generate; 0 = the server's default")
    p.add_argument("--ignore_eos", "--ignore-eos", action="store_true", help="generate past EOS")
    p.add_argument("--request_id", "--request-id", default="", help="id for Abort; empty = server assigns")
    p.add_argument("--gamma", type=int, default=0, help="draft slots per forward; 0 = server default")
    p.add_argument("--fork-outcomes", type=int, default=0,
                   help="lossless/lossy forked refill: outcomes with their own draft chain (0 = off)")
    p.add_argument("--fork-depth", type=int, default=0,
                   help="drafts per forked chain or outcome block (0 = gamma, or the server model's trained "
                        "block rows if fewer)")
    p.add_argument("--draft-layout", choices=["chain", "blocks"], default=None,
                   help="lossless/lossy: where drafts come from (default: the adapter's layout)")
    p.add_argument("--adaptive-gamma", choices=["true", "false"], default=None,
                   help="adapt each forward's draft length (needs a server with --adaptive_gamma); "
                        "omitted = the server's default")
    p.add_argument("--ngram-assist", action="store_true",
                   help="lossless/lossy: prompt-lookup drafts take the first slots where text repeats")
    p.add_argument("--beta", type=float, default=0.0, help="lossy mode: EMA weight of draft energies")
    p.add_argument("--tau", type=float, default=0.0, help="lossy mode: acceptance offset in nats (<= 0)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top_k", "--top-k", type=int, default=0)
    p.add_argument("--top_p", "--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None,
                   help="the same seed gives the same text in every exact mode; unset: the server draws one")
    p.add_argument("--stop", action="append", default=[], help="text stop sequence (repeatable)")
    p.add_argument("--min_p", "--min-p", type=float, default=0.0,
                   help="drop tokens below min_p x the top token's probability (0 = off)")
    p.add_argument("--presence_penalty", "--presence-penalty", type=float, default=0.0,
                   help="OpenAI presence penalty over generated tokens, in [-2, 2]")
    p.add_argument("--frequency_penalty", "--frequency-penalty", type=float, default=0.0,
                   help="OpenAI frequency penalty over generated tokens, in [-2, 2]")
    p.add_argument("--repetition_penalty", "--repetition-penalty", type=float, default=None,
                   help="Hugging Face repetition penalty over prompt and output (> 0; 1 = off)")
    p.add_argument("--logit_bias", "--logit-bias", action="append", default=[], metavar="ID:BIAS",
                   help="add BIAS in [-100, 100] to token ID's logit (repeatable)")
    p.add_argument("--top_logprobs", "--top-logprobs", type=int, default=None,
                   help="print each token's log-probability and the top N (0..20) at its position")
    p.add_argument("--logprobs_mode", "--logprobs-mode", choices=["raw", "processed"], default="raw",
                   help="raw: the model's log-softmax; processed: the distribution sampled from")
    p.add_argument("--timeout_s", "--timeout-s", type=float, default=60.0, help="deadline per call")
    p.add_argument("--no_model_info", "--no-model-info", action="store_true",
                   help="skip the GetModelInfo call")
    p.add_argument("--tls", action="store_true", help="connect over TLS, trusting the system's CAs")
    p.add_argument("--tls_ca_file", "--tls-ca-file", default="",
                   help="PEM CA bundle to verify the server with (implies --tls)")
    p.add_argument("--tls_cert_file", "--tls-cert-file", default="",
                   help="mutual TLS: this client's PEM certificate (implies --tls)")
    p.add_argument("--tls_key_file", "--tls-key-file", default="", help="mutual TLS: this client's PEM key")
    p.add_argument("--tls_server_name", "--tls-server-name", default="",
                   help="the name the server's certificate must carry, if not --server's host")
    p.add_argument("--auth_token_file", "--auth-token-file", default="",
                   help="file holding the bearer token; default: the CROSSREG_AUTH_TOKEN variable")
    args = p.parse_args()
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        p.error("--tls_cert_file and --tls_key_file go together")
    return args


def read_bytes(path, flag):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        sys.exit(f"crossreg_client.py: --{flag} {path}: {e.strerror}")


def bearer_token(args):
    """The token from --auth_token_file or CROSSREG_AUTH_TOKEN; None without one."""
    if args.auth_token_file:
        lines = read_bytes(args.auth_token_file, "auth_token_file").decode().split("\n")
        token = next((line.strip() for line in lines if line.strip()), "")
        if not token:
            sys.exit(f"crossreg_client.py: --auth_token_file {args.auth_token_file}: empty")
        return token
    return os.environ.get("CROSSREG_AUTH_TOKEN", "").strip() or None


def open_channel(args):
    """A plaintext or TLS channel as the flags say."""
    tls = args.tls or args.tls_ca_file or args.tls_cert_file or args.tls_server_name
    if not tls:
        return grpc.insecure_channel(args.server)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read_bytes(args.tls_ca_file, "tls_ca_file") if args.tls_ca_file else None,
        private_key=read_bytes(args.tls_key_file, "tls_key_file") if args.tls_key_file else None,
        certificate_chain=read_bytes(args.tls_cert_file, "tls_cert_file") if args.tls_cert_file else None)
    options = [("grpc.ssl_target_name_override", args.tls_server_name)] if args.tls_server_name else []
    return grpc.secure_channel(args.server, credentials, options=options)


def show_model_info(stub, timeout, metadata):
    info = stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=timeout, metadata=metadata)
    adapter = f"rank {info.adapter_rank}" if info.has_adapter else "none"
    print(f"# model {info.model_path} ({info.architecture}): {info.num_layers} layers, "
          f"vocab {info.vocab_size}, context {info.context_length}, adapter {adapter}, "
          f"gamma default {info.default_gamma} max {info.max_gamma}", file=sys.stderr)


def parse_logit_bias(entries):
    """--logit_bias ID:BIAS entries as a {token id: bias} map; a malformed one exits naming it."""
    bias = {}
    for entry in entries:
        token, sep, value = entry.partition(":")
        try:
            if not sep:
                raise ValueError
            bias[int(token)] = float(value)
        except ValueError:
            sys.exit(f"crossreg_client.py: --logit_bias {entry!r}: expected ID:BIAS, e.g. 13:-100")
    return bias


def generate(stub, args, metadata):
    sampling = pb.SamplingParams(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        stop=args.stop, ignore_eos=args.ignore_eos, min_p=args.min_p,
        presence_penalty=args.presence_penalty, frequency_penalty=args.frequency_penalty,
        logit_bias=parse_logit_bias(args.logit_bias),
        logprobs_mode=pb.LOGPROBS_MODE_PROCESSED if args.logprobs_mode == "processed" else pb.LOGPROBS_MODE_RAW)
    # Fields with presence: unset = the server's default (none / off).
    if args.repetition_penalty is not None:
        sampling.repetition_penalty = args.repetition_penalty
    if args.top_logprobs is not None:
        sampling.top_logprobs = args.top_logprobs
    if args.seed is not None:
        sampling.seed = args.seed
    # max_tokens is an `optional` field: left unset, the server uses its default.
    if args.max_tokens:
        sampling.max_tokens = args.max_tokens
    decoding = pb.DecodingParams(
        mode=MODES[args.mode], beta=args.beta, tau=args.tau, gamma=args.gamma,
        fork_outcomes=args.fork_outcomes, fork_depth=args.fork_depth, ngram_assist=args.ngram_assist)
    if args.draft_layout is not None:
        decoding.draft_layout = pb.DRAFT_LAYOUT_BLOCKS if args.draft_layout == "blocks" else pb.DRAFT_LAYOUT_CHAIN
    if args.adaptive_gamma is not None:  # a field with presence: unset = server default
        decoding.adaptive_gamma = args.adaptive_gamma == "true"
    request = pb.GenerateRequest(
        text=args.prompt,
        request_id=args.request_id,
        sampling=sampling,
        decoding=decoding,
    )
    complete = None
    logprobs = []
    print(args.prompt, end="", flush=True)
    # A server-streaming call returns an iterator of GenerateResponse messages.
    for response in stub.Generate(request, timeout=args.timeout_s, metadata=metadata):
        kind = response.WhichOneof("response")
        if kind == "chunk":
            print(response.chunk.text, end="", flush=True)
            logprobs.extend(response.chunk.logprobs)
        elif kind == "complete":
            complete = response.complete
        elif kind == "error":
            # The call's status repeats this and raises below; show it in order.
            print(f"\n# server error {response.error.code}: {response.error.message}", file=sys.stderr)
    print()
    for lp in logprobs:
        top = " ".join(f"{t.token_id}:{t.logprob:.4f}" for t in lp.top)
        print(f"# logprob token={lp.token_id} {lp.logprob:.4f} top=[{top}]", file=sys.stderr)
    if complete is None:
        sys.exit("crossreg_client.py: stream ended without a Complete message")
    spec, t = complete.spec, complete.timings
    reason = pb.FinishReason.Name(complete.finish_reason).removeprefix("FINISH_REASON_").lower()
    print(f"# finish={reason} id={complete.request_id} "
          f"tokens={complete.usage.prompt_tokens}+{complete.usage.completion_tokens} "
          f"cached_prompt={complete.usage.cached_prompt_tokens} "
          f"forwards={spec.forwards} tpf={spec.tokens_per_forward:.2f} "
          f"drafted={spec.drafted} accepted={spec.accepted} "
          f"per_position={list(spec.accepted_per_position)} ar_forwards={spec.ar_forwards} "
          f"seed={complete.usage.seed} "
          f"queue={t.queue_seconds * 1e3:.1f}ms ttft={t.time_to_first_token_seconds * 1e3:.1f}ms "
          f"total={t.total_seconds * 1e3:.1f}ms", file=sys.stderr)


def main():
    args = parse_args()
    token = bearer_token(args)
    # Sent with each call (gRPC's call credentials would refuse a plaintext channel,
    # and a server behind an encrypting mesh takes tokens over plaintext).
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with open_channel(args) as channel:
        stub = pb_grpc.GenerationStub(channel)
        try:
            if not args.no_model_info:
                show_model_info(stub, args.timeout_s, metadata)
            generate(stub, args, metadata)
        except grpc.RpcError as e:
            # RpcError from a call carries the status code and the server's message.
            print(f"\ncrossreg_client.py: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
