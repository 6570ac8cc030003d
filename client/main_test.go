package client_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	lds = resource.ListenerType
	rds = resource.RouteType
	cds = resource.ClusterType
	eds = resource.EndpointType
)

// startServer runs xdsd's server on loopback.
func startServer(t *testing.T) *rawxds.Env {
	return rawxds.Start(t, cache.New(nil), server.Config{})
}

func publish(env *rawxds.Env, rs ...*resource.Resource) {
	env.Cache.SetSnapshot("", cache.MustSnapshot(rs...))
}
