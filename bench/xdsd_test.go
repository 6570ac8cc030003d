package bench

// xdsd goes first in BenchmarkFanout, so its figures sit beside
// go-control-plane's in the same run.
func init() {
	targets = append([]target{{"xdsd", func(others int) (Peer, error) { return NewXDSDPeer(others) }}}, targets...)
}
