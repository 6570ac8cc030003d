package h2grpc

// readBufSize is the size (on Unix: see reader.go) of a connection's read buffer while it has
// unread bytes; bigReadBufSize that of the buffer it moves to when a frame
// does not fit (a request larger than the first buffer: an Envoy's SotW
// ACK naming 1,000 clusters, or its node repeated in an ACK), which holds
// any frame this server accepts, so that one read takes what the socket
// has instead of a read per 8 KiB and a copy through the framer.
const (
	readBufSize    = 8 << 10
	bigReadBufSize = 64 << 10
)

// A frame the server accepts fits in a big buffer.
var _ [bigReadBufSize - maxFrameSize - frameHeaderLen]struct{}
