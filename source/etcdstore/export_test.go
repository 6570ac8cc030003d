package etcdstore

// ParsedAhead returns how many files of generation gen r has parsed while
// it was being written; Run must have handed over a load first.
func (r *Replica) ParsedAhead(gen string) int {
	r.prep.mu.Lock()
	defer r.prep.mu.Unlock()
	return len(r.prep.done[gen])
}
