package cache

// NodeDecoded reports whether w holds its node decoded (see watchEncoded).
func NodeDecoded(w *Watcher) bool {
	w.cache.mu.Lock()
	defer w.cache.mu.Unlock()
	return w.node != nil
}
