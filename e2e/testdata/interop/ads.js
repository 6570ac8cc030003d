// One ADS stream on @grpc/grpc-js (Node.js's http2, which is nghttp2), for
// xdsd's interop test (e2e/interop_test.go). The same protocol as ads.py:
//
//   node ads.js ADDRESS sotw|delta [CA CERT KEY]
//
// With CA, CERT and KEY (PEM files), the channel is TLS: the server's
// certificate checked against CA, the client's own certificate CERT.
//
// Each line read from stdin is a request message, hex-encoded, sent on the
// stream, or "CANCEL <n>": start n other calls on the channel and cancel
// each at once; an empty line, or the end of stdin, half-closes the
// stream. Each response
// is written to stdout as "RECV <hex>", and the call's end as
// "END <code> <details>" (code 0 is OK).
'use strict';

const grpc = require('@grpc/grpc-js');
const readline = require('readline');

const methods = {
  sotw: '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
  delta: '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources',
};

const fs = require('fs');

const [address, mode, ca, cert, key] = process.argv.slice(2);
const creds = ca
  ? grpc.credentials.createSsl(fs.readFileSync(ca), fs.readFileSync(key), fs.readFileSync(cert))
  : grpc.credentials.createInsecure();
const client = new grpc.Client(address, creds);
const same = (b) => b;
const call = client.makeBidiStreamRequest(methods[mode], same, same);
call.on('data', (msg) => process.stdout.write('RECV ' + msg.toString('hex') + '\n'));
call.on('error', () => {}); // the status below says it
call.on('status', (st) => {
  client.close();
  // The call is over: exit once the line is out, rather than wait for what
  // the cancelled calls (CANCEL) may keep open in the channel.
  process.stdout.write('END ' + st.code + ' ' + st.details + '\n', () => process.exit(0));
});

let ended = false;
const end = () => {
  if (!ended) {
    ended = true;
    call.end();
  }
};
const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line === '') {
    end();
  } else if (line.startsWith('CANCEL ')) {
    for (let i = 0; i < Number(line.split(' ')[1]); i++) {
      const other = client.makeBidiStreamRequest(methods[mode], same, same);
      other.on('error', () => {});
      other.cancel();
    }
  } else if (!ended) {
    call.write(Buffer.from(line, 'hex'));
  }
});
lines.on('close', end);
