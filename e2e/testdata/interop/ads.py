"""One ADS stream on gRPC's C-core (Debian's python3-grpcio), for xdsd's
interop test (e2e/interop_test.go).

Usage: ads.py ADDRESS sotw|delta [CA CERT KEY]

With CA, CERT and KEY (PEM files), the channel is TLS: the server's
certificate checked against CA, the client's own certificate CERT.

Each line read from stdin is a request message, hex-encoded, sent on the
stream, or "CANCEL <n>": start n other calls on the channel and cancel
each at once (C-core then resets streams whose HEADERS it never sent); an
empty line, or the end of stdin, half-closes the stream. Each response
is written to stdout as "RECV <hex>", and the call's end as
"END <code> <details>" (code 0 is OK).
"""

import queue
import sys
import threading

import grpc

METHODS = {
    "sotw": "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
    "delta": "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources",
}


def main():
    address, mode = sys.argv[1], sys.argv[2]
    requests = queue.Queue()
    if len(sys.argv) > 3:
        ca, cert, key = (open(f, "rb").read() for f in sys.argv[3:6])
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        channel = grpc.secure_channel(address, creds)
    else:
        channel = grpc.insecure_channel(address)

    def read_stdin():
        for line in sys.stdin:
            line = line.strip()
            if not line:
                break
            if line.startswith("CANCEL "):
                for _ in range(int(line.split()[1])):
                    channel.stream_stream(METHODS[mode])(iter([])).cancel()
                continue
            requests.put(bytes.fromhex(line))
        requests.put(None)

    threading.Thread(target=read_stdin, daemon=True).start()

    def stream():
        while True:
            msg = requests.get()
            if msg is None:
                return
            yield msg

    with channel:
        call = channel.stream_stream(METHODS[mode])(stream())
        try:
            for response in call:
                print("RECV " + response.hex(), flush=True)
            print("END 0 ", flush=True)
        except grpc.RpcError as err:
            print("END %d %s" % (err.code().value[0], err.details()), flush=True)


if __name__ == "__main__":
    main()
