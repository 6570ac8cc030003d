// Package xdswire reads and writes xDS requests and responses in the
// protobuf wire format, without decoding them into messages where the
// server need not: a request's node is cut out and decoded once per
// stream, a SotW request's names are hashed rather than decoded, plain
// ACKs are recognised from their bytes, and responses are assembled from
// pre-encoded parts that every stream shares. Every shortcut here falls
// back to protobuf's decoding wherever the outcome could differ; fuzz
// tests, here and in package server, hold each against a reference decoder.
package xdswire
