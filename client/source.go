package client

import (
	"errors"

	"github.com/xdsd/xdsd/client/resttransport"
)

// useSource fills in the transport of the sources other than gRPC: REST
// polling (C8) and a file (C7).
func (cfg *Config) useSource() error {
	switch {
	case cfg.REST != "" && cfg.File != "":
		return errors.New("client: Config.REST and Config.File are both set; choose one source")
	case cfg.REST != "":
		if cfg.ADS || cfg.Delta {
			return errors.New("client: REST polling has no ADS and no incremental variant (PROTOCOL T4); set neither Config.ADS nor Config.Delta")
		}
		if cfg.LegacyWildcard {
			// A poll of nothing and one of the legacy wildcard would look
			// the same: the poller waits for names before it posts.
			return errors.New(`client: Config.LegacyWildcard is for gRPC streams; REST polling asks for the wildcard as "*"`)
		}
		cfg.Server = cfg.REST
		cfg.Transport = resttransport.Builder{Client: cfg.HTTPClient}
	case cfg.File != "":
		if cfg.Delta {
			return errors.New("client: a file subscription is state of the world; Config.Delta must be false")
		}
		if _, ok := encodingOf(cfg.File); !ok {
			return errors.New("client: Config.File " + cfg.File + ": unknown extension (want .yaml, .yml, .json, .pb, .pb_text or .txt)")
		}
		// One stream state for every type: the file is read once for all.
		cfg.ADS = true
		cfg.Server = cfg.File
		cfg.Transport = fileBuilder{}
	}
	return nil
}
