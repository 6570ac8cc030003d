//go:build !linux

package configdir

func defaultNotifier() (notifier, error) { return newPortable() }
