// Package connlimit bounds the connections a listener holds open for each
// source IP address: a client that opens more is refused them, one by
// one, as they come, while its first ones are served.
package connlimit

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// Listener is a net.Listener whose Accept closes, at once, a connection
// from an IP address that already has Max open, and goes on to the next.
// A connection is open from its Accept until its first Close.
//
// Locking: mu guards open; refused and the logging bound are safe for
// concurrent use.
type Listener struct {
	net.Listener
	max     int
	log     *slog.Logger
	logs    rate.Sometimes // bounds the lines about refusals
	refused atomic.Uint64

	mu   sync.Mutex
	open map[netip.Addr]int // connections open by source address; an address with none has no entry
}

// New returns lis bounded to max connections open per source IP address
// (max > 0). Refusals are logged at Warn to log, ten at once and then one
// a second at most; nil means slog.Default().
func New(lis net.Listener, max int, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.Default()
	}
	return &Listener{Listener: lis, max: max, log: log, open: make(map[netip.Addr]int),
		logs: rate.Sometimes{First: 10, Interval: time.Second}}
}

// Refused returns how many connections l has refused.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Max returns the bound of connections open per source address.
func (l *Listener) Max() int { return l.max }

// Accept returns the next connection whose source address has fewer than
// the bound open; it closes those that have as many.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, ok := sourceIP(nc.RemoteAddr())
		if !ok { // not an IP address (a Unix socket): not bounded
			return nc, nil
		}
		l.mu.Lock()
		n := l.open[ip]
		if n < l.max {
			l.open[ip] = n + 1
		}
		l.mu.Unlock()
		if n >= l.max {
			total := l.refused.Add(1) // counted before the close a client sees
			nc.Close()
			l.logs.Do(func() {
				l.log.Warn("refused a connection: its address has as many open as allowed (--max-conns-per-ip)",
					"peer", nc.RemoteAddr().String(), "max", l.max, "refused_total", total)
			})
			continue
		}
		c := &conn{Conn: nc, l: l, ip: ip}
		if _, ok := nc.(socketConn); ok {
			return &socketConnWrapper{c}, nil
		}
		return c, nil
	}
}

// release counts a connection from ip closed.
func (l *Listener) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] <= 1 {
		delete(l.open, ip)
	} else {
		l.open[ip]--
	}
}

// sourceIP returns the IP address of addr, if it has one.
func sourceIP(addr net.Addr) (netip.Addr, bool) {
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	case *net.UDPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	}
	return netip.Addr{}, false
}

// conn is a connection Listener accepted: its first Close lets its
// address open another.
type conn struct {
	net.Conn
	l      *Listener
	ip     netip.Addr
	closed atomic.Bool
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	if !c.closed.Swap(true) {
		c.l.release(c.ip)
	}
	return err
}

// socketConn is what TCP and Unix connections offer beyond net.Conn, which
// a server may use (its socket, to read and write it directly; and closing
// one way at a time).
type socketConn interface {
	syscall.Conn
	CloseRead() error
	CloseWrite() error
}

// socketConnWrapper is a conn over a socketConn, which it offers too.
type socketConnWrapper struct{ *conn }

func (c *socketConnWrapper) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(socketConn).SyscallConn()
}
func (c *socketConnWrapper) CloseRead() error  { return c.Conn.(socketConn).CloseRead() }
func (c *socketConnWrapper) CloseWrite() error { return c.Conn.(socketConn).CloseWrite() }
